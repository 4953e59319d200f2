package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// State is where a delivery is (see the package doc's diagram).
type State string

// The delivery states.
const (
	StatePending   State = "pending"   // waiting for its due time
	StateInflight  State = "inflight"  // claimed by a dispatcher
	StateDelivered State = "delivered" // the sink answered 2xx
	StateDead      State = "dead"      // every attempt failed; kept until re-queued by hand
)

// AllStates lists every delivery state.
func AllStates() []State { return []State{StatePending, StateInflight, StateDelivered, StateDead} }

// DeliveredTTL is how long a delivered delivery is kept (for `outerloop notify list`).
const DeliveredTTL = 7 * 24 * time.Hour

// Delivery is one notification to one sink.
type Delivery struct {
	ID           string    `json:"id"` // event id + "/" + sink
	Sink         string    `json:"sink"`
	State        State     `json:"state"`
	Attempts     int       `json:"attempts"`
	LastError    string    `json:"last_error,omitempty"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
	Due          time.Time `json:"due,omitzero"` // pending: next attempt; inflight: claim expiry
	Notification `json:"notification"`

	claim string // the claim token of the dispatcher holding it
}

// Outbox is the Redis outbox of notifications.
type Outbox struct {
	rdb   redis.UniversalClient
	k     keys
	cfg   atomic.Pointer[config.Config]
	clock workitems.Clock
	log   *slog.Logger
}

// NewOutbox returns the outbox under the store's prefix; cfg says which sinks each event goes to.
func NewOutbox(rdb redis.UniversalClient, prefix string, cfg *config.Config, clock workitems.Clock, log *slog.Logger) *Outbox {
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	if log == nil {
		log = slog.Default()
	}
	o := &Outbox{rdb: rdb, k: keys{p: prefix}, clock: clock, log: log}
	o.cfg.Store(cfg)
	return o
}

// SetConfig replaces the config (on a reload): later events go to the new sinks.
func (o *Outbox) SetConfig(cfg *config.Config) { o.cfg.Store(cfg) }

// Config returns the config in use.
func (o *Outbox) Config() *config.Config { return o.cfg.Load() }

// enqueueScript adds a delivery unless one with its id exists (a notification is queued once
// however often its cause is seen).
//
// KEYS[1] delivery hash, KEYS[2] due zset
// ARGV[1] id, ARGV[2] now (unix ms), ARGV[3] sink, ARGV[4] notification JSON
const enqueueScript = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'sink', ARGV[3], 'body', ARGV[4], 'state', 'pending', 'attempts', 0,
  'created', ARGV[2], 'updated', ARGV[2], 'due', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
`

func deliveryID(event, sink string) string { return event + "/" + sink }

// targets returns the sinks an event of the named template goes to.
func (o *Outbox) targets(template string, ev workitems.NotifyEvent) (*config.Template, []string) {
	cfg := o.cfg.Load()
	if cfg == nil || len(cfg.Notify.Sinks) == 0 {
		return nil, nil
	}
	t, _ := cfg.Template(template)
	return t, cfg.Notify.Targets(t, ev)
}

// queue puts one delivery per sink on p (a pipeline or a MULTI).
func (o *Outbox) queue(ctx context.Context, p redis.Cmdable, n Notification, sinks []string) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("notify: %s: %w", n.ID, err)
	}
	now := strconv.FormatInt(o.clock.Now().UnixMilli(), 10)
	for _, s := range sinks {
		id := deliveryID(n.ID, s)
		// EVAL, not EVALSHA: inside a MULTI a missing script cannot be loaded and retried.
		p.Eval(ctx, enqueueScript, []string{o.k.delivery(id), o.k.due()}, id, now, s, body)
	}
	return nil
}

