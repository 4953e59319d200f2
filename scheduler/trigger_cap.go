package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// ErrTriggerCapped is returned by SubmitTriggered when the template's triggers made
// max_per_hour items in the current clock hour already.
var ErrTriggerCapped = errors.New("max_per_hour reached")

// triggeredTTL keeps an hour's counter past its hour, long enough for no clock skew to matter.
const triggeredTTL = 2 * time.Hour

// reserveTriggered takes one of the hour's max_per_hour slots when one is free.
//
//	KEYS[1] the hour's counter; ARGV[1] max_per_hour, ARGV[2] TTL in seconds
//
// Returns 1 when a slot was taken, 0 when the hour is full.
var reserveTriggered = redis.NewScript(`
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`)

// SubmitTriggered is Submit for a trigger's firing (a forge event, an alert, an API call): the
// one place a template's max_per_hour applies. A request whose deterministic id names an item
// that exists returns workitems.ErrExists without touching the cap, so repeats never use it up.
// Otherwise a slot of the template's hour is reserved atomically (Lua) before Submit and given
// back when Submit makes no item, so the counter counts only items made; when the hour is
// full the firing is logged and ErrTriggerCapped returned. A reservation lives only as long
// as its Submit: a concurrent firing may see the hour full for that moment.
func (q *Queue) SubmitTriggered(ctx context.Context, r Request, source workitems.TriggerSource) (*workitems.Item, error) {
	t, ok := q.Config().Template(r.Template)
	if !ok {
		return nil, fmt.Errorf("scheduler: template %q: %w", r.Template, ErrUnknownTemplate)
	}
	if t.MaxPerHour <= 0 {
		return q.Submit(ctx, r)
	}
	if r.ID != "" {
		if _, err := q.store.Get(ctx, r.ID); err == nil {
			return nil, fmt.Errorf("scheduler: trigger of %s: item %s: %w", r.Template, r.ID, workitems.ErrExists)
		} else if !errors.Is(err, workitems.ErrNotFound) {
			return nil, err
		}
	}
	hour := q.clock.Now().UTC().Truncate(time.Hour)
	key := q.keys().triggered(t.Name, hour)
	got, err := reserveTriggered.Run(ctx, q.store.Redis(), []string{key}, t.MaxPerHour, int(triggeredTTL/time.Second)).Int()
	if err != nil {
		return nil, fmt.Errorf("scheduler: trigger of %s: max_per_hour: %w", r.Template, err)
	}
	if got == 0 {
		q.log.Warn("trigger: max_per_hour reached; firing skipped", "template", t.Name, "source", source,
			"item", r.ID, "max_per_hour", t.MaxPerHour, "hour", hour.Format(time.RFC3339))
		return nil, fmt.Errorf("scheduler: template %q: %d items this hour from its triggers: %w", t.Name, t.MaxPerHour, ErrTriggerCapped)
	}
	it, err := q.Submit(ctx, r)
	if err != nil {
		// No item: give the slot back (with a fresh context: the caller's may be gone).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if derr := q.store.Redis().Decr(rctx, key).Err(); derr != nil {
			q.log.Warn("trigger: giving back a max_per_hour slot failed; the hour counts one item too many",
				"template", t.Name, "err", derr)
		}
		cancel()
		return nil, err
	}
	return it, nil
}
