package fleet_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/fleet"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

var t0 = time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)

type rig struct {
	t     *testing.T
	env   *redistest.Env
	gate  *fleet.Gate
	clock *fakeclock.Clock
	tmpl  *config.Template
	items map[string]*workitems.Item
}

func newRig(t *testing.T, f config.Fleet) *rig {
	t.Helper()
	env := redistest.New(t)
	clock := fakeclock.New(t0)
	tmpl := &config.Template{Name: "deps", Repos: []string{"https://forge.example/acme/a.git"}, Fleet: &f,
		Deliver: config.Deliver{Mode: workitems.DeliverPullRequest, Forge: "gitea"}}
	return &rig{t: t, env: env, gate: fleet.NewGate(env.Client, env.Prefix, clock), clock: clock, tmpl: tmpl, items: map[string]*workitems.Item{}}
}

// item makes a queued item of the fleet, created n ms after t0 (its place in line).
func (r *rig) item(id string, n int) *workitems.Item {
	it := &workitems.Item{ID: id, Template: r.tmpl.Name, Repo: "https://forge.example/acme/" + id + ".git", State: workitems.StateQueued,
		CreatedAt: t0.Add(time.Duration(n) * time.Millisecond)}
	r.items[id] = it
	return it
}

func (r *rig) acquire(id string) bool {
	r.t.Helper()
	ok, err := r.gate.Acquire(context.Background(), r.tmpl, r.items[id])
	if err != nil {
		r.t.Fatal(err)
	}
	return ok
}

func (r *rig) admit() []string {
	r.t.Helper()
	ids, err := r.gate.Admit(context.Background(), r.tmpl, 100)
	if err != nil {
		r.t.Fatal(err)
	}
	return ids
}

// move runs the gate's transition hook as the store runs it: in the MULTI of the transition.
func (r *rig) move(id string, to workitems.State, d *workitems.Delivery) {
	r.t.Helper()
	it := r.items[id]
	from := it.State
	it.State, it.Delivery = to, d
	ctx := context.Background()
	if _, err := r.env.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		r.gate.TransitionHook()(ctx, p, it, from, nil)
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) usage() fleet.Usage {
	r.t.Helper()
	u, err := r.gate.Usage(context.Background(), r.tmpl.Name)
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

func prOpened(n int) *workitems.Delivery {
	return &workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: &workitems.PullRequest{Number: n, State: workitems.PROpen}}
}

func TestConcurrencyHoldsItemsInOrderAndAnEndedAttemptLetsTheNextGo(t *testing.T) {
	r := newRig(t, config.Fleet{Concurrency: 2})
	for i, id := range []string{"a", "b", "c", "d"} {
		r.item(id, i)
	}
	if !r.acquire("a") || !r.acquire("b") {
		t.Fatal("the first two must run")
	}
	r.move("a", workitems.StateRunning, nil)
	r.move("b", workitems.StateRunning, nil)
	if r.acquire("d") || r.acquire("c") {
		t.Fatal("a third must wait while two run")
	}
	if u := r.usage(); u.Held != 2 || u.Running != 2 {
		t.Fatalf("usage %+v", u)
	}
	if got := r.admit(); len(got) != 0 {
		t.Fatalf("admitted %v with no slot free", got)
	}
	r.move("a", workitems.StateVerifying, nil) // still its attempt: keeps the slot
	if got := r.admit(); len(got) != 0 {
		t.Fatalf("admitted %v while a verifies", got)
	}
	r.move("a", workitems.StateClosed, nil)
	// c was created before d: it goes first, though d asked first.
	if got := r.admit(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("admitted %v, want [c]", got)
	}
	if !r.acquire("c") {
		t.Fatal("a granted item's task must run")
	}
	// A new item that finds a free slot still queues behind the line.
	r.move("b", workitems.StateWaiting, nil) // parked for CI: holds no slot
	r.item("e", 10)
	if r.acquire("e") {
		t.Fatal("e must not pass d, which waits ahead of it")
	}
	if got := r.admit(); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("admitted %v, want [d]", got)
	}
}