// TransitionHook returns the store hook that queues an escalation's or failure's
// notifications in the MULTI of the transition itself.
func (o *Outbox) TransitionHook() itemstore.TransitionHook {
	return func(ctx context.Context, p redis.Pipeliner, it *workitems.Item, from workitems.State, events []workitems.Event) {
		if it.State != workitems.StateEscalated && it.State != workitems.StateFailed {
			return
		}
		// One snapshot of the config for the whole decision (a reload may land in between), and
		// nothing built for a deployment without sinks: this runs in every such transition.
		cfg := o.cfg.Load()
		if cfg == nil || len(cfg.Notify.Sinks) == 0 {
			return
		}
		t, _ := cfg.Template(it.Template)
		n, ok := forTransition(it, from, events, cfg.Notify.BaseURL, t)
		if !ok {
			return
		}
		sinks := cfg.Notify.Targets(t, n.Event)
		if len(sinks) == 0 {
			return
		}
		if err := o.queue(ctx, p, n, sinks); err != nil {
			o.log.Error("notification not queued", "item", it.ID, "event", n.Event, "err", err)
		}
	}
}

// LimitHook returns the store hook that queues a daily cap's notification when the store
// refused an item for it. It runs after the refusal (which wrote nothing): the guarantee is
// "queued right after, once per template and UTC day", and a process dying between the two
// loses it until the next refused item of that day queues it.
func (o *Outbox) LimitHook() itemstore.LimitHook {
	return func(ctx context.Context, template string, limit error) {
		if !errors.Is(limit, itemstore.ErrDailyCap) {
			return
		}
		t, sinks := o.targets(template, workitems.NotifyDailyCap)
		if len(sinks) == 0 {
			return
		}
		n := forDailyCap(template, t, o.clock.Now())
		if _, err := o.Enqueue(ctx, n, sinks); err != nil {
			o.log.Error("daily cap notification not queued", "template", template, "err", err)
		}
	}
}

// FleetPaused queues the notification of a fleet template's breaker pausing it.
func (o *Outbox) FleetPaused(ctx context.Context, template, reason string) error {
	t, sinks := o.targets(template, workitems.NotifyFleetPaused)
	if len(sinks) == 0 {
		return nil
	}
	_, err := o.Enqueue(ctx, forFleetPaused(template, t, reason, o.clock.Now()), sinks)
	return err
}

// Enqueue queues n to each of sinks and returns how many deliveries are new.
func (o *Outbox) Enqueue(ctx context.Context, n Notification, sinks []string) (int, error) {
	cmds, err := o.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { return o.queue(ctx, p, n, sinks) })
	if err != nil {
		return 0, fmt.Errorf("notify: enqueue %s: %w", n.ID, err)
	}
	added := 0
	for _, c := range cmds {
		if v, _ := c.(*redis.Cmd).Int(); v == 1 {
			added++
		}
	}
	return added, nil
}

// claimScript claims up to a batch of deliveries for one dispatcher: first those whose claim
// expired (their dispatcher died or stalled: that counts as a failed attempt, and the last
// attempt makes them dead), then those due.
//
// KEYS[1] due, KEYS[2] inflight, KEYS[3] dead
// ARGV[1] now (unix ms), ARGV[2] claim expiry (unix ms), ARGV[3] batch, ARGV[4] claim token,
// ARGV[5] delivery key prefix, ARGV[6] max attempts
// The delivery hashes are built from ARGV[5] (the store targets one Redis primary).
// Returns {id, sink, body, attempts, created}... per claimed delivery.
var claimScript = redis.NewScript(`
local now, limit, max = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[6])
local out = {}
local function take(id, k)
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  redis.call('HSET', k, 'state', 'inflight', 'claim', ARGV[4], 'updated', ARGV[1], 'due', ARGV[2])
  local f = redis.call('HMGET', k, 'sink', 'body', 'attempts', 'created')
  table.insert(out, {id, f[1], f[2], f[3], f[4]})
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)) do
  local k = ARGV[5] .. id
  if redis.call('EXISTS', k) == 0 then
    redis.call('ZREM', KEYS[2], id)
  else
    local n = redis.call('HINCRBY', k, 'attempts', 1)
    redis.call('HSET', k, 'last_error', 'the dispatcher that claimed it did not answer within the visibility timeout')
    if n >= max then
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZADD', KEYS[3], now, id)
      redis.call('HSET', k, 'state', 'dead', 'updated', ARGV[1], 'claim', '')
    else
      take(id, k)
    end
  end
end
local room = limit - #out
if room > 0 then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, room)) do
    redis.call('ZREM', KEYS[1], id)
    local k = ARGV[5] .. id
    if redis.call('EXISTS', k) == 1 then take(id, k) end
  end
end
return out
`)

