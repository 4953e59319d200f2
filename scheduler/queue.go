package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hibiken/asynq"

	"outerloop/fleet"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// ErrUnknownTemplate is returned for a request naming no configured template.
var ErrUnknownTemplate = errors.New("unknown template")

// ErrInvalidUTF8 is returned for request text that is not valid UTF-8: it is refused, not
// rewritten.
var ErrInvalidUTF8 = errors.New("not valid UTF-8 text")

// Queue turns requests (cron ticks, manual enqueues, resolutions, verifier retries) into items
// in the store and attempt tasks on asynq. Every path goes through Submit or EnqueueAttempt, so
// all of them get the same ids, limits and timeouts.
type Queue struct {
	store     *itemstore.Store
	client    *asynq.Client
	inspector *asynq.Inspector
	cfg       atomic.Pointer[config.Config] // swapped whole by SetConfig on a reload
	queue     string
	clock     workitems.Clock
	log       *slog.Logger
	obs       DecisionObserver
	maxRetry  int
	fleet     *fleet.Gate
	repos     RepoSource
	loops     LoopKinds
}

// DecisionObserver counts decisions on items (metrics.Metrics implements it). The Queue reports
// a person's: Resolve is the one path the CLI, the API and the console resolve items through.
type DecisionObserver interface {
	Decision(template string, actor workitems.ActorKind, outcome workitems.Outcome, rule workitems.RuleName, itemID string)
}

type nopDecisions struct{}

func (nopDecisions) Decision(string, workitems.ActorKind, workitems.Outcome, workitems.RuleName, string) {
}

// QueueOptions configures a Queue.
type QueueOptions struct {
	Queue    string // asynq queue name (default "outerloop")
	Clock    workitems.Clock
	Logger   *slog.Logger
	Observer DecisionObserver // counts people's decisions (default: none)
	MaxRetry int              // asynq retries, for crash recovery only (default 25)
	// Fleet is the gate of fleet templates' limits (nil: none; a fleet's items then run
	// unlimited).
	Fleet *fleet.Gate
	// Repos lists the repositories of repos_from templates (nil: their ticks fail, saying so).
	Repos RepoSource
	// Loops says what each loop kind does, for Steer (default: the built-in kinds,
	// config.BuiltinLoopKinds). A process that registers loops passes its registry.
	Loops LoopKinds
}

// LoopKinds tells the queue what an inner loop kind does (worker.Registry and
// config.LoopKindSet implement it): Steer asks whether a kind reads steer input.
type LoopKinds interface {
	LoopTraits(kind workitems.LoopKind) (config.LoopTraits, bool)
}

