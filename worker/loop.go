package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// InnerLoop runs one attempt of an item and returns its explicit exit. It must return when ctx
// is cancelled (exit aborted), write a checkpoint after every step through a.Checkpoints, and
// charge what it uses to a.Meter; a *BudgetError from the meter ends the attempt with
// budget_exhausted, never completed. An error it cannot recover from is an exit too
// (failed / transient_error with a class), not a panic.
type InnerLoop interface {
	Run(ctx context.Context, a *Attempt) workitems.Exit
}

// InnerLoopFunc adapts a function to InnerLoop.
type InnerLoopFunc func(ctx context.Context, a *Attempt) workitems.Exit

// Run calls f.
func (f InnerLoopFunc) Run(ctx context.Context, a *Attempt) workitems.Exit { return f(ctx, a) }

// Attempt is everything an inner loop gets for one attempt.
type Attempt struct {
	Item      *workitems.Item     // snapshot at attempt start
	N         int                 // attempt number, from 1
	Condition workitems.Condition // what this attempt runs under
	Template  *config.Template
	Config    *config.Config // deployment config (providers for the agent loop)
	Workspace string         // absolute path; tools must stay inside it
	// Resumed is true when an earlier execution of this attempt wrote checkpoints; the loop
	// continues from Checkpoints.Load instead of starting over.
	Resumed     bool
	Meter       *Meter
	Checkpoints Checkpointer
	Events      EventSink
	Steer       SteerSource
	DoneCheck   DoneChecker
	Logger      *slog.Logger
	// Runner starts every child process of the attempt (sandbox, guard, records); nil runs
	// them unconfined (tests).
	Runner *proc.Runner
}

// Policy returns the sandbox policy for a command of this attempt, def being the kind's
// network when the template names none.
func (a *Attempt) Policy(def proc.Network) proc.Policy {
	return proc.PolicyFor(a.Template, a.Workspace, def)
}

// ProcKey names the attempt in the runner's records.
func (a *Attempt) ProcKey() string {
	id := ""
	if a.Item != nil {
		id = a.Item.ID
	}
	return fmt.Sprintf("%s/%d", id, a.N)
}

// Checkpointer persists a loop's progress under the attempt's fencing epoch.
type Checkpointer interface {
	// Load returns the last saved state (nil when none) and every history entry appended so far.
	Load(ctx context.Context) (state []byte, history [][]byte, err error)
	// Save replaces the state and appends history entries in one atomic, fenced write. It
	// returns an error matching workitems.ErrLeaseLost once another worker took the attempt over;
	// the loop must then stop without writing anything else.
	Save(ctx context.Context, state []byte, appendHistory ...[]byte) error
}

// EventSink records events on the item's log. Item, Attempt and At are filled in.
type EventSink interface {
	Emit(ctx context.Context, e workitems.Event)
}

// SteerSource hands over input a person queued for a running attempt (outerloop steer).
type SteerSource interface {
	// Drain returns the inputs queued since the last Drain, oldest first. The loop must hold
	// them in the state or history of its next checkpoint: that checkpoint removes them from
	// the queue in the same write, so input drained before a crash is handed over again.
	Drain(ctx context.Context) ([]string, error)
}

// DoneChecker runs the template's done check in the workspace and summarises the evidence,
// for loops that let the agent check its own work (a claim; the verifier decides).
type DoneChecker interface {
	Check(ctx context.Context) (DoneCheckResult, error)
}

// DoneCheckResult is a done check's outcome as a loop sees it.
type DoneCheckResult struct {
	Passed  bool
	Summary string // failed tests, first error, counts
}

// Registry maps inner loop kinds (agent, exec, script and any a process adds) to
// implementations. It is the process's config.LoopRegistry (registry_kinds.go): the kinds,
// their traits and their settings' checks.
type Registry struct {
	mu    sync.RWMutex
	loops map[workitems.LoopKind]InnerLoop
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{loops: map[workitems.LoopKind]InnerLoop{}} }

// Register adds or replaces the loop for kind. A loop may declare its kind's traits
// (LoopTraitsDeclarer) and check its settings (LoopSettingsValidator); a built-in kind's loop
// that does neither keeps the built-in ones.
func (r *Registry) Register(kind workitems.LoopKind, l InnerLoop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loops[kind] = l
}

// ErrUnknownLoop is returned by Lookup for a kind nobody registered.
var ErrUnknownLoop = errors.New("unknown inner loop")

// Lookup returns the loop for kind.
func (r *Registry) Lookup(kind workitems.LoopKind) (InnerLoop, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	l, ok := r.loops[kind]
	if !ok {
		return nil, fmt.Errorf("worker: loop %q: %w (registered: %v)", kind, ErrUnknownLoop, r.kindsLocked())
	}
	return l, nil
}

func (r *Registry) kindsLocked() []workitems.LoopKind {
	ks := make([]workitems.LoopKind, 0, len(r.loops))
	for k := range r.loops {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
