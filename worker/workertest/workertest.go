// Package workertest holds in-memory doubles of what an inner loop is given, for the tests of
// inner loops: a Checkpointer that can be fenced out and an event sink that records.
package workertest

import (
	"context"
	"slices"
	"sync"

	"outerloop/workitems"
)

// Checkpoints is an in-memory worker.Checkpointer. The zero value holds no checkpoint.
type Checkpoints struct {
	// LoseAt makes the LoseAt-th Save and every later one fail with workitems.ErrLeaseLost, as
	// a worker's that another took over (0: never).
	LoseAt int

	mu      sync.Mutex
	state   []byte
	history [][]byte
	tries   int
	saves   int
}

// NewCheckpoints returns Checkpoints holding state, as a resumed attempt finds it.
func NewCheckpoints(state []byte) *Checkpoints { return &Checkpoints{state: slices.Clone(state)} }

// Load returns the last saved state and the history.
func (c *Checkpoints) Load(context.Context) ([]byte, [][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.state), slices.Clone(c.history), nil
}

// Save replaces the state and appends history, unless the lease is lost (see LoseAt).
func (c *Checkpoints) Save(_ context.Context, state []byte, history ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tries++
	if c.LoseAt > 0 && c.tries >= c.LoseAt {
		return workitems.ErrLeaseLost
	}
	c.saves++
	c.state = slices.Clone(state)
	c.history = append(c.history, history...)
	return nil
}

// State returns the last saved state.
func (c *Checkpoints) State() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.state)
}

// History returns every history entry saved, in order.
func (c *Checkpoints) History() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.history)
}

// Saves is how many saves were accepted.
func (c *Checkpoints) Saves() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves
}

// Events records the events an inner loop emits. The zero value is ready.
type Events struct {
	mu   sync.Mutex
	list []workitems.Event
}

// Emit records ev.
func (e *Events) Emit(_ context.Context, ev workitems.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
}

// All returns the events recorded, in order.
func (e *Events) All() []workitems.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// Kinds returns each recorded event's data "kind", in order.
func (e *Events) Kinds() []string {
	var out []string
	for _, ev := range e.All() {
		out = append(out, ev.Data["kind"])
	}
	return out
}