func TestAResumedAttemptAlwaysKeepsRunning(t *testing.T) {
	r := newRig(t, config.Fleet{Concurrency: 1})
	r.item("a", 0)
	r.item("b", 1)
	if !r.acquire("a") {
		t.Fatal("a must run")
	}
	r.items["b"].State = workitems.StateRunning // running before the limit (a config reload)
	if !r.acquire("b") {
		t.Fatal("a running attempt must not be held")
	}
}

func TestMaxOpenPRsCountsOpenPullRequestsAndItemsThatMayOpenOne(t *testing.T) {
	r := newRig(t, config.Fleet{MaxOpenPRs: 2})
	for i, id := range []string{"a", "b", "c", "d"} {
		r.item(id, i)
	}
	if !r.acquire("a") || !r.acquire("b") {
		t.Fatal("two may open a pull request")
	}
	if r.acquire("c") || r.acquire("d") {
		t.Fatal("c and d must wait: two pull requests may be opened")
	}
	r.move("a", workitems.StateRunning, nil)
	r.move("b", workitems.StateRunning, nil)
	r.move("a", workitems.StateWaiting, prOpened(7)) // a opened its pull request
	if u := r.usage(); u.OpenPRs != 1 || u.Reserved != 1 {
		t.Fatalf("usage %+v", u)
	}
	if got := r.admit(); len(got) != 0 {
		t.Fatalf("admitted %v: one open and one may open", got)
	}
	r.move("b", workitems.StateClosed, nil) // b changed nothing: no pull request
	if got := r.admit(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("admitted %v, want [c]", got)
	}
	// a's retry has its pull request already: it needs no new place.
	r.move("a", workitems.StateRetryWait, prOpened(7))
	r.items["a"].State = workitems.StateQueued
	if !r.acquire("a") {
		t.Fatal("an item with an open pull request must not wait for a new place")
	}
	// c may open one, a's is open: full. Then a's pull request merges: its place frees for d.
	if got := r.admit(); len(got) != 0 {
		t.Fatalf("admitted %v: one open and one may open", got)
	}
	r.move("a", workitems.StateClosed, &workitems.Delivery{Outcome: workitems.DeliveryMerged, PR: &workitems.PullRequest{Number: 7, State: workitems.PRMerged}})
	if got := r.admit(); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("admitted %v, want [d] once a's pull request merged", got)
	}
	r.move("c", workitems.StateRunning, nil)
	r.move("c", workitems.StateWaiting, prOpened(9))
	// A pull request a person closed, read from the forge, frees its place too.
	if err := r.gate.PRClosed(context.Background(), r.tmpl.Name, fleet.PRKey(r.items["c"].Repo, 9)); err != nil {
		t.Fatal(err)
	}
	if u := r.usage(); u.OpenPRs != 0 {
		t.Fatalf("usage %+v", u)
	}
}

func TestPRsPerHourWaitsForTheHourToRoll(t *testing.T) {
	r := newRig(t, config.Fleet{PRsPerHour: 2})
	for i, id := range []string{"a", "b", "c"} {
		r.item(id, i)
	}
	r.acquire("a")
	r.acquire("b")
	for _, id := range []string{"a", "b"} {
		r.move(id, workitems.StateRunning, nil)
		r.move(id, workitems.StateWaiting, prOpened(int(id[0])))
		r.move(id, workitems.StateClosed, &workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: &workitems.PullRequest{Number: int(id[0]), State: workitems.PRMerged}})
	}
	if r.acquire("c") {
		t.Fatal("c must wait: two pull requests opened this hour")
	}
	r.clock.Advance(59 * time.Minute)
	if got := r.admit(); len(got) != 0 {
		t.Fatalf("admitted %v within the hour", got)
	}
	r.clock.Advance(time.Minute + time.Millisecond)
	if got := r.admit(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("admitted %v, want [c] once the hour rolled", got)
	}
	if u := r.usage(); u.OpenedLastHour != 0 {
		t.Fatalf("usage %+v", u)
	}
}

func TestAnItemThatEndsWhileHeldLeavesTheLine(t *testing.T) {
	r := newRig(t, config.Fleet{Concurrency: 1})
	r.item("a", 0)
	r.item("b", 1)
	r.item("c", 2)
	r.acquire("a")
	r.acquire("b")
	r.acquire("c")
	r.move("b", workitems.StateCancelled, nil)
	r.move("a", workitems.StateClosed, nil)
	if got := r.admit(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("admitted %v, want [c]: b was cancelled", got)
	}
	if held, _ := r.gate.Held(context.Background(), r.tmpl.Name, "b"); held {
		t.Fatal("a cancelled item must not stay in line")
	}
}

