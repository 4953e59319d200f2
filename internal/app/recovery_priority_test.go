package app_test

import (
	"context"
	"testing"
	"time"

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
	s := open(t, config(t, repo, `  - name: quick
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
	// Its worker dequeued the task, started the attempt and died: no task, no lease.
	if err := s.Inspector().DeleteTask(s.QueueName(), workitems.TaskID(lost.ID, 1)); err != nil {
		t.Fatal(err)
	}
	f, err := s.Store.AcquireLease(ctx, lost.ID, 1, "dead-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Store.StartAttempt(ctx, f, "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if err := s.Store.ReleaseLease(ctx, f); err != nil {
		t.Fatal(err)
	}
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

	recovered := awaitState(t, s.Store, lost.ID, time.Minute, workitems.StateClosed)
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
		it := awaitState(t, s.Store, id, time.Minute, workitems.StateClosed)
		if started := it.Attempts[0].StartedAt; !started.After(resumedAt) {
			t.Errorf("new item %s started at %s, before the lost attempt resumed at %s", id, started.Format(time.RFC3339Nano), resumedAt.Format(time.RFC3339Nano))
		}
	}
}