// NewQueue returns a Queue. The inspector is used by Reconcile to find lost tasks.
func NewQueue(store *itemstore.Store, client *asynq.Client, inspector *asynq.Inspector, cfg *config.Config, o QueueOptions) *Queue {
	if o.Queue == "" {
		o.Queue = "outerloop"
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxRetry == 0 {
		o.MaxRetry = 25
	}
	if o.Observer == nil {
		o.Observer = nopDecisions{}
	}
	if o.Loops == nil {
		o.Loops = config.BuiltinLoopKinds()
	}
	q := &Queue{store: store, client: client, inspector: inspector, queue: o.Queue,
		clock: o.Clock, log: o.Logger, obs: o.Observer, maxRetry: o.MaxRetry, fleet: o.Fleet, repos: o.Repos, loops: o.Loops}
	q.cfg.Store(cfg)
	return q
}

// Name returns the asynq queue name.
func (q *Queue) Name() string { return q.queue }

// Store returns the item store.
func (q *Queue) Store() *itemstore.Store { return q.store }

// Config returns the deployment config in force (the latest a reload set).
func (q *Queue) Config() *config.Config { return q.cfg.Load() }

// SetConfig swaps the config new requests are made from (a reload): requests already past
// their template lookup finish under the config they read.
func (q *Queue) SetConfig(cfg *config.Config) { q.cfg.Store(cfg) }

// Request asks for a new item of a template.
type Request struct {
	Template string
	Origin   workitems.Origin
	Input    string // extra context for the first attempt
	ID       string // deterministic id (cron); empty: a fresh manual id
	// Force creates a manual item past the template's max_open; the item records it
	// (Origin.Forced) and its log says who forced it (force.go).
	Force bool
	// Ref is the branch, tag or commit the item's attempts start from (empty: the repository's
	// default branch).
	Ref string
	// Repo is the repository of a fleet template's item (one of its repos); required for a
	// fleet template, refused for any other.
	Repo string
	// Goal replaces the template's goal on the item (an api trigger's or an alert's goal,
	// rendered with the caller's fields or the alert); empty: the template's.
	Goal string
}

// Submit creates an item from a template and enqueues its first attempt. For a cron tick the
// id is deterministic, so a second scheduler's Submit of the same tick returns ErrExists.
// Limits (max_open, daily cost cap) apply to every request; a person's request with Force is
// let through max_open (recorded), never through the daily cost cap.
func (q *Queue) Submit(ctx context.Context, r Request) (*workitems.Item, error) {
	cfg := q.Config()
	t, ok := cfg.Template(r.Template)
	if !ok {
		return nil, fmt.Errorf("scheduler: template %q: %w", r.Template, ErrUnknownTemplate)
	}
	if !utf8.ValidString(r.Input) {
		return nil, workitems.Classify(workitems.ClassInvalidInput,
			fmt.Errorf("scheduler: template %q: input: %w", r.Template, ErrInvalidUTF8))
	}
	if r.Ref != "" {
		if err := workitems.CheckBranchName(r.Ref); err != nil {
			return nil, workitems.Classify(workitems.ClassInvalidInput, fmt.Errorf("scheduler: template %q: ref: %w", r.Template, err))
		}
	}
	if r.Origin.Kind == "" {
		r.Origin.Kind = workitems.OriginManual
	}
	id := r.ID
	if id == "" {
		id = manualID(t.Name, q.clock.Now())
	}
	if err := checkRepo(t, r.Repo); err != nil {
		return nil, err
	}
	it := newItem(cfg, t, id, r.Origin, r.Input)
	it.Ref, it.Repo = r.Ref, r.Repo
	if r.Goal != "" {
		if !utf8.ValidString(r.Goal) {
			return nil, workitems.Classify(workitems.ClassInvalidInput,
				fmt.Errorf("scheduler: template %q: goal: %w", r.Template, ErrInvalidUTF8))
		}
		it.Goal = r.Goal
	}
	lim := itemstore.CreateLimits{DailyCostCap: t.DailyCostCapUSD, MaxOpen: t.MaxOpen}
	forced := q.applyForce(&r, t, it, &lim)
	if err := q.store.Create(ctx, it, lim); err != nil {
		return nil, maxOpenHint(err, r, t)
	}
	if forced {
		q.recordForce(ctx, it, t)
	}
	if held, err := q.holdInFleet(ctx, t, it); held || err != nil {
		if err != nil { // the item is safe in the store; reconcile enqueues it, and its task meets the gate
			q.log.Warn("fleet hold failed; reconcile will enqueue the item", "item", it.ID, "err", err)
		}
		return it, nil
	}
	if err := q.EnqueueAttempt(ctx, it); err != nil {
		// The item is safe in the store; Reconcile enqueues it later.
		q.log.Warn("enqueue failed; reconcile will retry", "item", it.ID, "err", err)
	}
	return it, nil
}

func manualID(template string, now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return template + "@" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// TaskMargin is added to an attempt's wall-time budget for the asynq task timeout: time to
// acquire the lease, record the exit and decide.
const TaskMargin = 2 * time.Minute

// EnqueueAttempt puts the item's current attempt on asynq (idempotent: the task id is
// deterministic) and moves an item waiting to retry to queued.
func (q *Queue) EnqueueAttempt(ctx context.Context, it *workitems.Item) error {
	a := it.Current()
	if a == nil {
		return fmt.Errorf("scheduler: item %s has no attempt %d", it.ID, it.Attempt)
	}
	budget := it.AttemptBudget(a.Condition)
	if budget.WallTime <= 0 {
		return fmt.Errorf("scheduler: item %s: attempt %d has no wall-time budget", it.ID, a.N)
	}
	body, _ := json.Marshal(workitems.TaskPayload{Item: it.ID, Attempt: a.N})
	opts := []asynq.Option{
		asynq.TaskID(workitems.TaskID(it.ID, a.N)),
		asynq.Queue(q.queue),
		// Never asynq's 30-minute default: the attempt's own wall time plus a margin.
		asynq.Timeout(budget.WallTime.D() + TaskMargin),
		asynq.MaxRetry(q.maxRetry),
	}
	if nb := a.Condition.NotBefore; nb.After(q.clock.Now()) {
		opts = append(opts, asynq.ProcessAt(nb))
	}
	task := asynq.NewTask(workitems.TaskTypeAttempt, body, opts...)
	_, err := q.client.EnqueueContext(ctx, task)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		err = q.unblockArchived(ctx, task, q.queue, workitems.TaskID(it.ID, a.N))
	}
	if err != nil {
		return fmt.Errorf("scheduler: enqueue %s: %w", workitems.TaskID(it.ID, a.N), err)
	}
	if it.State == workitems.StateRetryWait {
		if _, err := q.store.MarkQueued(ctx, it.ID, a.N); err != nil {
			return err
		}
	}
	return nil
}

// WakeTimeout bounds a wake task: a few forge reads, a merge, a record.
const WakeTimeout = 2 * time.Minute

// EnqueueWake puts the wake of a waiting item on the queue: one per wait (the task id names
// the wait), so a webhook and a poll that both see the evidence make one wake.
func (q *Queue) EnqueueWake(ctx context.Context, item string, seq int64, by workitems.WakeReason) error {
	body, _ := json.Marshal(workitems.WakePayload{Item: item, Seq: seq, By: by})
	id := workitems.WakeTaskID(item, seq)
	urgent := workitems.UrgentQueue(q.queue) // a wake is a few reads: never behind new work
	task := asynq.NewTask(workitems.TaskTypeWake, body, asynq.TaskID(id), asynq.Queue(urgent),
		asynq.Timeout(WakeTimeout), asynq.MaxRetry(max(q.maxRetry, 10)), asynq.Retention(time.Hour))
	_, err := q.client.EnqueueContext(ctx, task)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		err = q.unblockArchived(ctx, task, urgent, id)
	}
	if err != nil {
		return fmt.Errorf("scheduler: enqueue %s: %w", id, err)
	}
	return nil
}