func TestTheFailureStreakCountsEndsAcrossRepositoriesAndACloseResetsIt(t *testing.T) {
	r := newRig(t, config.Fleet{PauseAfterFailures: 3})
	ctx := context.Background()
	steps := []struct {
		id     string
		to     workitems.State
		streak int64
	}{
		{"a", workitems.StateFailed, 1},
		{"b", workitems.StateEscalated, 2},
		{"c", workitems.StateClosed, 0}, // one repository's success resets it
		{"d", workitems.StateEscalated, 1},
		{"e", workitems.StateCancelled, 1}, // a person's cancel is no failure
		{"f", workitems.StateFailed, 2},
	}
	for i, s := range steps {
		r.item(s.id, i)
		r.items[s.id].State = workitems.StateVerifying
		r.move(s.id, s.to, nil)
		if u := r.usage(); u.Streak != s.streak {
			t.Fatalf("after %s %s: streak %d, want %d", s.id, s.to, u.Streak, s.streak)
		}
	}
	r.item("g", 9)
	r.items["g"].State = workitems.StateVerifying
	r.move("g", workitems.StateFailed, nil)
	if n, err := r.gate.Streak(ctx, r.tmpl.Name); err != nil || n != 3 {
		t.Fatalf("streak %d %v, want 3", n, err)
	}
	// A failure counted while the breaker paused stays counted; the reset never goes below 0.
	r.item("h", 10)
	r.items["h"].State = workitems.StateVerifying
	r.move("h", workitems.StateEscalated, nil)
	if err := r.gate.ResetStreak(ctx, r.tmpl.Name, 3); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.gate.Streak(ctx, r.tmpl.Name); n != 1 {
		t.Fatalf("streak %d after the reset, want the 1 counted since", n)
	}
	if err := r.gate.ResetStreak(ctx, r.tmpl.Name, 3); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.gate.Streak(ctx, r.tmpl.Name); n != 0 {
		t.Fatalf("streak %d, want 0 (never below)", n)
	}
}

// A tripped breaker lets nothing start before the Admitter pauses the template: the failure
// that trips it frees its slot in the same MULTI that counts it, and the grant reads both.
func TestATrippedBreakerStartsNothingBeforeThePause(t *testing.T) {
	for _, f := range []config.Fleet{
		{Concurrency: 1, PauseAfterFailures: 2}, // a limited fleet: the scripts read the streak
		{PauseAfterFailures: 2},                 // no limits: Acquire reads it apart
	} {
		r := newRig(t, f)
		ctx := context.Background()
		for i, id := range []string{"a", "b", "c", "d"} {
			r.item(id, i)
		}
		for _, id := range []string{"a", "b"} {
			if !r.acquire(id) {
				t.Fatalf("%+v: %s must run (the first failure does not trip)", f, id)
			}
			r.move(id, workitems.StateRunning, nil)
			r.move(id, workitems.StateFailed, nil)
		}
		if r.acquire("c") {
			t.Fatalf("%+v: c started after the second failure tripped the breaker", f)
		}
		if got := r.admit(); len(got) != 0 {
			t.Fatalf("%+v: admitted %v after the trip", f, got)
		}
		if held, _ := r.gate.Held(ctx, r.tmpl.Name, "c"); !held {
			t.Fatalf("%+v: c must wait in line for the resume", f)
		}
		// A resumed attempt is no new start: it keeps going.
		r.items["d"].State = workitems.StateRunning
		if !r.acquire("d") {
			t.Fatalf("%+v: a running attempt must go on", f)
		}
		// The Admitter paused the template and took the failures off; the line moves again.
		if err := r.gate.ResetStreak(ctx, r.tmpl.Name, 2); err != nil {
			t.Fatal(err)
		}
		r.move("d", workitems.StateClosed, nil)
		if got := r.admit(); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("%+v: admitted %v after the reset, want [c]", f, got)
		}
	}
}