// Claim takes up to batch deliveries due at now for the holder of token until expires.
func (o *Outbox) Claim(ctx context.Context, now, expires time.Time, batch int, token string, maxAttempts int) ([]Delivery, error) {
	res, err := claimScript.Run(ctx, o.rdb, []string{o.k.due(), o.k.inflight(), o.k.dead()},
		now.UnixMilli(), expires.UnixMilli(), batch, token, o.k.deliveryPrefix(), maxAttempts).Slice()
	if err != nil {
		return nil, fmt.Errorf("notify: claim: %w", err)
	}
	out := make([]Delivery, 0, len(res))
	for _, r := range res {
		f, _ := r.([]any)
		if len(f) < 5 {
			continue
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		d := Delivery{ID: str(0), Sink: str(1), State: StateInflight, Due: expires, claim: token}
		d.Attempts, _ = strconv.Atoi(str(3))
		d.Created = fromMillis(str(4))
		if err := json.Unmarshal([]byte(str(2)), &d.Notification); err != nil {
			// Not ours to send; fail it so that it ends dead and visible instead of looping.
			if _, ferr := o.Fail(ctx, d, now, now, "corrupt notification: "+err.Error(), 1); ferr != nil {
				o.log.Warn("corrupt notification not failed; its claim expires and it is tried again", "id", d.ID, "err", ferr)
			}
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// ackScript marks a delivery delivered (from any claim: a stale holder's success is a
// success too) and keeps it DeliveredTTL.
//
// KEYS[1] delivery, KEYS[2] inflight, KEYS[3] due, KEYS[4] dead, KEYS[5] delivered
// ARGV[1] id, ARGV[2] now (unix ms), ARGV[3] ttl (ms)
var ackScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'state') == 'delivered' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'state', 'delivered', 'updated', ARGV[2], 'last_error', '', 'claim', '', 'due', '')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
return 1
`)

// Ack records d as delivered.
func (o *Outbox) Ack(ctx context.Context, d Delivery, now time.Time) error {
	err := ackScript.Run(ctx, o.rdb, []string{o.k.delivery(d.ID), o.k.inflight(), o.k.due(), o.k.dead(), o.k.delivered()},
		d.ID, now.UnixMilli(), DeliveredTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("notify: ack %s: %w", d.ID, err)
	}
	return nil
}

// failScript records a failed attempt of the claim's holder: pending again at next, or dead on
// the last attempt. A holder whose claim was taken over changes nothing (0).
//
// KEYS[1] delivery, KEYS[2] inflight, KEYS[3] due, KEYS[4] dead
// ARGV[1] id, ARGV[2] token, ARGV[3] now (unix ms), ARGV[4] next (unix ms), ARGV[5] error,
// ARGV[6] max attempts
// Returns 0 (stale), 1 (pending), 2 (dead).
var failScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[2] or redis.call('HGET', KEYS[1], 'state') ~= 'inflight' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
local n = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'last_error', ARGV[5], 'updated', ARGV[3], 'claim', '')
if n >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'state', 'dead', 'due', '')
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'due', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
`)

// Fail records a failed attempt of d: it is pending again at next, or dead when this was
// attempt maxAttempts. It returns the state d is in now ("" when the claim was lost).
func (o *Outbox) Fail(ctx context.Context, d Delivery, now, next time.Time, reason string, maxAttempts int) (State, error) {
	v, err := failScript.Run(ctx, o.rdb, []string{o.k.delivery(d.ID), o.k.inflight(), o.k.due(), o.k.dead()},
		d.ID, d.claim, now.UnixMilli(), next.UnixMilli(), reason, maxAttempts).Int()
	if err != nil {
		return "", fmt.Errorf("notify: fail %s: %w", d.ID, err)
	}
	switch v {
	case 1:
		return StatePending, nil
	case 2:
		return StateDead, nil
	}
	return "", nil
}

// releaseScript gives a claim back without counting an attempt (a dispatcher shutting down
// mid-request): the delivery is due again at once.
//
// KEYS[1] delivery, KEYS[2] inflight, KEYS[3] due
// ARGV[1] id, ARGV[2] token, ARGV[3] now (unix ms)
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[2] or redis.call('HGET', KEYS[1], 'state') ~= 'inflight' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'claim', '', 'updated', ARGV[3], 'due', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return 1
`)

// Release gives d back to the outbox, due now.
func (o *Outbox) Release(ctx context.Context, d Delivery, now time.Time) error {
	err := releaseScript.Run(ctx, o.rdb, []string{o.k.delivery(d.ID), o.k.inflight(), o.k.due()}, d.ID, d.claim, now.UnixMilli()).Err()
	if err != nil {
		return fmt.Errorf("notify: release %s: %w", d.ID, err)
	}
	return nil
}

// requeueScript makes a dead delivery pending again with a fresh count of attempts.
//
// KEYS[1] delivery, KEYS[2] dead, KEYS[3] due
// ARGV[1] id, ARGV[2] now (unix ms)
var requeueScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'state') ~= 'dead' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', 0, 'updated', ARGV[2], 'due', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return 1
`)

