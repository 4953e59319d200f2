package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// sampleRepo writes a Go module whose TestAdd fails until Add is fixed.
func sampleRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := sample.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The fix reads the failure the verifier put in the condition's input: the first attempt has
// none and makes no real change, the retry sees "TestAdd" and fixes the code.
const fixScript = `if echo "$OUTERLOOP_INPUT" | grep -q TestAdd; then ` + sample.FixCommand + `; echo fixed; else echo "no failure known yet"; fi`

func testConfig(t *testing.T, repo string, extra string) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`
defaults:
  max_attempts: 3
  budget: {wall_time: 2m, verify_reserve: 1m}
templates:
  - name: fix
    schedule: "*/10 * * * *"
    repo: %s
    goal: make TestAdd pass
    loop:
      kind: script
      commands: [%q]
    done_check: {commands: ["go test -json ./..."]}
  - name: never-fixed
    repo: %s
    max_attempts: 2
    goal: hopeless
    loop: {kind: script, commands: ["echo still broken"]}
    done_check: {commands: ["go test -json ./..."]}
  - name: slow
    repo: %s
    goal: burns its budget
    budget: {wall_time: 61s, verify_reserve: 60s}
    loop: {kind: script, commands: ["sleep 30"]}
    done_check: {commands: ["go test -json ./..."]}
%s`, repo, fixScript, repo, repo, extra)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type sys struct {
	*app.App
	env *redistest.Env
}

func open(t *testing.T, cfg *config.Config, clock workitems.Clock) *sys {
	t.Helper()
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Clock: clock, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return &sys{App: a, env: env}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (s *sys) startWorker(t *testing.T, id string) *worker.Server {
	t.Helper()
	return startAppWorker(t, s.App, 2, id)
}

// awaitState waits until the item reaches one of states.
func awaitState(t *testing.T, s *itemstore.Store, id string, states ...workitems.State) *workitems.Item {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	it, err := s.WaitFor(ctx, id, itemstore.InState(states...))
	if err != nil {
		t.Fatalf("item %s did not reach %v within %s: %v; it is %+v", id, states, time.Since(began).Round(time.Second), err, it)
	}
	return it
}

func TestCronTickToClosedAfterARetryWithAChangedCondition(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	clock := fakeclock.New(time.Date(2026, 11, 29, 3, 5, 0, 0, time.UTC))
	s := open(t, testConfig(t, repo, ""), workitems.SystemClock{})
	ticks := make(chan scheduler.TickResult, 10)
	sched, err := scheduler.New(s.Queue, scheduler.Options{Clock: clock, OnTick: func(r scheduler.TickResult) { ticks <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sched.Start(context.Background())
	t.Cleanup(sched.Shutdown)
	s.startWorker(t, "w1")
	clock.BlockUntil(1, nil)
	clock.Advance(5 * time.Minute)
	r := <-ticks
	for r.Outcome == "misfire_dropped" { // the 03:00 tick was before the scheduler started
		r = <-ticks
	}
	if r.Outcome != "created" || r.Item != "fix@20261129T031000Z" {
		t.Fatalf("tick: %+v", r)
	}
	it := awaitState(t, s.Store, r.Item, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 2 {
		t.Fatalf("want closed after 2 attempts, got %s after %d: %+v", it.State, len(it.Attempts), it.Decisions)
	}
	first, second := it.Attempts[0], it.Attempts[1]
	if first.Decision.Outcome != workitems.OutcomeRetry || !strings.Contains(second.Condition.Input, "TestAdd") {
		t.Fatalf("the retry must carry the failure: decision %+v, input %q", first.Decision, second.Condition.Input)
	}
	if fmt.Sprint(second.Changed) != "[input]" {
		t.Fatalf("the item must record what changed: %v", second.Changed)
	}
	if it.Decisions[1].Outcome != workitems.OutcomeClose || second.Verified == nil || second.Verified.Passed < 1 {
		t.Fatalf("close must rest on passing tests: %+v %+v", it.Decisions[1], second.Verified)
	}
	if it.Spend.Steps != 2 {
		t.Fatalf("item spend across attempts: %+v", it.Spend)
	}
}

func TestRepeatedFailureEscalatesThenAPersonRetriesAndItCloses(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	s := open(t, testConfig(t, repo, ""), workitems.SystemClock{})
	s.startWorker(t, "w1")
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "never-fixed", Origin: workitems.Origin{Kind: "manual", Actor: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
	if it.State != workitems.StateEscalated || len(it.Attempts) != 2 || it.Escalation == nil {
		t.Fatalf("want escalated after 2 attempts: %s %d", it.State, len(it.Attempts))
	}
	esc, _ := s.Store.Escalated(ctx, 0, 0)
	if len(esc) != 1 || esc[0].ID != it.ID {
		t.Fatalf("escalation inbox: %v", esc)
	}
	spentBefore := it.Spend
	// The person fixes the code in the repo the template copies and retries with a note.
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	it, err = s.Queue.Resolve(ctx, it.ID, workitems.Resolution{Action: "retry", Actor: "alice", Input: "fixed the sign by hand"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 3 {
		t.Fatalf("after resolve: %s with %d attempts", it.State, len(it.Attempts))
	}
	if it.Spend.Steps != spentBefore.Steps+1 || it.Resolution[0].Actor != "alice" {
		t.Fatalf("spend must keep growing and the resolution record its actor: %+v %+v", it.Spend, it.Resolution)
	}
}

func TestBudgetExhaustionEscalatesWithTheBudgetNamed(t *testing.T) {
	t.Parallel()
	s := open(t, testConfig(t, sampleRepo(t), ""), workitems.SystemClock{})
	s.startWorker(t, "w1")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
	a := it.Attempts[0]
	if it.State != workitems.StateEscalated || a.Exit.Reason != workitems.ExitBudgetExhausted || a.Exit.Budget != workitems.BudgetWallTime {
		t.Fatalf("want escalated on wall_time: %s %+v", it.State, a.Exit)
	}
	if it.Escalation.Reason == "" || len(it.Attempts) != 1 {
		t.Fatalf("escalation: %+v attempts %d", it.Escalation, len(it.Attempts))
	}
}
