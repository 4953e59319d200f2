package workitems

import (
	"errors"
	"fmt"
)

// State is where an item is in its life.
type State string

// The item states. Closed, Failed and Cancelled are terminal.
const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateVerifying State = "verifying"
	// StateWaiting: the change is pushed and the item waits for evidence (CI, a review) without
	// a worker, a lease or a goroutine (Item.Wait says what for).
	StateWaiting   State = "waiting"
	StateRetryWait State = "retry_wait"
	StateEscalated State = "escalated"
	StateClosed    State = "closed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// AllStates lists every item state, in lifecycle order.
func AllStates() []State {
	return []State{StateQueued, StateRunning, StateVerifying, StateWaiting, StateRetryWait,
		StateEscalated, StateClosed, StateFailed, StateCancelled}
}

// Valid reports whether s is one of AllStates.
func (s State) Valid() bool {
	for _, v := range AllStates() {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool {
	return s == StateClosed || s == StateFailed || s == StateCancelled
}

// Open reports whether the item still counts against its template's max_open.
func (s State) Open() bool { return s.Valid() && !s.Terminal() }

// edges is the state machine as Transition checks it: from → allowed targets, read from the
// labelled table machine (ops.go), where every edge names the operation that takes it.
var edges = edgeMap()

// ErrInvalidTransition is matched (errors.Is) by every *TransitionError.
var ErrInvalidTransition = errors.New("invalid state transition")

// TransitionError says which edge was refused.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("workitems: state %s → %s is not allowed", e.From, e.To)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// Transition checks the edge from → to and returns to, or a *TransitionError.
func Transition(from, to State) (State, error) {
	for _, t := range edges[from] {
		if t == to {
			return to, nil
		}
	}
	return from, &TransitionError{From: from, To: to}
}
