package waits_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// wakes records the wakes a poller (or a sink) enqueues, once per (item, seq) as the queue does.
type wakes struct {
	mu   sync.Mutex
	seen map[string]workitems.WakeReason
}

func (w *wakes) EnqueueWake(_ context.Context, item string, seq int64, by workitems.WakeReason) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]workitems.WakeReason{}
	}
	if _, dup := w.seen[workitems.WakeTaskID(item, seq)]; !dup {
		w.seen[workitems.WakeTaskID(item, seq)] = by
	}
	return nil
}

func (w *wakes) got() map[string]workitems.WakeReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]workitems.WakeReason{}
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

const cfgYAML = `
waits: {poll_rate: 1000}
templates:
  - name: t
    goal: g
    loop: {kind: script, commands: ["true"]}
    budget: {wall_time: 5m}
    done_check:
      ci: {provider: webhook, repo: acme/calc, required: [test, lint], wait: 10m}
`

type rig struct {
	store *itemstore.Store
	ci    *verify.RedisCIStore
	clock *fakeclock.Clock
	cfg   *config.Config
	judge *waits.Judge
	wakes *wakes
}

func newRig(t testing.TB) *rig {
	t.Helper()
	env := redistest.New(t)
	clock := fakeclock.New(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	cfg, err := config.ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	ci := verify.NewRedisCIStore(env.Client, env.Prefix, time.Hour, clock)
	v := verify.New(verify.WithClock(clock), verify.WithCI("webhook", ci))
	store := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	return &rig{store: store, ci: ci, clock: clock, cfg: cfg, judge: &waits.Judge{Verifier: v}, wakes: &wakes{}}
}

func (r *rig) poller() *waits.Poller {
	return &waits.Poller{Store: r.store, Judge: r.judge, Waker: r.wakes, Config: func() *config.Config { return r.cfg }, Clock: r.clock}
}

// park creates an item and takes it to waiting for CI on sha, as the worker's pipeline does.
func (r *rig) park(t testing.TB, id, sha string) {
	t.Helper()
	ctx := context.Background()
	it := &workitems.Item{ID: id, Template: "t", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
	if err := r.store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := r.store.AcquireLease(ctx, id, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.store.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	tmpl, _ := r.cfg.Template("t")
	del := &workitems.Delivery{Mode: workitems.DeliverBranch, Outcome: workitems.DeliveryPushed, Commit: sha, PushedSHA: sha, At: r.clock.Now()}
	d := r.judge.AfterPush(ctx, tmpl, it, 1, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Reasons: []string{"3 passed"}}, del, "")
	if d.Outcome != workitems.OutcomeWait {
		t.Fatalf("after the push: %+v", d)
	}
	if _, err := r.store.RecordDelivery(ctx, f, d, nil, del, nil); err != nil {
		t.Fatal(err)
	}
	_ = r.store.ReleaseLease(ctx, f)
}

func (r *rig) post(t testing.TB, sha string, checks ...verify.CICheck) {
	t.Helper()
	for i := range checks {
		checks[i].SHA = sha
	}
	if err := r.ci.Put(context.Background(), "acme/calc", sha, checks); err != nil {
		t.Fatal(err)
	}
}

// The poller looks only at due waits, wakes those whose evidence decides (all required checks
// final, or one failed), backs off the rest with their age, and wakes those past their deadline
// without reading anything.
func TestThePollerWakesWhatTheEvidenceDecidesAndBacksOffTheRest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	for _, id := range []string{"green", "red", "half", "quiet"} {
		r.park(t, id, "sha-"+id)
	}
	r.post(t, "sha-green", verify.CICheck{Name: "test", State: verify.CISuccess}, verify.CICheck{Name: "lint", State: verify.CISuccess})
	r.post(t, "sha-red", verify.CICheck{Name: "test", State: verify.CIFailure})
	r.post(t, "sha-half", verify.CICheck{Name: "test", State: verify.CISuccess})
	p := r.poller()

	if n, err := p.Round(ctx); err != nil || n != 0 {
		t.Fatalf("nothing is due before the first poll: %d %v", n, err)
	}
	r.clock.Advance(workitems.DefaultFirstPoll)
	if n, err := p.Round(ctx); err != nil || n != 4 {
		t.Fatalf("round: %d %v", n, err)
	}
	got := r.wakes.got()
	want := map[string]workitems.WakeReason{workitems.WakeTaskID("green", 1): workitems.WakePoll, workitems.WakeTaskID("red", 1): workitems.WakePoll}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("wakes %v, want %v", got, want)
	}
	for _, id := range []string{"half", "quiet"} {
		np, _ := r.store.NextPoll(ctx, id)
		if want := r.clock.Now().Add(workitems.DefaultFirstPoll); !np.Equal(want) {
			t.Fatalf("%s: next poll %v, want %v (first back-off step)", id, np, want)
		}
	}
	// Later polls back off with the wait's age.
	if b := waits.Backoff(5*time.Minute, workitems.DefaultFirstPoll); b != time.Minute {
		t.Fatalf("backoff at 5m: %v", b)
	}
	if b := waits.Backoff(3*time.Hour, workitems.DefaultFirstPoll); b != 10*time.Minute {
		t.Fatalf("backoff is capped: %v", b)
	}

	// Past the deadline: woken by the deadline, nothing read.
	r.clock.Advance(10 * time.Minute)
	if _, err := p.Round(ctx); err != nil {
		t.Fatal(err)
	}
	got = r.wakes.got()
	if got[workitems.WakeTaskID("quiet", 1)] != workitems.WakeDeadline || got[workitems.WakeTaskID("half", 1)] != workitems.WakeDeadline {
		t.Fatalf("deadline wakes: %v", got)
	}
}

// Pollers of several replicas share the due waits: each is looked at by exactly one of them.
func TestPollersOfManyReplicasShareTheWorkWithoutOverlap(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	var ids []string
	for i := range 60 {
		id := fmt.Sprintf("it-%02d", i)
		ids = append(ids, id)
		r.park(t, id, "sha-"+id)
		r.post(t, "sha-"+id, verify.CICheck{Name: "test", State: verify.CISuccess}, verify.CICheck{Name: "lint", State: verify.CISuccess})
	}
	r.clock.Advance(workitems.DefaultFirstPoll)
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &countingWaker{mu: &mu, counts: counts}
			p := r.poller()
			p.Waker, p.Batch = w, 7
			for {
				n, err := p.Round(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	var polled []string
	for id, n := range counts {
		if n != 1 {
			t.Errorf("%s woken %d times", id, n)
		}
		polled = append(polled, id)
	}
	sort.Strings(polled)
	if !slices.Equal(polled, ids) {
		t.Fatalf("woken %d of %d", len(polled), len(ids))
	}
}

type countingWaker struct {
	mu     *sync.Mutex
	counts map[string]int
}

func (c *countingWaker) EnqueueWake(_ context.Context, item string, _ int64, _ workitems.WakeReason) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[item]++
	return nil
}
