package agentloop

import (
	"errors"
	"fmt"
	"slices"
)

// Phase is the control position of the agent loop's phase machine.
type Phase string

// The phases. Completed, Aborted and ErrorClosing are terminal.
const (
	Preparing    Phase = "preparing"
	Sampling     Phase = "sampling"
	JoiningTools Phase = "joining_tools"
	Deciding     Phase = "deciding"
	Compacting   Phase = "compacting"
	StopGate     Phase = "stop_gate"
	Completed    Phase = "completed"
	Aborted      Phase = "aborted"
	ErrorClosing Phase = "error_closing"
)

// AllPhases lists every phase, in the order a turn usually visits them.
func AllPhases() []Phase {
	return []Phase{Preparing, Sampling, JoiningTools, Deciding, Compacting, StopGate,
		Completed, Aborted, ErrorClosing}
}

// Terminal reports whether p ends a turn.
func (p Phase) Terminal() bool { return p == Completed || p == Aborted || p == ErrorClosing }

// ErrBadTransition is matched by every error Transition returns.
var ErrBadTransition = errors.New("agentloop: transition not allowed")

// forward lists the forward edges out of p; Aborted and ErrorClosing are reachable from every
// non-terminal phase and are added by Transition.
func forward(p Phase) []Phase {
	switch p {
	case Preparing:
		return []Phase{Sampling}
	case Sampling:
		return []Phase{JoiningTools}
	case JoiningTools:
		return []Phase{Deciding}
	case Deciding:
		return []Phase{Preparing, Compacting, StopGate}
	case Compacting:
		return []Phase{Preparing}
	case StopGate:
		return []Phase{Preparing, Completed}
	}
	return nil
}

// Transition returns nil when the machine may move from one phase to another, and an error
// matching ErrBadTransition otherwise. It is the only place the edges are decided.
func Transition(from, to Phase) error {
	if !slices.Contains(AllPhases(), from) || !slices.Contains(AllPhases(), to) {
		return fmt.Errorf("%w: unknown phase in %q → %q", ErrBadTransition, from, to)
	}
	if from.Terminal() {
		return fmt.Errorf("%w: %q is terminal", ErrBadTransition, from)
	}
	if to == Aborted || to == ErrorClosing || slices.Contains(forward(from), to) {
		return nil
	}
	return fmt.Errorf("%w: %q → %q", ErrBadTransition, from, to)
}
