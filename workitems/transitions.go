package workitems

// The named transitions of an item. Each is one atomic Update that takes its legal source states
// from the labelled edge table (machine, ops.go) and refuses any other with a *RefusedError
// before writing; the fenced ones are refused with ErrLeaseLost when another worker holds a newer
// epoch on the attempt.

// DefaultMaxAttempts is max_attempts when neither the template nor defaults: set it.
const DefaultMaxAttempts = 3

// AttemptsAllowed is how many attempts the item may run: its template's max_attempts as pinned
// when the item was made (DefaultMaxAttempts when it has none). The policy's max_attempts guard
// counts with it; the store refuses a retry past it.
func (it *Item) AttemptsAllowed() int {
	if it.MaxAttempts > 0 {
		return it.MaxAttempts
	}
	return DefaultMaxAttempts
}