// ErrNotDead is returned by Requeue for a delivery that is not dead.
var ErrNotDead = errors.New("delivery is not dead")

// Requeue makes a dead delivery pending again (a person fixed the receiver).
func (o *Outbox) Requeue(ctx context.Context, id string) error {
	v, err := requeueScript.Run(ctx, o.rdb, []string{o.k.delivery(id), o.k.dead(), o.k.due()}, id, o.clock.Now().UnixMilli()).Int()
	if err != nil {
		return fmt.Errorf("notify: requeue %s: %w", id, err)
	}
	if v == 0 {
		return fmt.Errorf("notify: requeue %s: %w", id, ErrNotDead)
	}
	return nil
}

// NextDue returns the earliest time a delivery becomes claimable (a pending one's due time or an
// inflight one's claim expiry); false when there is none.
func (o *Outbox) NextDue(ctx context.Context) (time.Time, bool, error) {
	var due, inflight *redis.ZSliceCmd
	_, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		due = p.ZRangeWithScores(ctx, o.k.due(), 0, 0)
		inflight = p.ZRangeWithScores(ctx, o.k.inflight(), 0, 0)
		return nil
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("notify: next due: %w", err)
	}
	var best time.Time
	for _, c := range []*redis.ZSliceCmd{due, inflight} {
		if z := c.Val(); len(z) > 0 {
			t := time.UnixMilli(int64(z[0].Score))
			if best.IsZero() || t.Before(best) {
				best = t
			}
		}
	}
	return best, !best.IsZero(), nil
}

// List returns up to limit deliveries in state s, newest first.
func (o *Outbox) List(ctx context.Context, s State, limit int64) ([]Delivery, error) {
	if limit <= 0 {
		limit = 100
	}
	ids, err := o.rdb.ZRevRange(ctx, o.k.byState(s), 0, limit-1).Result()
	if err != nil {
		return nil, fmt.Errorf("notify: list %s: %w", s, err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, o.k.delivery(id))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("notify: list %s: %w", s, err)
	}
	out := make([]Delivery, 0, len(ids))
	for i, id := range ids {
		f := cmds[i].Val()
		if len(f) == 0 {
			continue // expired between the two reads
		}
		d := Delivery{ID: id, Sink: f["sink"], State: State(f["state"]), LastError: f["last_error"],
			Created: fromMillis(f["created"]), Updated: fromMillis(f["updated"]), Due: fromMillis(f["due"]), claim: f["claim"]}
		d.Attempts, _ = strconv.Atoi(f["attempts"])
		_ = json.Unmarshal([]byte(f["body"]), &d.Notification)
		out = append(out, d)
	}
	return out, nil
}

// Counts returns how many deliveries are in each state (delivered: of the last DeliveredTTL).
func (o *Outbox) Counts(ctx context.Context) (map[State]int64, error) {
	cmds := map[State]*redis.IntCmd{}
	if _, err := o.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range AllStates() {
			cmds[s] = p.ZCard(ctx, o.k.byState(s))
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("notify: counts: %w", err)
	}
	out := map[State]int64{}
	for s, c := range cmds {
		out[s] = c.Val()
	}
	return out, nil
}

func fromMillis(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
