package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// FleetGate is the limits of a fleet template's items (fleet.Gate): Acquire says whether an
// attempt may start now, or holds its item in line (false) until its turn comes.
type FleetGate interface {
	Acquire(ctx context.Context, t *config.Template, it *workitems.Item) (bool, error)
}

// Enqueuer puts an item's current attempt on the queue (scheduler.Queue).
type Enqueuer interface {
	EnqueueAttempt(ctx context.Context, it *workitems.Item) error
	Reconcile(ctx context.Context, olderThan time.Duration) (int, error)
	// Recover enqueues the recovery of attempts whose worker is gone (their lease expired).
	Recover(ctx context.Context) (int, error)
}

// Observer receives the worker's measurements (metrics.Metrics implements it).
type Observer interface {
	AttemptStarted(template, loop string)
	AttemptFinished(template, loop string, reason workitems.ExitReason, d time.Duration, steps int64, itemID string)
	// AddSpend and AddModelSpend count spend as it is charged: at every checkpoint, and at the
	// exit what no checkpoint charged. provider is the config's key, model the one asked for
	// ("" for the provider's configured model).
	AddSpend(template, loop string, delta workitems.Spend, itemID string)
	AddModelSpend(template, provider, model string, delta workitems.Spend, itemID string)
	// SetRunningCost reports the cost an attempt running here has been charged so far;
	// ClearRunningCost that it stopped running here.
	SetRunningCost(template, loop, itemID string, usd float64)
	ClearRunningCost(itemID string)
	Decision(template string, actor workitems.ActorKind, outcome workitems.Outcome, rule workitems.RuleName, itemID string)
	Delivery(template string, outcome workitems.DeliveryOutcome, itemID string)
	CheckpointWrite(d time.Duration)
	// NetworkRefused counts n connections the sandbox's registries proxy refused to a command.
	NetworkRefused(template, reason string, n int)
}

// Errors a handler returns to asynq so that it tries the task again soon, without counting it
// as a failure: the attempt yielded at shutdown, or another worker holds its lease.
var (
	ErrYield     = errors.New("worker: attempt yielded (shutdown); resumes from its checkpoint")
	errCancelled = errors.New("item cancelled by a person")
)

// HandlerOptions configures a Handler.
type HandlerOptions struct {
	Store      *itemstore.Store
	Config     *config.Config
	Loops      *Registry
	Verifier   Verifier
	Enqueuer   Enqueuer
	Fleet      FleetGate   // fleet templates' limits (nil: none)
	Workspaces *Workspaces // default: under $TMPDIR/outerloop-work
	Deliverer  Deliverer   // nil: decisions are recorded as the verifier made them, nothing is committed
	Evidence   Evidence    // reads and judges a waiting item's evidence (wake tasks)
	Observer   Observer
	Clock      workitems.Clock
	Logger     *slog.Logger
	LeaseTTL   time.Duration // default 15s; renewed every third of it
	WorkerID   string        // default host:pid
	// Runner starts every child process of an attempt (sandbox, guard, records); nil runs
	// them unconfined.
	Runner *proc.Runner

	// KeepWorkspaces leaves the workspaces of closed and cancelled items in place (the demo's
	// --keep); without it they are removed right after the decision.
	KeepWorkspaces bool
	// CurrentConfig, when set, returns the config in force (a reload swaps it); Config is then
	// only the fallback. ReloadConfig loads the file again when a task names a template the
	// config in force does not know or knows in another version (config_check.go).
	CurrentConfig func() *config.Config
	ReloadConfig  func(ctx context.Context) *config.Config
	// ProgressEvery is how often a running done-check command reports its elapsed time and
	// output tail as a progress event (default proc.DefaultProgressEvery).
	ProgressEvery time.Duration
}

// Handler is the asynq handler of attempt tasks. It leases the attempt (fencing epoch), runs the
// inner loop under its budget with a checkpoint after every step, records the exit, asks the
// verifier, and records and acts on the decision. Every write is fenced, so a worker whose lease
// was taken over cannot write anything.
type Handler struct {
	o      HandlerOptions
	base   context.Context // cancelled at shutdown, before asynq stops
	cancel context.CancelFunc

	// abandon is cancelled when a shutdown stops waiting (Abandon): what Yield does not stop —
	// a done check, a delivery — is cancelled too, and its task handed back.
	abandon     context.Context
	stopWaiting context.CancelFunc

	// Not a WaitGroup: a task asynq dequeued just before Stop starts after Wait began, and a
	// WaitGroup's Add from zero must not race its Wait.
	mu      sync.Mutex
	running map[string]int // "item/attempt" → how many of its executions run here (Running)
	active  int            // tasks in ProcessTask
	idle    chan struct{}  // closed while active is 0
}

