package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// A recovered attempt is taken before new work: with six new items queued and the attempt of
// an item whose worker died (running, no lease, its task gone with the worker), a worker of
// concurrency 1 resumes the lost attempt first (the recovery is on the urgent queue, which
// workers serve with strict priority).
func TestARecoveredAttemptIsTakenBeforeNewWork(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	s := open(t, testConfig(t, repo, `  - name: quick
    repo: `+repo+`
    goal: nothing to do
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`), workitems.SystemClock{})
	ctx := context.Background()

	lost, err := s.Queue.Submit(ctx, scheduler.Request{Template: "quick"})
	if err != nil {
		t.Fatal(err)
	}
	loseWorker(t, s, lost.ID)
	var fresh []string
	for range 6 {
		it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "quick"})
		if err != nil {
			t.Fatal(err)
		}
		fresh = append(fresh, it.ID)
	}
	if n, err := s.Queue.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	startAppWorker(t, s.App, 1, "prio")

	recovered := awaitState(t, s.Store, lost.ID, workitems.StateClosed)
	resumedAt := recovered.UpdatedAt
	evs, err := s.Store.Events(ctx, lost.ID, "", 500, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == workitems.EventAttemptResumed {
			resumedAt = e.At
			break
		}
	}
	for _, id := range fresh {
		it := awaitState(t, s.Store, id, workitems.StateClosed)
		if started := it.Attempts[0].StartedAt; !started.After(resumedAt) {
			t.Errorf("new item %s started at %s, before the lost attempt resumed at %s", id, started.Format(time.RFC3339Nano), resumedAt.Format(time.RFC3339Nano))
		}
	}
}

// With every slot busy, a lost attempt is not left waiting for one: the worker's recovery pass
// runs it at once beside its concurrency (ServerOptions.DirectRecoveries), and it closes while
// the long item still holds the only slot.
func TestALostAttemptIsRecoveredAtOnceWhenEverySlotIsBusy(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	gate := filepath.Join(t.TempDir(), "gate")
	s := openWith(t, testConfig(t, repo, `  - name: quick
    repo: `+repo+`
    goal: nothing to do
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: long
    repo: `+repo+`
    goal: hold the slot
    sandbox: {mode: off}
    loop: {kind: script, commands: ["while [ ! -e `+gate+` ]; do sleep 0.05; done"]}
    done_check: {commands: ["true"]}
`), func(o *app.Options) { o.LeaseTTL = 3 * time.Second })
	ctx := context.Background()
	startAppWorker(t, s.App, 1, "busy")
	long, err := s.Queue.Submit(ctx, scheduler.Request{Template: "long"})
	if err != nil {
		t.Fatal(err)
	}
	awaitState(t, s.Store, long.ID, workitems.StateRunning)

	lost, err := s.Queue.Submit(ctx, scheduler.Request{Template: "quick"})
	if err != nil {
		t.Fatal(err)
	}
	loseWorker(t, s, lost.ID)
	awaitState(t, s.Store, lost.ID, workitems.StateClosed)
	if it, _ := s.Store.Get(ctx, long.ID); it.State != workitems.StateRunning {
		t.Fatalf("the long item is %s: the lost attempt did not run beside it", it.State)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	awaitState(t, s.Store, long.ID, workitems.StateClosed)
}

// loseWorker leaves attempt 1 of id as a worker that dequeued its task, started the attempt and
// died leaves it: running, no task, no lease.
func loseWorker(t *testing.T, s *sys, id string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Inspector().DeleteTask(s.QueueName(), workitems.TaskID(id, 1)); err != nil {
		t.Fatal(err)
	}
	f, err := s.Store.AcquireLease(ctx, id, 1, "dead-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Store.StartAttempt(ctx, f, "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if err := s.Store.ReleaseLease(ctx, f); err != nil {
		t.Fatal(err)
	}
}
