package verify

import (
	"fmt"
	"slices"
	"strings"

	"outerloop/workitems"
)

// A person's decisions reach the system two ways: directly (`outerloop resolve`, the console,
// the API: the person names the resolution, and the store records it), and through the forge,
// where what a person did is a signal the system reads: a comment command on the item's pull
// request, or the pull request merged or closed. The second kind is decided here, by rows as
// the policy's are, so that which signal does what, to which item, is written once
// (PersonRules, listed in POLICY.md) and not in the code that reads the forge (waits.Sink). The
// sink proves the signal is the item's own and the actor may act (write access); the rows
// decide the resolution; the store enforces the transition.

// PersonSignal is what a person did on the forge that may resolve an item.
type PersonSignal string

// The signals, in the order of the person table.
const (
	SignalRetry  PersonSignal = "retry"  // "/outerloop retry [input]" on the item's pull request
	SignalRebase PersonSignal = "rebase" // "/outerloop rebase [input]"
	SignalCancel PersonSignal = "cancel" // "/outerloop cancel"
	SignalMerged PersonSignal = "merged" // the item's pull request merged
	SignalClosed PersonSignal = "closed" // the item's pull request closed unmerged
)

// AllPersonSignals lists every PersonSignal.
func AllPersonSignals() []PersonSignal {
	return []PersonSignal{SignalRetry, SignalRebase, SignalCancel, SignalMerged, SignalClosed}
}

// CommandSignal is the signal of a comment's "/outerloop VERB": false for a verb that is none.
func CommandSignal(verb string) (PersonSignal, bool) {
	switch s := PersonSignal(verb); s {
	case SignalRetry, SignalRebase, SignalCancel:
		return s, true
	}
	return "", false
}

// PersonFacts is one signal and what it concerns. The caller has established that the pull
// request is the item's own and that Actor may act on the item's repository.
type PersonFacts struct {
	Signal PersonSignal
	Item   *workitems.Item
	Actor  string // "forge:user", as the resolution records it
	User   string // the forge account, as the input names it
	PR     int    // the pull request's number
	Text   string // what followed a command on its line (a retry's extra input)
}

// PersonRule is one row of the person table: the signal, the item states it acts in, and the
// resolution it records. Op is the store's transition the resolution takes; a row never names
// a state that Op does not start from (a test keeps it so).
type PersonRule struct {
	Name   workitems.RuleName
	Signal PersonSignal
	States []workitems.State
	Action workitems.ResolutionAction
	Op     workitems.Op
	When   string // in words (POLICY.md)
	// Input is the input the resolution records (a retry's next condition reads it).
	Input func(f PersonFacts) string
}

// PersonRules is the person table, one row per signal.
func PersonRules() []PersonRule {
	asked := func(f PersonFacts) string {
		s := fmt.Sprintf("%s asked for a %s on pull request #%d.", f.User, f.Signal, f.PR)
		if f.Signal == SignalRebase {
			s += " The attempt starts from the base branch as it is now; make the change again on it."
		}
		if t := strings.TrimSpace(f.Text); t != "" {
			s += "\n\n" + t
		}
		return s
	}
	ended := func(f PersonFacts) string {
		return fmt.Sprintf("pull request #%d was %s on the forge", f.PR, f.Signal)
	}
	return []PersonRule{
		{Name: workitems.RulePersonRetry, Signal: SignalRetry, Action: workitems.ResolveRetry, Op: workitems.OpResolveRetry,
			States: []workitems.State{workitems.StateWaiting, workitems.StateEscalated},
			When:   "`/outerloop retry [input]`: a new attempt, the request and its text the attempt's input", Input: asked},
		{Name: workitems.RulePersonRebase, Signal: SignalRebase, Action: workitems.ResolveRetry, Op: workitems.OpResolveRetry,
			States: []workitems.State{workitems.StateWaiting, workitems.StateEscalated},
			When:   "`/outerloop rebase [input]`: as retry, the input asking to make the change again on the base branch as it is now", Input: asked},
		{Name: workitems.RulePersonCancel, Signal: SignalCancel, Action: workitems.ResolveCancel, Op: workitems.OpCancel,
			States: workitems.OpCancel.Sources(),
			When:   "`/outerloop cancel`: the item ends, whatever it was doing (a running attempt is stopped)",
			Input:  func(PersonFacts) string { return "" }},
		// While the item waits, the same pull request's end is evidence and the wake's table
		// decides (pr_merged, pr_closed); escalated, nothing waits to read it: it is the
		// person's answer to the escalation.
		{Name: workitems.RulePersonMerged, Signal: SignalMerged, Action: workitems.ResolveClose, Op: workitems.OpResolveClose,
			States: []workitems.State{workitems.StateEscalated},
			When:   "the escalated item's pull request was merged: the person took the change", Input: ended},
		{Name: workitems.RulePersonClosed, Signal: SignalClosed, Action: workitems.ResolveCancel, Op: workitems.OpCancel,
			States: []workitems.State{workitems.StateEscalated},
			When:   "the escalated item's pull request was closed unmerged: the person declined the change", Input: ended},
	}
}

// PersonRefusedError says a signal does not act on the item in its state: no row holds.
type PersonRefusedError struct {
	Signal PersonSignal
	Item   string
	State  workitems.State
	States []workitems.State // the states the signal acts in
}

func (e *PersonRefusedError) Error() string {
	return fmt.Sprintf("%s does not act on item %s: it is %s, and %s acts only on an item that is %s",
		e.Signal, e.Item, e.State, e.Signal, joinStates(e.States))
}

// DecidePerson returns the resolution f's signal records, and the row that decided it; a
// *PersonRefusedError when the item is in a state the signal does not act in.
func DecidePerson(f PersonFacts) (workitems.Resolution, error) {
	for _, r := range PersonRules() {
		if r.Signal != f.Signal {
			continue
		}
		if !slices.Contains(r.States, f.Item.State) {
			return workitems.Resolution{}, &PersonRefusedError{Signal: f.Signal, Item: f.Item.ID, State: f.Item.State, States: r.States}
		}
		return workitems.Resolution{Action: r.Action, Actor: f.Actor, Input: r.Input(f), Rule: r.Name}, nil
	}
	return workitems.Resolution{}, fmt.Errorf("verify: person signal %q: no such signal (want one of %v)", f.Signal, AllPersonSignals())
}

func joinStates(ss []workitems.State) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}