// The gate's entries the store's transitions did not see (an attempt that asked on a stale
// read, a deleted item) are released by the admitter's sweep, and the line moves on.
func TestTheSweepReleasesEntriesWhoseItemMovedOn(t *testing.T) {
	r := newRig(t, config.Fleet{Concurrency: 1})
	for i, id := range []string{"a", "b", "c"} {
		r.item(id, i)
	}
	r.acquire("a")
	r.acquire("b")
	r.acquire("c")
	// a was cancelled between its task's read and its acquire: the hook ran before the slot
	// was taken. b escalated in line (its template was gone for a while).
	r.items["a"].State = workitems.StateCancelled
	r.items["b"].State = workitems.StateEscalated
	adm := &fleet.Admitter{Gate: r.gate, Items: r, Config: func() *config.Config {
		return &config.Config{Templates: []config.Template{*r.tmpl}}
	}, Enqueuer: enqueued{}, Pauser: notPaused{}, Clock: r.clock}
	n, err := adm.Round(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("round granted %d (%v), want c", n, err)
	}
	if u := r.usage(); u.Running != 1 || u.Held != 0 {
		t.Fatalf("usage %+v: only c holds a slot", u)
	}
}

func (r *rig) Get(_ context.Context, id string) (*workitems.Item, error) {
	if it, ok := r.items[id]; ok {
		return it, nil
	}
	return nil, workitems.ErrNotFound
}

type enqueued struct{}

func (enqueued) EnqueueHeld(context.Context, string) error { return nil }

type notPaused struct{}

func (notPaused) Paused(context.Context, string) (bool, error)             { return false, nil }
func (notPaused) PauseFleet(context.Context, string, string) (bool, error) { return true, nil }

func TestATemplateWithoutLimitsWritesNothing(t *testing.T) {
	r := newRig(t, config.Fleet{PauseAfterFailures: 2})
	r.item("a", 0)
	if !r.acquire("a") {
		t.Fatal("no limit: it runs")
	}
	if u := r.usage(); u.Running != 0 || u.Held != 0 {
		t.Fatalf("usage %+v", u)
	}
}

// countingPRs answers every pull request as open and counts the reads.
type countingPRs struct{ n atomic.Int32 }

func (c *countingPRs) PROpen(context.Context, string, string, int) (bool, error) {
	c.n.Add(1)
	return true, nil
}

// countingPauser is never paused and counts the reads of the pause (one per round and template).
type countingPauser struct{ n atomic.Int32 }

func (c *countingPauser) Paused(context.Context, string) (bool, error) {
	c.n.Add(1)
	return false, nil
}
func (c *countingPauser) PauseFleet(context.Context, string, string) (bool, error) { return true, nil }

// Every worker runs an admitter, and they take turns: one round per period and one forge read
// of the open pull requests per PRCheckEvery across the deployment, not one per worker.
func TestWorkersTakeTurnsAtRoundsAndForgeChecks(t *testing.T) {
	r := newRig(t, config.Fleet{MaxOpenPRs: 1})
	ctx := context.Background()
	for i, id := range []string{"a", "b"} {
		r.item(id, i)
	}
	if !r.acquire("a") || r.acquire("b") {
		t.Fatal("a runs, b waits for a pull request place")
	}
	r.move("a", workitems.StateRunning, nil)
	r.move("a", workitems.StateClosed, prOpened(1)) // a's pull request fills max_open_prs
	prs, pauser := &countingPRs{}, &countingPauser{}
	var workers []*fleet.Admitter
	for range 3 {
		workers = append(workers, &fleet.Admitter{Gate: r.gate, Items: r, Config: func() *config.Config {
			return &config.Config{Templates: []config.Template{*r.tmpl}}
		}, Enqueuer: enqueued{}, Pauser: pauser, PRs: prs, Clock: r.clock, Every: time.Minute, PRCheckEvery: time.Minute})
	}
	for _, w := range workers {
		if err := w.Loop().Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := pauser.n.Load(); n != 1 {
		t.Fatalf("%d rounds ran in one period over three workers, want 1", n)
	}
	// Rounds called directly (the scheduler's, after a tick) still check the forge once a period.
	for _, w := range workers {
		if _, err := w.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := prs.n.Load(); n != 1 {
		t.Fatalf("the open pull request was read %d times in one period, want 1", n)
	}
}
