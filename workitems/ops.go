package workitems

import "fmt"

// Op names one of the Store's transitions of an item. Each Op's legal source states come from
// one table, machine: an operation reads them with Sources and refuses every other state with a
// *RefusedError before it writes anything.
type Op string

// The store's named transitions.
const (
	OpStart           Op = "start"            // StartAttempt of a queued attempt
	OpResume          Op = "resume"           // StartAttempt of an attempt already running or verifying
	OpRecordWorkspace Op = "record_workspace" // RecordWorkspace
	OpExit            Op = "exit"             // RecordExit, RecordExitWith
	OpDecide          Op = "decide"           // RecordDecision, RecordDelivery
	OpWake            Op = "wake"             // Wake: the decision on a waiting item's evidence
	OpMarkQueued      Op = "mark_queued"      // MarkQueued
	OpResolveClose    Op = "resolve_close"    // Resolve with ResolveClose
	OpResolveRetry    Op = "resolve_retry"    // Resolve with ResolveRetry
	OpCancel          Op = "cancel"           // Resolve with ResolveCancel
	OpFail            Op = "fail"             // Fail
	// OpEscalate: EscalateConfigChange, an open item escalated before verification because its
	// template no longer fits (DESIGN: any open state may escalate); a verifier's escalation is
	// OpDecide from verifying.
	OpEscalate Op = "escalate"
)

// AllOps lists every Op.
func AllOps() []Op {
	return []Op{OpStart, OpResume, OpRecordWorkspace, OpExit, OpDecide, OpWake, OpMarkQueued,
		OpResolveClose, OpResolveRetry, OpCancel, OpFail, OpEscalate}
}

// Edge is one labelled edge of the state machine. From == To is an operation that keeps the
// state (a resume, a workspace record); Transition never accepts those.
type Edge struct {
	Op       Op
	From, To State
}

// machine is the whole state machine, in one place: every edge with the operation that takes
// it. edges (what Transition checks) and every operation's sources are read from it.
var machine = []Edge{
	{OpStart, StateQueued, StateRunning},
	{OpResume, StateRunning, StateRunning},
	{OpResume, StateVerifying, StateVerifying},
	{OpRecordWorkspace, StateRunning, StateRunning},
	{OpExit, StateRunning, StateVerifying},
	{OpDecide, StateVerifying, StateClosed},
	{OpDecide, StateVerifying, StateRetryWait},
	{OpDecide, StateVerifying, StateEscalated},
	{OpDecide, StateVerifying, StateWaiting},
	{OpWake, StateWaiting, StateClosed},
	{OpWake, StateWaiting, StateRetryWait},
	{OpWake, StateWaiting, StateEscalated},
	{OpWake, StateWaiting, StateWaiting},
	{OpMarkQueued, StateRetryWait, StateQueued},
	{OpResolveClose, StateEscalated, StateClosed},
	{OpResolveRetry, StateEscalated, StateQueued},
	{OpResolveRetry, StateWaiting, StateQueued}, // /outerloop retry on a waiting pull request
	{OpCancel, StateQueued, StateCancelled},
	{OpCancel, StateRunning, StateCancelled},
	{OpCancel, StateVerifying, StateCancelled},
	{OpCancel, StateWaiting, StateCancelled},
	{OpCancel, StateRetryWait, StateCancelled},
	{OpCancel, StateEscalated, StateCancelled},
	{OpFail, StateQueued, StateFailed},
	{OpFail, StateRunning, StateFailed},
	{OpFail, StateVerifying, StateFailed},
	{OpFail, StateWaiting, StateFailed},
	{OpEscalate, StateQueued, StateEscalated},
	{OpEscalate, StateRunning, StateEscalated},
	{OpEscalate, StateRetryWait, StateEscalated},
}

// edgeMap is machine without the state-keeping edges: from → allowed targets.
func edgeMap() map[State][]State {
	m := map[State][]State{}
	for _, e := range machine {
		if e.From == e.To {
			continue
		}
		dup := false
		for _, t := range m[e.From] {
			dup = dup || t == e.To
		}
		if !dup {
			m[e.From] = append(m[e.From], e.To)
		}
	}
	return m
}

// Edges returns every edge of the state machine with its operation.
func Edges() []Edge { return append([]Edge(nil), machine...) }

// Sources returns the states op may start from, in lifecycle order.
func (op Op) Sources() []State {
	var out []State
	for _, s := range AllStates() {
		if op.From(s) {
			out = append(out, s)
		}
	}
	return out
}

// From reports whether op may start from s.
func (op Op) From(s State) bool {
	for _, e := range machine {
		if e.Op == op && e.From == s {
			return true
		}
	}
	return false
}

// Takes reports whether op has the edge from → to.
func (op Op) Takes(from, to State) bool {
	for _, e := range machine {
		if e.Op == op && e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// RefusedError says a named operation was refused: the item is in a state the operation does
// not start from, or a fenced operation names an attempt the item has moved past. Nothing was
// written. It matches ErrInvalidTransition, and, for the worker's fenced operations (start,
// resume, workspace, exit, decide), ErrStale: the attempt moved on and its worker should stop.
type RefusedError struct {
	Op    Op
	Item  string
	State State
	// Attempt is the item's current attempt; Want the one the caller named (0: none named).
	Attempt, Want int
}

func (e *RefusedError) Error() string {
	if e.Want != 0 && e.Want != e.Attempt {
		return fmt.Sprintf("workitems: item %s: %s for attempt %d refused: the item is at attempt %d (%s)",
			e.Item, e.Op, e.Want, e.Attempt, e.State)
	}
	return fmt.Sprintf("workitems: item %s: %s is not allowed in state %s (only from %v)", e.Item, e.Op, e.State, e.Op.Sources())
}

// Is makes errors.Is match ErrInvalidTransition, and ErrStale for the worker's operations.
func (e *RefusedError) Is(target error) bool {
	switch target {
	case ErrInvalidTransition:
		return true
	case ErrStale:
		switch e.Op {
		case OpStart, OpResume, OpRecordWorkspace, OpExit, OpDecide, OpWake:
			return true
		}
	}
	return false
}
