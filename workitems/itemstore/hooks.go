package itemstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// TransitionHook is called inside the MULTI of every update that changes an item's state,
// after the item's own writes are queued: what it queues on p commits atomically with the
// transition (or not at all). It must not read Redis (p is a transaction pipeline) and must not
// fail; it sees the item as written and the events the mutation returned (a failure's reason is
// one). Another package keeps its keys and decides what to write
// (package notify's outbox enqueues a notification for an escalation or failure this way).
// Redis does not roll a MULTI back: a queued command that fails at EXEC (a script error, a key
// of the wrong type) still lets the others apply, and the update then reports that error though
// the transition committed — so what a hook queues must not be able to fail.
type TransitionHook func(ctx context.Context, p redis.Pipeliner, it *workitems.Item, from workitems.State, events []workitems.Event)

// LimitHook is called after Create refused an item for a limit (ErrDailyCap); it runs outside
// any transaction, since a refusal writes nothing.
type LimitHook func(ctx context.Context, template string, limit error)

// WithTransitionHook adds a TransitionHook.
func WithTransitionHook(h TransitionHook) StoreOption {
	return func(s *Store) { s.hooks.transition = append(s.hooks.transition, h) }
}

// WithLimitHook adds a LimitHook.
func WithLimitHook(h LimitHook) StoreOption {
	return func(s *Store) { s.hooks.limit = append(s.hooks.limit, h) }
}

type hooks struct {
	transition []TransitionHook
	limit      []LimitHook
}

func (h hooks) onTransition(ctx context.Context, p redis.Pipeliner, it *workitems.Item, from workitems.State, events []workitems.Event) {
	for _, f := range h.transition {
		f(ctx, p, it, from, events)
	}
}

func (h hooks) onLimit(ctx context.Context, template string, limit error) {
	for _, f := range h.limit {
		f(ctx, template, limit)
	}
}
