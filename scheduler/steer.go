package scheduler

import (
	"context"
	"fmt"
	"slices"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// Steer queues a person's input for an item's loop, refusing it (ErrNotSteerable, with the
// reason) unless a loop of the item that reads steer input (its kind's traits: Steerable) is
// running or queued: a closed item, or one whose loop reads no input (a script, an external
// agent), never would.
func (q *Queue) Steer(ctx context.Context, id, text, actor string) error {
	return q.store.SteerIf(ctx, id, text, actor, func(it *workitems.Item) error {
		if !slices.Contains(itemstore.SteerableStates(), it.State) {
			return fmt.Errorf("scheduler: steer %s: the item is %s: %w", id, it.State, itemstore.ErrNotSteerable)
		}
		var kind workitems.LoopKind
		if a := it.Current(); a != nil {
			kind = a.Condition.Strategy.Loop
		}
		if kind == "" {
			t, ok := q.cfg.Load().Template(it.Template)
			if !ok {
				return fmt.Errorf("scheduler: steer %s: template %q is not configured: %w", id, it.Template, itemstore.ErrNotSteerable)
			}
			kind = t.Loop.Kind
		}
		if traits, ok := q.loops.LoopTraits(kind); !ok || !traits.Steerable {
			return fmt.Errorf("scheduler: steer %s: its loop is %q, which reads no steer input: %w",
				id, kind, itemstore.ErrNotSteerable)
		}
		return nil
	})
}
