package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/workitems"
)

// RecoverAgainEvery paces the extra recovery tasks of one fencing epoch whose recovery task
// asynq holds as active while nobody holds the attempt's lease (recoverTaken): at most one per
// window.
const RecoverAgainEvery = 10 * time.Second

// recoveryTask is the recovery task of attempt a of it, under task id id.
func (q *Queue) recoveryTask(it *workitems.Item, a *workitems.Attempt, id string) *asynq.Task {
	body, _ := json.Marshal(workitems.TaskPayload{Item: it.ID, Attempt: a.N, Recover: true})
	// On the urgent queue: a recovered attempt is taken before new work (workitems.UrgentQueue).
	return asynq.NewTask(workitems.TaskTypeAttempt, body,
		asynq.TaskID(id),
		asynq.Queue(workitems.UrgentQueue(q.queue)),
		asynq.Timeout(it.AttemptBudget(a.Condition).WallTime.D()+TaskMargin),
		asynq.MaxRetry(q.maxRetry))
}

// recoverTaken handles an epoch whose recovery task already exists while the attempt's lease
// is not held. Pending, it waits for a slot: a worker with a direct-recovery slot free may run
// it at once (recoveryPending). Scheduled or retrying, asynq delivers it soon: nothing to do. Archived
// (retries used up), it would block the epoch's recovery forever: it is replaced. Active, a
// worker dequeued it and has not taken the lease: either it is about to, or it died first (a
// crash in the moment after the dequeue, a handler stuck on Redis) and asynq would redeliver
// the task only after its own 30 s lease and one-minute sweep. Either way one more recovery
// task is enqueued per RecoverAgainEvery: whichever execution takes the lease first resumes
// the attempt, and one that finds it held is dropped (worker.Handler), so a duplicate costs a
// task pickup and nothing else. It reports what it did.
func (q *Queue) recoverTaken(ctx context.Context, it *workitems.Item, a *workitems.Attempt, epoch int64, task *asynq.Task) (recovery, error) {
	if q.inspector == nil {
		return recoveryNone, nil
	}
	id := workitems.RecoverTaskID(it.ID, a.N, epoch)
	info, err := q.inspector.GetTaskInfo(workitems.UrgentQueue(q.queue), id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return recoveryNone, nil // gone in between (delivered and done): the next pass looks again
	}
	if err != nil {
		return recoveryNone, fmt.Errorf("scheduler: recovery task %s: %w", id, err)
	}
	switch info.State {
	case asynq.TaskStateArchived:
		return recoveryNone, q.unblockArchived(ctx, task, workitems.UrgentQueue(q.queue), id)
	case asynq.TaskStatePending:
		return recoveryPending, nil
	case asynq.TaskStateActive:
	default:
		return recoveryNone, nil
	}
	window := q.clock.Now().Unix() / int64(RecoverAgainEvery/time.Second)
	again := id + "~" + strconv.FormatInt(window, 10)
	_, err = q.client.EnqueueContext(ctx, q.recoveryTask(it, a, again))
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return recoveryPending, nil // this window's is enqueued already
	case err != nil:
		return recoveryNone, fmt.Errorf("scheduler: enqueue recovery of %s attempt %d again: %w", it.ID, a.N, err)
	}
	q.log.Info("recover: the epoch's recovery task is active but nobody holds the lease; recovery enqueued again",
		"item", it.ID, "attempt", a.N, "epoch", epoch, "task", again)
	_ = q.store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventEnqueueRepaired, Attempt: a.N,
		Message: fmt.Sprintf("recovery of epoch %d enqueued again: its task was taken by a worker that holds no lease", epoch)})
	return recoveryEnqueued, nil
}

// redeliverTaken handles a queued item (older than reconcile's age) whose attempt task asynq
// holds as active while nobody holds the attempt's lease: a worker dequeued it and has not
// started the attempt, and may have died doing so, when asynq would redeliver the task only
// after its own 30 s lease and one-minute sweep. As recoverTaken does for a recovery task, it
// enqueues a recovery task for the attempt once per RecoverAgainEvery: the first execution to
// take the lease starts the attempt, and a recovery task that finds it held is dropped. It
// reports whether it enqueued one.
func (q *Queue) redeliverTaken(ctx context.Context, it *workitems.Item) (bool, error) {
	a := it.Current()
	if a == nil {
		return false, fmt.Errorf("scheduler: item %s has no attempt %d", it.ID, it.Attempt)
	}
	held, epoch, err := q.store.LeaseHeld(ctx, it.ID, it.Attempt)
	if err != nil || held {
		return false, err
	}
	window := q.clock.Now().Unix() / int64(RecoverAgainEvery/time.Second)
	again := workitems.RecoverTaskID(it.ID, a.N, epoch) + "~" + strconv.FormatInt(window, 10)
	_, err = q.client.EnqueueContext(ctx, q.recoveryTask(it, a, again))
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("scheduler: enqueue %s: %w", again, err)
	}
	q.log.Info("reconcile: the attempt's task is active but nobody started the attempt; enqueued again",
		"item", it.ID, "attempt", a.N, "task", again)
	_ = q.store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventEnqueueRepaired, Attempt: a.N,
		Message: "attempt task enqueued again: its task was taken by a worker that did not start the attempt"})
	return true, nil
}