// unblockArchived handles a task id conflict: a live task is fine (already enqueued); an
// archived one would block the id forever, so it is deleted and the task enqueued anew.
func (q *Queue) unblockArchived(ctx context.Context, task *asynq.Task, queue, taskID string) error {
	if q.inspector == nil {
		return nil
	}
	info, err := q.inspector.GetTaskInfo(queue, taskID)
	if err != nil || info.State != asynq.TaskStateArchived {
		return nil
	}
	if err := q.inspector.DeleteTask(queue, info.ID); err != nil {
		return err
	}
	_, err = q.client.EnqueueContext(ctx, task)
	return err
}

// Resolve applies a person's action to an item, counts it as a person's decision, and enqueues
// the new attempt of a retry. A refused action is not counted.
func (q *Queue) Resolve(ctx context.Context, id string, r workitems.Resolution) (*workitems.Item, error) {
	if !utf8.ValidString(r.Input) {
		return nil, workitems.Classify(workitems.ClassInvalidInput, fmt.Errorf("scheduler: resolve %s: input: %w", id, ErrInvalidUTF8))
	}
	it, err := q.store.Resolve(ctx, id, r)
	if err != nil {
		return nil, err
	}
	q.obs.Decision(it.Template, workitems.ActorPerson, workitems.Outcome(r.Action), "", it.ID)
	if it.State == workitems.StateQueued {
		if err := q.EnqueueAttempt(ctx, it); err != nil {
			q.log.Warn("enqueue after resolve failed; reconcile will retry", "item", id, "err", err)
		}
	}
	return it, nil
}