// NewHandler returns a Handler.
func NewHandler(o HandlerOptions) *Handler {
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 15 * time.Second
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Workspaces == nil {
		o.Workspaces = &Workspaces{Root: filepath.Join(os.TempDir(), "outerloop-work")}
	}
	if o.Loops == nil {
		o.Loops = NewRegistry() // no loop: every attempt fails naming its unknown kind
	}
	h := &Handler{o: o, running: map[string]int{}, idle: make(chan struct{})}
	close(h.idle)
	h.base, h.cancel = context.WithCancel(context.Background())
	h.abandon, h.stopWaiting = context.WithCancel(context.Background())
	return h
}

// Yield cancels every running attempt so that it checkpoints and returns ErrYield; Wait then
// waits for them. Together they make a graceful shutdown (see Server.Shutdown).
func (h *Handler) Yield() { h.cancel() }

// Wait waits for running handlers until ctx ends.
func (h *Handler) Wait(ctx context.Context) error {
	h.mu.Lock()
	idle := h.idle
	h.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Abandon cancels everything the running attempts still do (after Yield, a done check or a
// delivery under way): a shutdown that waited long enough calls it. Their tasks go back to the
// queue as yielded and resume where the store says (a verifying item is verified again).
func (h *Handler) Abandon() { h.stopWaiting() }

// Running names the attempts being processed here ("item/attempt"), sorted: what a shutdown that
// ran out of time was still waiting for.
func (h *Handler) Running() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.running))
	for k := range h.running {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (h *Handler) track(key string, d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[key] += d; h.running[key] <= 0 {
		delete(h.running, key)
	}
	if h.active == 0 && d > 0 {
		h.idle = make(chan struct{})
	}
	if h.active += d; h.active == 0 {
		close(h.idle)
	}
}

// ProcessTask implements asynq.Handler.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p workitems.TaskPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Item == "" || p.Attempt < 1 {
		return fmt.Errorf("worker: task payload %q is not {item, attempt}: %w", shorten.Clip(string(t.Payload()), 200), asynq.SkipRetry)
	}
	key := fmt.Sprintf("%s/%d", p.Item, p.Attempt)
	h.track(key, 1)
	defer h.track(key, -1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.abandon, cancel)()
	err := h.Process(ctx, p.Item, p.Attempt)
	if err != nil && h.abandon.Err() != nil {
		// Cut off by the shutdown, not the attempt's fault: retried soon, never counted.
		h.o.Logger.Warn("attempt cut off at shutdown; its task goes back to the queue", "item", p.Item, "attempt", p.Attempt, "err", err)
		return fmt.Errorf("%w: %w", ErrYield, err)
	}
	if p.Recover && errors.Is(err, workitems.ErrLeaseHeld) {
		// The attempt's holder lives after all (its renewal was late): nothing to recover. Should
		// it die, its lease expires and the next recovery pass enqueues a task of its own.
		h.o.Logger.Info("recovery dropped: the attempt's lease is held", "item", p.Item, "attempt", p.Attempt)
		return nil
	}
	return err
}

// ProcessRecovered runs a recovered attempt straight from the server's recovery pass (beside the
// queue's slots; see ServerOptions.DirectRecoveries), bounded like its task would be: the
// attempt's wall time plus TaskMargin. An attempt whose lease another execution took first is
// left to it. Shutdown waits for it as for any task (Wait), and Yield makes it checkpoint.
func (h *Handler) ProcessRecovered(id string, n int) {
	key := fmt.Sprintf("%s/%d", id, n)
	h.track(key, 1)
	defer h.track(key, -1)
	it, err := h.o.Store.Get(h.base, id)
	if err != nil || it.Current() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), it.AttemptBudget(it.Current().Condition).WallTime.D()+directMargin)
	defer cancel()
	defer context.AfterFunc(h.abandon, cancel)()
	err = h.Process(ctx, id, n)
	switch {
	case err == nil, errors.Is(err, workitems.ErrLeaseHeld):
	default:
		// The recovery task on the queue (asynq's retries) takes it from here.
		h.o.Logger.Warn("direct recovery did not finish the attempt; its queued recovery goes on", "item", id, "attempt", n, "err", err)
	}
}

