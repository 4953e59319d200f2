package itemstore

import (
	"outerloop/workitems"
)

// guard refuses op on it unless it is in one of op's sources and, when want > 0, at attempt
// want (with that attempt recorded).
func guard(op workitems.Op, it *workitems.Item, want int) error {
	if want > 0 && (it.Attempt != want || it.Current() == nil) {
		return &workitems.RefusedError{Op: op, Item: it.ID, State: it.State, Attempt: it.Attempt, Want: want}
	}
	if !op.From(it.State) {
		return &workitems.RefusedError{Op: op, Item: it.ID, State: it.State, Attempt: it.Attempt, Want: want}
	}
	return nil
}

// take moves it along op's edge to to: a *RefusedError unless machine has that edge.
func take(op workitems.Op, it *workitems.Item, to workitems.State) error {
	if !op.Takes(it.State, to) {
		return &workitems.RefusedError{Op: op, Item: it.ID, State: it.State, Attempt: it.Attempt}
	}
	if it.State == to {
		return nil
	}
	return it.SetState(to)
}
