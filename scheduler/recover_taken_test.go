package scheduler_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// stepClock is a clock a test moves by hand.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRecoverEnqueuesAgainWhenItsTaskWasTakenByAWorkerThatHoldsNoLease: a worker dequeued the
// epoch's recovery task and died before taking the lease (here: a server whose handler never
// returns and never takes it), so asynq holds the task as active for its own 30 s lease and
// one-minute sweep. The next pass enqueues the recovery again, once per window.
func TestRecoverEnqueuesAgainWhenItsTaskWasTakenByAWorkerThatHoldsNoLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := &stepClock{now: now}
	q := f.newQueue(t, clock)
	f.startRunning(t, "lost", false)
	ctx := context.Background()
	if n, err := q.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("first pass: %d %v", n, err)
	}
	first := workitems.RecoverTaskID("lost", 1, 1)
	// The worker that takes it: it holds the task and never the lease (a crash after the dequeue).
	taken := holdingServer(t, f)
	if id := <-taken; id != first {
		t.Fatalf("the server took %q, want %q", id, first)
	}
	if n, err := q.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("pass with the recovery task active and no lease held: %d %v, want 1", n, err)
	}
	if n, err := q.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("another pass in the same window: %d %v, want 0", n, err)
	}
	clock.advance(scheduler.RecoverAgainEvery)
	if n, err := q.Recover(ctx); err != nil || n != 1 {
		t.Fatalf("a pass in the next window: %d %v, want 1", n, err)
	}
	infos, err := f.insp.ListPendingTasks(workitems.UrgentQueue(f.env.Queue)) // recoveries go first
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("pending recoveries: %d, want 2 (one per window)", len(infos))
	}
	// With the lease held again (an execution resumed), nothing more is enqueued.
	if _, err := f.store.AcquireLease(ctx, "lost", 1, "resumed", time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.advance(scheduler.RecoverAgainEvery)
	if n, err := q.Recover(ctx); err != nil || n != 0 {
		t.Fatalf("a pass with the lease held: %d %v, want 0", n, err)
	}
}

// TestReconcileEnqueuesAgainAQueuedItemWhoseTaskWasTakenByAWorkerThatDidNotStartIt: a worker
// dequeued a first attempt's task and died before starting it (the item is still queued, its
// task active in asynq). Reconcile enqueues the attempt again, once per window.
func TestReconcileEnqueuesAgainAQueuedItemWhoseTaskWasTakenByAWorkerThatDidNotStartIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clock := &stepClock{now: time.Now().Add(time.Minute)} // reconcile compares it with the item's update time
	q := f.newQueue(t, clock)
	ctx := context.Background()
	it := &workitems.Item{ID: "taken", Template: "every-minute", Goal: "g", Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)},
		MaxAttempts: 2, Attempts: []workitems.Attempt{{N: 1, State: "queued"}}}
	if err := f.store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueAttempt(ctx, it); err != nil {
		t.Fatal(err)
	}
	taken := holdingServer(t, f)
	if id := <-taken; id != workitems.TaskID("taken", 1) {
		t.Fatalf("the server took %q", id)
	}
	if n, err := q.Reconcile(ctx, 0); err != nil || n != 1 {
		t.Fatalf("reconcile with the task active and the attempt not started: %d %v, want 1", n, err)
	}
	if n, err := q.Reconcile(ctx, 0); err != nil || n != 0 {
		t.Fatalf("another pass in the same window: %d %v, want 0", n, err)
	}
	infos, err := f.insp.ListPendingTasks(workitems.UrgentQueue(f.env.Queue)) // recoveries go first
	if err != nil || len(infos) != 1 {
		t.Fatalf("pending tasks: %d %v, want the one enqueued again", len(infos), err)
	}
	var p workitems.TaskPayload
	if err := json.Unmarshal(infos[0].Payload, &p); err != nil || p.Item != "taken" || p.Attempt != 1 || !p.Recover {
		t.Fatalf("the task enqueued again: %s %v (want a recovery of attempt 1: dropped if the lease is held)", infos[0].Payload, err)
	}
	// A worker that does take the lease (it was alive, only slow): nothing more.
	if _, err := f.store.AcquireLease(ctx, "taken", 1, "slow", time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.advance(scheduler.RecoverAgainEvery)
	if n, err := q.Reconcile(ctx, 0); err != nil || n != 0 {
		t.Fatalf("a pass with the lease held: %d %v, want 0", n, err)
	}
}

// holdingServer starts an asynq server on f's queue whose handler takes each task and holds it
// until the test ends (a worker that dequeued and never leased), and returns the taken ids.
func holdingServer(t *testing.T, f *fixture) <-chan string {
	t.Helper()
	taken := make(chan string, 4)
	release := make(chan struct{})
	srv := asynq.NewServer(redistest.AsynqOpt(t), asynq.Config{Concurrency: 1, Queues: map[string]int{f.env.Queue: 1, workitems.UrgentQueue(f.env.Queue): 2},
		LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		taken <- id
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(release); srv.Shutdown() })
	return taken
}