// directMargin is the margin of a direct recovery over the attempt's wall time, as the queue's
// (scheduler.TaskMargin) gives its tasks.
const directMargin = 2 * time.Minute

// Process runs attempt n of an item (the body of ProcessTask).
func (h *Handler) Process(ctx context.Context, id string, n int) error {
	log := h.o.Logger.With("item", id, "attempt", n)
	if !h.o.KeepWorkspaces {
		defer h.removeEnded(ctx, id, log) // closed or cancelled: this host's workspaces go at once
	}
	st := h.o.Store
	it, err := st.Get(ctx, id)
	if errors.Is(err, workitems.ErrNotFound) {
		log.Warn("task for an unknown item dropped")
		return fmt.Errorf("worker: %w: %w", err, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	if it.Attempt != n || it.State.Terminal() || it.State == workitems.StateEscalated {
		log.Info("stale task skipped", "state", it.State, "current_attempt", it.Attempt)
		return nil
	}
	if it.State == workitems.StateRetryWait { // enqueued, but MarkQueued did not happen
		if it, err = st.MarkQueued(ctx, id, n); err != nil {
			return err
		}
	}
	tmpl, done, err := h.templateFor(ctx, it, log)
	if done || err != nil {
		return err
	}
	if h.o.Fleet != nil && it.Repo != "" {
		// A fleet's limits: past them the item waits its turn in line, and this task ends.
		if ok, err := h.o.Fleet.Acquire(ctx, tmpl, it); err != nil {
			return err
		} else if !ok {
			log.Info("attempt held: the fleet's limits are reached; it starts when its turn comes", "template", it.Template)
			return nil
		}
	}
	holder := h.o.WorkerID + "/" + randomHex(4)
	fence, err := st.AcquireLease(ctx, id, n, holder, h.o.LeaseTTL)
	if err != nil {
		return err // ErrLeaseHeld: asynq tries again shortly
	}
	defer func() { _ = st.ReleaseLease(context.WithoutCancel(ctx), fence) }()
	// Refusals of every command of this attempt, its done checks included, go to its log.
	defer h.o.Runner.WatchRefusals(fmt.Sprintf("%s/%d", id, n), h.networkRefused(it.Template, &storeSink{store: st, fence: fence, item: id, attempt: n, log: log}))()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(h.base, func() { cancel(ErrYield) })
	defer stop()
	hbDone := h.heartbeat(runCtx, cancel, fence, log)
	defer hbDone()

	it, resumed, err := st.StartAttempt(ctx, fence, holder)
	if errors.Is(err, workitems.ErrStale) || errors.Is(err, workitems.ErrLeaseLost) {
		log.Info("attempt not started", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	log = log.With("epoch", fence.Epoch)
	a := it.Current()
	var ws, base string
	if it.State == workitems.StateRunning {
		// However the attempt ends here (exit, yield, lost lease, cancel), it no longer runs here.
		defer h.o.Observer.ClearRunningCost(it.ID)
		r := h.runLoop(runCtx, it, tmpl, fence, resumed, log)
		// The loop has stopped: its cost is charged, not running, before the item may close.
		h.o.Observer.ClearRunningCost(it.ID)
		exit, spend := r.exit, r.spend
		ws, base = r.workspace, r.base
		switch cause := context.Cause(runCtx); {
		case r.unavailable != nil:
			log.Warn("attempt not set up: Redis unavailable; the task is tried again", "err", r.unavailable)
			return fmt.Errorf("worker: set up attempt: %w", r.unavailable)
		case errors.Is(cause, workitems.ErrLeaseLost):
			log.Warn("lease lost; the new holder continues", "exit", exit.Reason)
			return nil
		case errors.Is(cause, errCancelled):
			log.Info("attempt stopped: item cancelled")
			return nil
		case exit.Reason == workitems.ExitAborted && errors.Is(cause, ErrYield):
			log.Info("attempt yielded at shutdown; it resumes from its checkpoint")
			return ErrYield
		case exit.Reason == workitems.ExitAborted && ctx.Err() != nil:
			// asynq cancelled us (its timeout or CancelProcessing): keep the checkpoint and let
			// asynq's retry resume it.
			return fmt.Errorf("worker: attempt aborted: %w", context.Cause(ctx))
		}
		rec := itemstore.ExitRecord{Exit: exit, Spend: spend, Workspace: ws, Restarted: r.restarted}
		if r.snap != nil {
			rec.Snapshot, rec.Keep = r.snap.exitRecord(ctx)
		}
		it, err = st.RecordExitWith(ctx, fence, rec)
		if err != nil {
			if errors.Is(err, workitems.ErrLeaseLost) || errors.Is(err, workitems.ErrStale) {
				log.Warn("exit not recorded", "err", err)
				return nil
			}
			return err
		}
		h.o.Observer.AttemptFinished(it.Template, string(loopKind(tmpl, a.Condition)), exit.Reason, spend.WallTime.D(), spend.Steps, it.ID)
		if r.charge != nil { // RecordExit charged what the checkpoints had not
			delta := itemstore.Uncharged(spend, r.charge.charged)
			r.charge.charged = r.charge.charged.Add(delta)
			r.charge.count(h.o.Observer, delta)
		}
		log.Info("attempt exited", "reason", exit.Reason, "budget", exit.Budget, "message", exit.Message)
	} else {
		// Resumed at verifying: the loop finished earlier; verify exactly the tree it left.
		var re *RestoreError
		if ws, base, err = h.verifyingWorkspace(ctx, it, tmpl, log); errors.As(err, &re) {
			return h.workspaceLost(ctx, it, fence, re, log)
		} else if err != nil {
			return err
		}
	}
	return h.decide(ctx, it, tmpl, fence, ws, base, log)
}

// loopResult is what running the inner loop left.
type loopResult struct {
	exit            workitems.Exit
	spend           workitems.Spend
	workspace, base string
	restarted       bool         // the loop could not resume an external session
	snap            *snapshotter // the workspace's, for the exit snapshot
	charge          *charge      // what the checkpoints charged (nil: the loop never ran)
	// unavailable is Redis not answering while the attempt was set up: not the attempt's
	// failure, so the task is handed back (RedisBlipRetryDelay) and the attempt resumes.
	unavailable error
}

// runLoop prepares the workspace and runs the inner loop under the attempt's budget.
func (h *Handler) runLoop(ctx context.Context, it *workitems.Item, tmpl *config.Template, fence *itemstore.Fence,
	resumed bool, log *slog.Logger) loopResult {
	a := it.Current()
	kind := loopKind(tmpl, a.Condition)
	ch := &charge{template: it.Template, loop: kind, item: it.ID, model: a.Condition.Strategy.Model}
	if traits, _ := h.o.Loops.LoopTraits(kind); traits.CallsModel {
		ch.provider = tmpl.Loop.Provider
	}
	cp := &fencedCheckpointer{store: h.o.Store, fence: fence, obs: h.o.Observer, charge: ch, clock: h.o.Clock, log: log}
	env, err := cp.envelope(ctx)
	if err == nil {
		ch.charged, err = h.o.Store.ChargedSpend(ctx, it.ID, a.N)
	}
	if redisUnavailable(err) { // both are reads of the store alone
		return loopResult{unavailable: err}
	}
	if err != nil && ctx.Err() != nil { // stopped before it began (see below)
		return loopResult{exit: workitems.Exit{Reason: workitems.ExitAborted, Message: err.Error()}}
	}
	if err != nil {
		return loopResult{exit: workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient, Message: err.Error()}}
	}
	prior := resumedSpend(env, ch.charged)
	budget := it.AttemptBudget(a.Condition)
	loopBudget := budget
	loopBudget.WallTime -= budget.VerifyReserve // kept back for the done check
	loopBudget.VerifyReserve = 0
	meter := NewMeter(loopBudget, prior, h.o.Clock)
	cp.meter = meter
	fail := func(class workitems.ErrorClass, msg string) loopResult {
		return loopResult{exit: workitems.Exit{Reason: workitems.ExitFailed, Class: class, Message: msg}, spend: meter.Spent(), charge: ch}
	}
	loop, err := h.o.Loops.Lookup(kind)
	if err != nil {
		return fail(workitems.ClassInvalidInput, err.Error())
	}
	events := &storeSink{store: h.o.Store, fence: fence, item: it.ID, attempt: a.N, log: log}
	cp.warn = func(msg string, err error) {
		log.Warn(msg, "err", err)
		events.Emit(ctx, workitems.Event{Type: workitems.EventWarning, Message: msg + ": " + err.Error()})
	}
	w, resumed, err := h.workspace(ctx, it, tmpl, fence, cp, resumed, env, log)
	if storeUnavailable(err) {
		return loopResult{unavailable: err}
	}
	if err != nil && ctx.Err() != nil {
		// Stopped while the workspace was prepared (a shutdown's yield, a lost lease): not the
		// attempt's failure; the caller reads the cause.
		return loopResult{exit: workitems.Exit{Reason: workitems.ExitAborted, Message: err.Error()}, spend: meter.Spent()}
	}
	if err != nil {
		class := workitems.ClassOf(err)
		if class == workitems.ClassUnknown {
			class = workitems.ClassNotFound
		}
		if class == workitems.ClassTransient {
			return loopResult{exit: workitems.Exit{Reason: workitems.ExitTransientError, Class: class, Message: err.Error()}, spend: meter.Spent()}
		}
		return fail(class, err.Error())
	}
	ws, base := w.Dir, w.Base.Commit
	steer := &steerSource{store: h.o.Store, item: it.ID}
	cp.steer = steer
	att := &Attempt{
		Item: it, N: a.N, Condition: a.Condition, Template: tmpl, Config: h.config(), Workspace: ws,
		Resumed: resumed, Meter: meter, Checkpoints: cp, Events: events,
		Steer:     steer,
		DoneCheck: doneChecker{v: h.o.Verifier, tmpl: tmpl, ws: ws, events: events, every: h.o.ProgressEvery},
		Logger:    log,
		Runner:    h.o.Runner,
	}
	// Nothing an earlier execution of this attempt started on this host may run beside this one.
	if n, err := h.o.Runner.Reap(att.ProcKey()); err != nil {
		log.Warn("process records unreadable", "err", err)
	} else if n > 0 {
		log.Warn("killed what a dead execution of this attempt left running", "groups", n)
		events.Emit(ctx, workitems.Event{Type: workitems.EventWarning, Message: fmt.Sprintf("killed %d process group(s) a dead execution of this attempt left running", n)})
	}
	h.o.Observer.AttemptStarted(it.Template, string(kind))
	log.Info("attempt running", "loop", kind, "workspace", ws, "resumed", resumed)
	stopCharging := h.chargeWhileRunning(ctx, cp, h.o.LeaseTTL/3)
	exit := h.safeRun(ctx, loop, att)
	stopCharging()
	// A loop must never claim completion past a cap: the budget wins over the claim.
	if exit.Reason == workitems.ExitCompleted {
		var be *BudgetError
		if err := meter.Check(); errors.As(err, &be) && be.Kind != workitems.BudgetWallTime {
			exit = workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: be.Kind, Message: be.Error(), LastMessage: exit.LastMessage}
		}
	}
	return loopResult{exit: exit, spend: meter.Spent(), workspace: ws, base: base,
		restarted: att.Condition.Restarted && !a.Condition.Restarted, snap: cp.snap, charge: ch}
}

// safeRun turns a panicking loop into an explicit failed exit.
func (h *Handler) safeRun(ctx context.Context, l InnerLoop, a *Attempt) (exit workitems.Exit) {
	defer func() {
		if r := recover(); r != nil {
			exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvariantViolation,
				Message: fmt.Sprintf("inner loop panicked: %v", r)}
		}
	}()
	return l.Run(ctx, a)
}

// heartbeat starts the attempt's Heartbeat and returns its Stop.
func (h *Handler) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, f *itemstore.Fence, log *slog.Logger) func() {
	hb := &Heartbeat{Store: h.o.Store, Clock: h.o.Clock, TTL: h.o.LeaseTTL, Fence: f, Log: log, Cancel: cancel}
	hb.Start(ctx)
	return hb.Stop
}

func loopKind(t *config.Template, c workitems.Condition) workitems.LoopKind {
	if c.Strategy.Loop != "" {
		return c.Strategy.Loop
	}
	return t.Loop.Kind
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type nopObserver struct{}

func (nopObserver) AttemptStarted(string, string) {}
func (nopObserver) AttemptFinished(string, string, workitems.ExitReason, time.Duration, int64, string) {
}
func (nopObserver) AddSpend(string, string, workitems.Spend, string)              {}
func (nopObserver) AddModelSpend(string, string, string, workitems.Spend, string) {}
func (nopObserver) SetRunningCost(string, string, string, float64)                {}
func (nopObserver) Delivery(string, workitems.DeliveryOutcome, string)            {}
func (nopObserver) ClearRunningCost(string)                                       {}
func (nopObserver) NetworkRefused(string, string, int)                            {}
func (nopObserver) Decision(string, workitems.ActorKind, workitems.Outcome, workitems.RuleName, string) {
}
func (nopObserver) CheckpointWrite(time.Duration) {}
