package scheduler

import (
	"context"
	"fmt"
	"slices"

	"outerloop/workitems"
)

// Steer queues a person's input for an item's agent loop, refusing it (ErrNotSteerable, with
// the reason) unless an agent loop of the item is running or queued: a closed item, or one
// whose loop is a script or an external agent, never reads it.
func (q *Queue) Steer(ctx context.Context, id, text, actor string) error {
	return q.store.SteerIf(ctx, id, text, actor, func(it *workitems.Item) error {
		if !slices.Contains(workitems.SteerableStates(), it.State) {
			return fmt.Errorf("scheduler: steer %s: the item is %s: %w", id, it.State, workitems.ErrNotSteerable)
		}
		kind := ""
		if a := it.Current(); a != nil {
			kind = a.Condition.Strategy.Loop
		}
		if kind == "" {
			t, ok := q.cfg.Load().Template(it.Template)
			if !ok {
				return fmt.Errorf("scheduler: steer %s: template %q is not configured: %w", id, it.Template, workitems.ErrNotSteerable)
			}
			kind = t.Loop.Kind
		}
		if kind != "agent" {
			return fmt.Errorf("scheduler: steer %s: its loop is %q, which reads no steer input (only the agent loop does): %w",
				id, kind, workitems.ErrNotSteerable)
		}
		return nil
	})
}
