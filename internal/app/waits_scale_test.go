package app_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// countHook counts the Redis commands a client sends (a pipeline's and a MULTI's each).
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if name := c.Name(); name != "multi" && name != "exec" {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// wakeCounter is a Waker that counts.
type wakeCounter struct {
	mu sync.Mutex
	n  int
}

func (w *wakeCounter) EnqueueWake(context.Context, string, int64, workitems.WakeReason) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return nil
}

// A thousand items waiting for CI cost the process nothing: no goroutine, no worker slot;
// the poller's idle round is one Redis command, and a round with due items a few per item.
//
// Not parallel: runtime.NumGoroutine counts the whole test binary's goroutines, so no other
// test may run beside it (parallel tests start after the sequential ones).
func TestAThousandWaitingItemsHoldNoGoroutinesOrWorkers(t *testing.T) {
	const waiting, due = 1000, 100
	cfg, err := parseConfig([]byte(`
waits: {first_poll: 1m, poll_rate: 1000}
templates:
  - name: t
    goal: g
    loop: {kind: script, commands: ["true"]}
    budget: {wall_time: 5m}
    done_check:
      ci: {provider: webhook, repo: acme/calc, required: [test, lint], wait: 10m}
`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	clock := fakeclock.New(t0)
	s := open(t, cfg, clock)
	// An idle worker of concurrency 2 (its handler kept, to ask what it runs).
	hd := s.Handler("idle")
	w := worker.NewServer(s.AsynqOpt, hd, worker.ServerOptions{Queue: s.QueueName(), Concurrency: 2, Logger: s.Logger})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	ctx := context.Background()
	tmpl, _ := cfg.Template("t")

	// The idle worker's goroutines, once it has started them all.
	settle := func() int {
		runtime.GC()
		n := runtime.NumGoroutine()
		for range 50 { // the worker's start spawns its loops; they block at once
			time.Sleep(20 * time.Millisecond)
			m := runtime.NumGoroutine()
			if m == n {
				return n
			}
			n = m
		}
		return n
	}
	before := settle()
	var heapBefore runtime.MemStats
	runtime.ReadMemStats(&heapBefore)

	ids := make([]string, waiting)
	for i := range ids {
		ids[i] = fmt.Sprintf("wait-%04d", i)
		parkForCI(t, s, tmpl, ids[i], fmt.Sprintf("%040x", i), clock)
	}
	if n, err := s.Store.WaitingCount(ctx); err != nil || n != waiting {
		t.Fatalf("waiting: %d %v", n, err)
	}
	// Counted as before (settled): goroutines of the binary that come and go (asynq's
	// periodic ones, a finished test's cleanups) may differ by a few, and late on a loaded
	// machine (a few: ten are allowed); a goroutine per waiting item would add a thousand.
	after := settle()
	var heapAfter runtime.MemStats
	runtime.ReadMemStats(&heapAfter)
	t.Logf("goroutines: %d before parking %d items, %d after", before, waiting, after)
	if after-before > 10 {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before parking %d items, %d after\n%s", before, waiting, after, buf[:runtime.Stack(buf, true)])
	}
	// Not a task among them (the queue was never even made).
	queues, err := s.Inspector().Queues()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(queues, s.QueueName()) {
		if info, err := s.Inspector().GetQueueInfo(s.QueueName()); err != nil || info.Size != 0 {
			t.Fatalf("waiting items must hold no task: %v %+v", err, info)
		}
	}
	if r := hd.Running(); len(r) != 0 {
		t.Fatalf("the worker runs %v", r)
	}

	// A poller on a client that counts its commands, over the same keys.
	hook := &countHook{}
	counted := redis.NewClient(redisOptions(t))
	counted.AddHook(hook)
	t.Cleanup(func() { _ = counted.Close() })
	store := itemstore.NewStore(counted, s.Prefix(), itemstore.WithClock(clock))
	v := verify.New(verify.WithClock(clock), verify.WithCI("webhook", verify.NewRedisCIStore(counted, s.Prefix(), time.Hour, clock)))
	wakes := &wakeCounter{}
	p := &waits.Poller{Store: store, Judge: &waits.Judge{Verifier: v}, Waker: wakes, Config: func() *config.Config { return cfg },
		Clock: clock, Batch: 200}
	if n, err := p.Round(ctx); err != nil || n != 0 { // loads the claim script, if no one has yet
		t.Fatalf("warm-up round: %d %v", n, err)
	}
	hook.n.Store(0)
	if n, err := p.Round(ctx); err != nil || n != 0 {
		t.Fatalf("idle round: %d %v", n, err)
	}
	idle := hook.n.Load()

	// due of them are due now; their CI has not answered.
	for _, id := range ids[:due] {
		if err := s.Store.PostponeWait(ctx, id, clock.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	hook.n.Store(0)
	if n, err := p.Round(ctx); err != nil || n != due {
		t.Fatalf("due round: %d %v", n, err)
	}
	dueCmds := hook.n.Load()
	if wakes.n != 0 {
		t.Fatalf("%d wakes: nothing was decided", wakes.n)
	}
	for _, id := range ids[:due] {
		if np, _ := s.Store.NextPoll(ctx, id); !np.After(clock.Now()) {
			t.Fatalf("%s was not postponed: %v", id, np)
		}
	}
	t.Logf("%d waiting items: goroutines %d before and after; heap %+d KiB (%d KiB → %d KiB); idle poll round %d Redis command(s); a round with %d due %d commands (%.2f per item)",
		waiting, before, (int64(heapAfter.HeapAlloc)-int64(heapBefore.HeapAlloc))/1024, heapBefore.HeapAlloc/1024, heapAfter.HeapAlloc/1024,
		idle, due, dueCmds, float64(dueCmds)/due)
	if idle != 1 {
		t.Errorf("an idle round sent %d Redis commands, want 1", idle)
	}
	if dueCmds > 3*due+1 {
		t.Errorf("a round with %d due sent %d Redis commands, want at most %d", due, dueCmds, 3*due+1)
	}
}

// parkForCI takes a new item to waiting for CI on sha through the store, as the worker's
// pipeline does: create, lease, start, exit, the delivery recorded with the policy's wait.
func parkForCI(t *testing.T, s *sys, tmpl *config.Template, id, sha string, clock *fakeclock.Clock) {
	t.Helper()
	ctx := context.Background()
	it := &workitems.Item{ID: id, Template: tmpl.Name, Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
	if err := s.Store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Store.AcquireLease(ctx, id, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Store.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Store.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverBranch, Outcome: workitems.DeliveryPushed, Commit: sha, PushedSHA: sha, At: clock.Now()}
	d := s.Judge.AfterPush(ctx, tmpl, it, 1, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "checks_passed", Reasons: []string{"ok"}}, del, "")
	if d.Outcome != workitems.OutcomeWait {
		t.Fatalf("after the push: %+v", d)
	}
	if _, err := s.Store.RecordDelivery(ctx, f, d, nil, del, nil); err != nil {
		t.Fatal(err)
	}
	_ = s.Store.ReleaseLease(ctx, f) // the recorded wait ended the attempt's run: nothing may be held

}

// redisOptions are the options of the tests' Redis.
func redisOptions(t *testing.T) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	return o
}