// reconcilePage is how many items a repair pass reads at a time.
const reconcilePage = 100

// Reconcile repairs the gap a crash can leave between the store and asynq: an item waiting to
// retry whose task was never enqueued, or a queued item whose task is gone. It walks each state
// oldest first in pages, so that no number of newer items keeps the oldest from being repaired,
// and an enqueue that fails is logged and the pass goes on with the next item. It returns how
// many items it re-enqueued and the first error it met.
func (q *Queue) Reconcile(ctx context.Context, olderThan time.Duration) (int, error) {
	n := 0
	var first error
	for _, st := range []workitems.State{workitems.StateRetryWait, workitems.StateQueued} {
		err := q.store.ScanState(ctx, st, reconcilePage, func(items []*workitems.Item) error {
			for _, it := range items {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if q.clock.Now().Sub(it.UpdatedAt) < olderThan {
					continue
				}
				if st == workitems.StateQueued && q.heldInFleet(ctx, it) {
					continue // waits its turn on purpose: the fleet's admitter enqueues it
				}
				if st == workitems.StateQueued && q.inspector != nil {
					// A live task delivers the item; an archived one (retries used up) would
					// strand it: EnqueueAttempt replaces it.
					info, err := q.inspector.GetTaskInfo(q.queue, workitems.TaskID(it.ID, it.Attempt))
					if err == nil && info.State == asynq.TaskStateActive {
						// Taken by a worker that has not started the attempt: it may have died.
						if ok, err := q.redeliverTaken(ctx, it); err != nil {
							q.log.Warn("reconcile: enqueue failed; the next pass tries again", "item", it.ID, "attempt", it.Attempt, "err", err)
							if first == nil {
								first = err
							}
						} else if ok {
							n++
						}
						continue
					}
					if err == nil && info.State != asynq.TaskStateArchived {
						continue
					}
					if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
						q.log.Warn("reconcile: task state unknown; the next pass tries again", "item", it.ID, "err", err)
						continue
					}
				}
				if err := q.EnqueueAttempt(ctx, it); err != nil {
					q.log.Warn("reconcile: enqueue failed; the next pass tries again", "item", it.ID, "attempt", it.Attempt, "err", err)
					if first == nil {
						first = err
					}
					continue
				}
				n++
				_ = q.store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventEnqueueRepaired, Attempt: it.Attempt,
					Message: "attempt task re-enqueued by reconcile"})
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, first
}

// Recover finds attempts whose worker is gone and enqueues their recovery at once: an item
// running or verifying whose attempt lease expired (nobody renews it) and whose task asynq will
// not deliver soon by itself. asynq's own recovery of a dead worker's task takes 60–120 s (its
// 30 s lease, 30 s of grace, a one-minute sweep) and gives up after MaxRetry; this one follows
// the attempt lease (LeaseTTL, 15 s by default) and has no cap. The recovery task has an id of
// its own per fencing epoch (workitems.RecoverTaskID); the recovered attempt resumes from its
// checkpoint under a newer epoch, which fences out the lost execution should it still live.
// It returns how many recoveries it enqueued and the first error it met; like Reconcile, it
// walks oldest first in pages and goes on past an item it could not repair.
func (q *Queue) Recover(ctx context.Context) (int, error) { return q.RecoverEach(ctx, nil) }

// RecoverEach is Recover that also tells each (when not nil) of every recovery it enqueued, so
// that a worker with room can run it at once (worker.Server's direct recoveries) instead of
// waiting for a slot of the queue; the recovery task is the durable record either way, and
// whichever execution takes the attempt's lease first runs it.
func (q *Queue) RecoverEach(ctx context.Context, each func(item string, attempt int)) (int, error) {
	n := 0
	var first error
	for _, st := range []workitems.State{workitems.StateRunning, workitems.StateVerifying} {
		err := q.store.ScanState(ctx, st, reconcilePage, func(items []*workitems.Item) error {
			for _, it := range items {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r, err := q.recoverOne(ctx, it)
				if err != nil {
					q.log.Warn("recover: attempt not recovered; the next pass tries again", "item", it.ID, "attempt", it.Attempt, "err", err)
					if first == nil {
						first = err
					}
					continue
				}
				if r == recoveryEnqueued {
					n++
				}
				if r != recoveryNone && each != nil {
					each(it.ID, it.Attempt)
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, first
}

// recovery is what a recovery pass did for one item.
type recovery int

const (
	recoveryNone     recovery = iota // its worker lives, or asynq delivers a task of it soon by itself
	recoveryEnqueued                 // its recovery task was enqueued by this pass
	// recoveryPending: its recovery task waits on the urgent queue for a free slot (another
	// pass enqueued it): a worker with a direct-recovery slot free may run it at once.
	recoveryPending
)

// recoverOne enqueues the recovery of it when its worker is gone.
func (q *Queue) recoverOne(ctx context.Context, it *workitems.Item) (recovery, error) {
	held, epoch, err := q.store.LeaseHeld(ctx, it.ID, it.Attempt)
	if err != nil || held {
		return recoveryNone, err
	}
	if q.inspector != nil {
		// A task asynq is about to deliver (a yield's, a failure's retry, an earlier recovery's)
		// takes the attempt over by itself; a retry after a real failure keeps its backoff.
		for _, t := range []struct{ queue, id string }{{q.queue, workitems.TaskID(it.ID, it.Attempt)},
			{workitems.UrgentQueue(q.queue), workitems.RecoverTaskID(it.ID, it.Attempt, epoch-1)}} {
			info, err := q.inspector.GetTaskInfo(t.queue, t.id)
			if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
				continue
			}
			if err != nil {
				return recoveryNone, err
			}
			switch info.State {
			case asynq.TaskStatePending:
				// Waiting for a slot behind other work: a free direct-recovery slot may run it now.
				return recoveryPending, nil
			case asynq.TaskStateScheduled, asynq.TaskStateRetry:
				return recoveryNone, nil
			}
		}
	}
	a := it.Current()
	if a == nil {
		return recoveryNone, fmt.Errorf("scheduler: item %s has no attempt %d", it.ID, it.Attempt)
	}
	task := q.recoveryTask(it, a, workitems.RecoverTaskID(it.ID, a.N, epoch))
	_, err = q.client.EnqueueContext(ctx, task)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		// Enqueued by another worker's pass (or by ours, earlier); an archived one would block
		// this epoch's recovery forever, an orphaned active one for asynq's 60-120 s.
		return q.recoverTaken(ctx, it, a, epoch, task)
	case err != nil:
		return recoveryNone, fmt.Errorf("scheduler: enqueue recovery of %s attempt %d: %w", it.ID, a.N, err)
	}
	q.log.Info("recover: attempt lost its worker; recovery enqueued", "item", it.ID, "attempt", a.N, "epoch", epoch, "state", it.State)
	_ = q.store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventEnqueueRepaired, Attempt: a.N,
		Message: fmt.Sprintf("attempt lost its worker (lease of epoch %d expired); recovery enqueued", epoch)})
	return recoveryEnqueued, nil
}

// newItem is a new item of template t (of cfg) with its first attempt queued, pinned to the
// config it is created under: every way of making an item (Submit, Rerun) builds it here.
func newItem(cfg *config.Config, t *config.Template, id string, o workitems.Origin, input string) *workitems.Item {
	return &workitems.Item{
		ID: id, Template: t.Name, Goal: t.Goal, Origin: o,
		Budget: t.Budget, ItemBudget: t.ItemBudget, MaxAttempts: t.MaxAttempts, Pin: cfg.PinFor(t),
		Attempts: []workitems.Attempt{{N: 1, Condition: workitems.Condition{Input: input, Strategy: t.FirstStrategy()}, State: workitems.AttemptQueued}},
	}
}
