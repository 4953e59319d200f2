package scheduler

import (
	"context"
	"errors"
	"fmt"

	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// applyForce lifts max_open for a person's request with Force (cron ticks are never forced) and
// marks the item; it reports whether the item is forced past a max_open.
func (q *Queue) applyForce(r *Request, t *config.Template, it *workitems.Item, lim *itemstore.CreateLimits) bool {
	if !r.Force || r.Origin.Kind == workitems.OriginCron || t.MaxOpen == 0 {
		return false
	}
	lim.MaxOpen = 0
	it.Origin.Forced = true
	return true
}

// recordForce writes who created an item past max_open into its log.
func (q *Queue) recordForce(ctx context.Context, it *workitems.Item, t *config.Template) {
	e := workitems.Event{Item: it.ID, Type: workitems.EventWarning, Actor: it.Origin.Actor,
		Message: fmt.Sprintf("created with --force: template %s's max_open %d not applied", t.Name, t.MaxOpen),
		Data:    map[string]string{"forced": "max_open", "max_open": fmt.Sprint(t.MaxOpen)}}
	if err := q.store.Emit(ctx, e); err != nil {
		q.log.Warn("force not recorded in the item's log", "item", it.ID, "err", err)
	}
}

// maxOpenHint tells a person whose request max_open refused how to get past it.
func maxOpenHint(err error, r Request, t *config.Template) error {
	if !errors.Is(err, itemstore.ErrMaxOpen) || r.Origin.Kind == workitems.OriginCron {
		return err
	}
	return fmt.Errorf("scheduler: template %s allows max_open %d open items: %w; wait for one to end, or enqueue with --force (API: \"force\": true)",
		t.Name, t.MaxOpen, err)
}
