package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// startRunning makes an item running under a lease, then drops the lease (its worker is gone)
// or keeps it (its worker lives).
func (f *fixture) startRunning(t *testing.T, id string, keepLease bool) {
	t.Helper()
	ctx := context.Background()
	it := &workitems.Item{ID: id, Template: "every-minute", Goal: "g", Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)},
		MaxAttempts: 2, Attempts: []workitems.Attempt{{N: 1, State: "queued"}}}
	if err := f.store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	fence, err := f.store.AcquireLease(ctx, id, 1, "dead-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.store.StartAttempt(ctx, fence, "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if !keepLease {
		_ = f.store.ReleaseLease(ctx, fence) // what an expired lease looks like
	}
}

func TestRecoverEnqueuesARunningItemWhoseLeaseExpiredOncePerEpoch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, nil)
	f.startRunning(t, "lost", false)
	f.startRunning(t, "alive", true)
	ctx := context.Background()
	n, err := q.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("recover: %d %v, want 1 (only the item whose lease expired)", n, err)
	}
	info, err := f.insp.GetTaskInfo(workitems.UrgentQueue(f.env.Queue), workitems.RecoverTaskID("lost", 1, 1))
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("recovery task: %+v %v", info, err)
	}
	if _, err := f.insp.GetTaskInfo(workitems.UrgentQueue(f.env.Queue), workitems.RecoverTaskID("alive", 1, 1)); err == nil {
		t.Fatal("an item whose lease is live got a recovery task")
	}
	// A second pass (another worker's) finds the recovery pending: nothing more.
	if n, err := q.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("second pass: %d %v, want 0", n, err)
	}
}

// A recovery another worker's pass enqueued waits on the urgent queue for a slot; every later
// pass names it (RecoverEach's each) so that a worker with a direct-recovery slot free runs it
// at once, without enqueuing a second task. An item whose worker lives is never named.
func TestRecoverEachNamesAPendingRecoveryToEveryPassWithoutEnqueuingAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, nil)
	f.startRunning(t, "lost", false)
	f.startRunning(t, "alive", true)
	ctx := context.Background()
	var named []string
	each := func(item string, attempt int) { named = append(named, fmt.Sprintf("%s/%d", item, attempt)) }
	if n, err := q.RecoverEach(ctx, each); err != nil || n != 1 {
		t.Fatalf("first pass: %d %v, want 1 enqueued", n, err)
	}
	if n, err := q.RecoverEach(ctx, each); err != nil || n != 0 {
		t.Fatalf("second pass: %d %v, want 0 enqueued (the recovery is pending)", n, err)
	}
	if want := []string{"lost/1", "lost/1"}; fmt.Sprint(named) != fmt.Sprint(want) {
		t.Fatalf("named %v, want %v (the enqueuing pass and the one that found it pending)", named, want)
	}
	pending, err := f.insp.ListPendingTasks(workitems.UrgentQueue(f.env.Queue))
	if err != nil || len(pending) != 1 {
		t.Fatalf("urgent queue: %d pending %v, want the one recovery task", len(pending), err)
	}
}

func TestRecoverReplacesAnArchivedRecoveryTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, nil)
	f.startRunning(t, "lost", false)
	ctx := context.Background()
	if n, _ := q.Recover(ctx); n != 1 {
		t.Fatalf("first pass: %d", n)
	}
	if err := f.insp.ArchiveTask(workitems.UrgentQueue(f.env.Queue), workitems.RecoverTaskID("lost", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := f.insp.GetTaskInfo(workitems.UrgentQueue(f.env.Queue), workitems.RecoverTaskID("lost", 1, 1))
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("an archived recovery must not strand the item: %+v %v", info, err)
	}
}

func TestReconcileRepairsOldestFirstPastAPageAndAnArchivedTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, nil)
	ctx := context.Background()
	// The oldest item cannot be enqueued (no wall-time budget): the pass logs it and goes on.
	bad := &workitems.Item{ID: "bad", Template: "every-minute", Goal: "g", MaxAttempts: 2,
		Attempts: []workitems.Attempt{{N: 1, State: "queued"}}}
	if err := f.store.Create(ctx, bad, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	// 150 queued items whose tasks were never enqueued (more than a page), created oldest first.
	for i := range 150 {
		it := &workitems.Item{ID: fmt.Sprintf("q%03d", i), Template: "every-minute", Goal: "g",
			Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 2,
			Attempts: []workitems.Attempt{{N: 1, State: "queued"}}}
		if err := f.store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := q.Reconcile(ctx, 0)
	if err == nil || n != 150 {
		t.Fatalf("reconcile: %d %v, want all 150 repaired and the bad one's error", n, err)
	}
	// An archived task (asynq gave up on it) must not strand its queued item.
	if err := f.insp.ArchiveTask(f.env.Queue, workitems.TaskID("q000", 1)); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Reconcile(ctx, 0); n != 1 {
		t.Fatalf("second reconcile: %d, want 1 (the archived one)", n)
	}
	info, err := f.insp.GetTaskInfo(f.env.Queue, workitems.TaskID("q000", 1))
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("q000's task: %+v %v", info, err)
	}
}
