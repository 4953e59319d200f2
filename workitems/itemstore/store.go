package itemstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// Store keeps items, their indexes and event logs, attempt leases and checkpoints in Redis.
// Every change that touches more than one key is one MULTI under WATCH (items) or one Lua
// script (leases, checkpoints), so readers never see half a transition.
type Store struct {
	rdb       redis.UniversalClient
	k         keys
	clock     workitems.Clock
	maxEvents int64
	hooks     hooks // hooks.go
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithClock injects the clock (tests move time instead of sleeping).
func WithClock(c workitems.Clock) StoreOption { return func(s *Store) { s.clock = c } }

// NewStore returns a store whose keys all start with prefix (e.g. "ol:").
func NewStore(rdb redis.UniversalClient, prefix string, opts ...StoreOption) *Store {
	s := &Store{rdb: rdb, k: keys{p: prefix}, clock: workitems.SystemClock{}, maxEvents: 2000}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Redis returns the client (for components that share the connection).
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Prefix returns the key prefix; components that keep their own keys beside the store's (the
// scheduler's tick marks) build them under it.
func (s *Store) Prefix() string { return s.k.p }

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Clock returns the store's clock, for components built beside the store that must read the same time.
func (s *Store) Clock() workitems.Clock { return s.clock }

// Fence identifies the lease epoch a writer holds on an attempt; writes made under a fence
// fail with ErrLeaseLost once a newer epoch exists.
type Fence struct {
	Item    string
	Attempt int
	Epoch   int64
	Holder  string
}

// CreateLimits are checked atomically with item creation.
type CreateLimits struct {
	MaxOpen      int     // 0: no limit
	DailyCostCap float64 // 0: no cap; compared with today's (UTC) spend of the template
}

// ErrMaxOpen and ErrDailyCap explain why Create skipped an item.
var (
	ErrMaxOpen  = errors.New("template has max_open items open")
	ErrDailyCap = errors.New("template reached its daily cost cap")
)

// Create stores a new item in state queued with its first attempt, unless an item with that id
// exists (ErrExists) or a limit says no (ErrMaxOpen, ErrDailyCap). Exactly one of any number
// of concurrent callers with the same id succeeds.
func (s *Store) Create(ctx context.Context, it *workitems.Item, lim CreateLimits) error {
	if it.ID == "" || it.Template == "" {
		return fmt.Errorf("workitems: create: item needs an id and a template")
	}
	now := s.Now().UTC()
	it.State = workitems.StateQueued
	it.CreatedAt, it.UpdatedAt = now, now
	if it.Attempt == 0 {
		it.Attempt = 1
	}
	if len(it.Attempts) == 0 {
		it.Attempts = []workitems.Attempt{{N: 1, Condition: workitems.Condition{}, State: workitems.AttemptQueued}}
	}
	it.Version = 1
	body, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("workitems: create %s: %w", it.ID, err)
	}
	costKey := s.k.dailyCost(it.Template, now.Format("2006-01-02"))
	watch := []string{s.k.item(it.ID), s.k.open(it.Template), costKey}
	err = s.retryWatch(ctx, func(tx *redis.Tx) error {
		if err := s.checkNew(ctx, tx, it, lim, costKey); err != nil {
			return fmt.Errorf("workitems: create %s: %w", it.ID, err)
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			s.createWrites(ctx, p, it, body, now)
			return nil
		})
		return err
	}, watch...)
	if errors.Is(err, ErrDailyCap) {
		s.hooks.onLimit(ctx, it.Template, ErrDailyCap)
	}
	return err
}

// checkNew is the check before a new item is stored (Create, CreateRerun), under WATCH of its
// record, its template's open set and costKey: the id is free (ErrExists), the template has
// fewer than lim.MaxOpen open (ErrMaxOpen) and today's cost is under lim.DailyCostCap
// (ErrDailyCap).
func (s *Store) checkNew(ctx context.Context, tx *redis.Tx, it *workitems.Item, lim CreateLimits, costKey string) error {
	n, err := tx.Exists(ctx, s.k.item(it.ID)).Result()
	if err != nil {
		return err
	}
	if n > 0 {
		return workitems.ErrExists
	}
	if lim.MaxOpen > 0 {
		open, err := tx.SCard(ctx, s.k.open(it.Template)).Result()
		if err != nil {
			return err
		}
		if open >= int64(lim.MaxOpen) {
			return fmt.Errorf("%w (%d open)", ErrMaxOpen, open)
		}
	}
	if lim.DailyCostCap > 0 {
		spent, err := tx.Get(ctx, costKey).Float64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if spent >= lim.DailyCostCap {
			return fmt.Errorf("%w ($%.2f of $%.2f)", ErrDailyCap, spent, lim.DailyCostCap)
		}
	}
	return nil
}

// createWrites queues the writes that store a new item (record, indexes, created event); Create
// and CreateRerun run them inside their MULTI.
func (s *Store) createWrites(ctx context.Context, p redis.Pipeliner, it *workitems.Item, body []byte, now time.Time) {
	p.Set(ctx, s.k.item(it.ID), body, 0)
	p.ZAdd(ctx, s.k.items(), redis.Z{Score: float64(now.UnixMilli()), Member: it.ID})
	p.ZAdd(ctx, s.k.byTemplate(it.Template), redis.Z{Score: float64(now.UnixMilli()), Member: it.ID})
	s.indexState(ctx, p, it, "", workitems.StateQueued)
	s.indexSpend(ctx, p, it)
	s.addEvent(ctx, p, workitems.Event{Item: it.ID, Type: workitems.EventCreated, Attempt: 1, To: workitems.StateQueued,
		Actor: it.Origin.Actor, Message: "created by " + string(it.Origin.Kind), At: now})
}

// Get returns the item with that id.
func (s *Store) Get(ctx context.Context, id string) (*workitems.Item, error) {
	b, err := s.rdb.Get(ctx, s.k.item(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workitems: item %q: %w", id, workitems.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("workitems: get %s: %w", id, err)
	}
	var it workitems.Item
	if err := json.Unmarshal(b, &it); err != nil {
		return nil, fmt.Errorf("workitems: item %s: corrupt record: %w", id, err)
	}
	return &it, nil
}

// Mutation changes an item in memory and returns the events that describe the change (state
// events are added by Update itself).
type Mutation func(it *workitems.Item) ([]workitems.Event, error)

// Update applies m to the item atomically: read, change, write back with its indexes and
// events in one MULTI, retried when another writer got in between. With a non-nil fence the
// write happens only while the fence's epoch is still the newest (else ErrLeaseLost).
func (s *Store) Update(ctx context.Context, id string, fence *Fence, m Mutation) (*workitems.Item, error) {
	return s.updateTx(ctx, id, fence, m, nil)
}

// pipeliner is what extra writes of a transaction get.
type pipeliner = redis.Pipeliner

// updateTx is Update with extra writes queued in the same MULTI.
func (s *Store) updateTx(ctx context.Context, id string, fence *Fence, m Mutation, extra func(*workitems.Item, pipeliner)) (*workitems.Item, error) {
	return s.updateWatched(ctx, id, fence, nil, func(_ *redis.Tx, it *workitems.Item) ([]workitems.Event, error) { return m(it) }, extra)
}

// txMutation is a Mutation that may also read keys watched by the transaction.
type txMutation func(tx *redis.Tx, it *workitems.Item) ([]workitems.Event, error)

// updateWatched is updateTx that also WATCHes watchMore, which m may read through tx: a change
// to any of them before EXEC retries the whole update.
func (s *Store) updateWatched(ctx context.Context, id string, fence *Fence, watchMore []string, m txMutation,
	extra func(*workitems.Item, pipeliner)) (*workitems.Item, error) {
	watch := []string{s.k.item(id)}
	if fence != nil {
		watch = append(watch, s.k.epoch(fence.Item, fence.Attempt))
	}
	watch = append(watch, watchMore...)
	var out *workitems.Item
	err := s.retryWatch(ctx, func(tx *redis.Tx) error {
		if fence != nil {
			if err := s.checkFence(ctx, tx, fence); err != nil {
				return err
			}
		}
		b, err := tx.Get(ctx, s.k.item(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("workitems: item %q: %w", id, workitems.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var it workitems.Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("workitems: item %s: corrupt record: %w", id, err)
		}
		from, spentBefore, waitBefore := it.State, it.Spend, it.Wait
		events, err := m(tx, &it)
		if err != nil {
			return err
		}
		now := s.Now().UTC()
		it.UpdatedAt = now
		it.Version++
		body, err := json.Marshal(&it)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, s.k.item(id), body, 0)
			if it.Spend != spentBefore {
				s.indexSpend(ctx, p, &it)
			}
			if it.State != from {
				s.indexState(ctx, p, &it, from, it.State)
				s.addEvent(ctx, p, workitems.Event{Item: id, Type: workitems.EventState, Attempt: it.Attempt, From: from, To: it.State, At: now})
				s.hooks.onTransition(ctx, p, &it, from, events)
			}
			s.indexWait(ctx, p, &it, waitBefore)
			if extra != nil {
				extra(&it, p)
			}
			for _, e := range events {
				e.Item = id
				if e.At.IsZero() {
					e.At = now
				}
				s.addEvent(ctx, p, e)
			}
			return nil
		})
		out = &it
		return err
	}, watch...)
	return out, err
}

func (s *Store) checkFence(ctx context.Context, tx *redis.Tx, f *Fence) error {
	cur, err := tx.Get(ctx, s.k.epoch(f.Item, f.Attempt)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if cur != f.Epoch {
		return fmt.Errorf("workitems: item %s attempt %d: epoch %d, newest %d: %w", f.Item, f.Attempt, f.Epoch, cur, workitems.ErrLeaseLost)
	}
	return nil
}

// retryWatch runs fn under WATCH, retrying when a watched key changed before EXEC.
func (s *Store) retryWatch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error {
	for range 50 {
		err := s.rdb.Watch(ctx, fn, keys...)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return fmt.Errorf("workitems: too much contention on %v", keys)
}

func (s *Store) addEvent(ctx context.Context, p redis.Pipeliner, e workitems.Event) {
	b, _ := json.Marshal(e) // Event has only marshalable fields
	p.XAdd(ctx, &redis.XAddArgs{Stream: s.k.events(e.Item), MaxLen: s.maxEvents, Approx: true, Values: []any{"e", b}})
	p.XAdd(ctx, &redis.XAddArgs{Stream: s.k.allEvents(), MaxLen: 10 * s.maxEvents, Approx: true, Values: []any{"e", b}})
}

// Emit appends one event to an item's log (for step events that change no item field).
func (s *Store) Emit(ctx context.Context, e workitems.Event) error {
	if e.At.IsZero() {
		e.At = s.Now().UTC()
	}
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		s.addEvent(ctx, p, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("workitems: event for %s: %w", e.Item, err)
	}
	return nil
}

// Events returns an item's events after the stream id `after` ("" or "0" from the start), up
// to count. With block > 0 it waits that long for new ones.
func (s *Store) Events(ctx context.Context, id, after string, count int64, block time.Duration) ([]workitems.Event, error) {
	return s.readStream(ctx, s.k.events(id), after, count, block)
}

// AllEvents reads the deployment-wide event stream, like Events.
func (s *Store) AllEvents(ctx context.Context, after string, count int64, block time.Duration) ([]workitems.Event, error) {
	return s.readStream(ctx, s.k.allEvents(), after, count, block)
}

func (s *Store) readStream(ctx context.Context, stream, after string, count int64, block time.Duration) ([]workitems.Event, error) {
	if after == "" {
		after = "0"
	}
	var msgs []redis.XMessage
	if block > 0 {
		res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, after}, Count: count, Block: block}).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("workitems: events %s: %w", stream, err)
		}
		if len(res) > 0 {
			msgs = res[0].Messages
		}
	} else {
		start := "(" + after
		if after == "0" {
			start = "-"
		}
		res, err := s.rdb.XRangeN(ctx, stream, start, "+", count).Result()
		if err != nil {
			return nil, fmt.Errorf("workitems: events %s: %w", stream, err)
		}
		msgs = res
	}
	out := make([]workitems.Event, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		var e workitems.Event
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			continue // an entry we did not write; never fatal for a reader
		}
		e.ID = m.ID
		out = append(out, e)
	}
	return out, nil
}

func (s *Store) addDailyCost(ctx context.Context, p redis.Pipeliner, template string, usd float64) {
	if usd <= 0 {
		return
	}
	key := s.k.dailyCost(template, s.Now().UTC().Format("2006-01-02"))
	p.IncrByFloat(ctx, key, usd)
	p.Expire(ctx, key, 72*time.Hour)
}

// DailyCost returns a template's spend on the UTC day of at.
func (s *Store) DailyCost(ctx context.Context, template string, at time.Time) (float64, error) {
	v, err := s.rdb.Get(ctx, s.k.dailyCost(template, at.UTC().Format("2006-01-02"))).Float64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// OpenCount returns how many items of a template are open.
func (s *Store) OpenCount(ctx context.Context, template string) (int64, error) {
	return s.rdb.SCard(ctx, s.k.open(template)).Result()
}

// Stats aggregates counts for metrics and the console, in two round trips (it runs on every
// scrape): one pipeline for the counters, escalations and last closes, one MGET for today's cost
// of every template seen.
func (s *Store) Stats(ctx context.Context) (workitems.Stats, error) {
	st := workitems.Stats{Items: map[string]map[workitems.State]int{}, DailyCostUSD: map[string]float64{}, LastClosedAt: map[string]time.Time{}}
	var (
		counts, closed, kinds *redis.MapStringStringCmd
		oldest, firstPoll     *redis.ZSliceCmd
		open                  *redis.IntCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		counts = p.HGetAll(ctx, s.k.counts())
		oldest = p.ZRangeWithScores(ctx, s.k.escalated(), 0, 0)
		open = p.ZCard(ctx, s.k.escalated())
		closed = p.HGetAll(ctx, s.k.lastClosed())
		kinds = p.HGetAll(ctx, s.k.waitKinds())
		firstPoll = p.ZRangeWithScores(ctx, s.k.waits(), 0, 0)
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("workitems: stats: %w", err)
	}
	st.Waiting = waitKindCounts(kinds.Val())
	if zs := firstPoll.Val(); len(zs) > 0 {
		st.FirstPollAt = time.UnixMilli(int64(zs[0].Score)).UTC()
	}
	for k, v := range counts.Val() {
		tmpl, state, ok := strings.Cut(k, "|")
		n, _ := strconv.Atoi(v)
		if !ok {
			continue
		}
		if st.Items[tmpl] == nil {
			st.Items[tmpl] = map[workitems.State]int{}
		}
		st.Items[tmpl][workitems.State(state)] = n
	}
	st.OpenEscalations = int(open.Val())
	if esc := oldest.Val(); len(esc) > 0 {
		st.OldestEscalationAt = time.UnixMilli(int64(esc[0].Score)).UTC()
	}
	for tmpl, v := range closed.Val() {
		if sec, err := strconv.ParseInt(v, 10, 64); err == nil {
			st.LastClosedAt[tmpl] = time.Unix(sec, 0).UTC()
		}
	}
	templates := slices.Sorted(maps.Keys(st.Items))
	if len(templates) == 0 {
		return st, nil
	}
	day := s.Now().UTC().Format("2006-01-02")
	costKeys := make([]string, len(templates))
	for i, t := range templates {
		costKeys[i] = s.k.dailyCost(t, day)
	}
	costs, err := s.rdb.MGet(ctx, costKeys...).Result()
	if err != nil {
		return st, fmt.Errorf("workitems: stats: %w", err)
	}
	for i, v := range costs {
		if str, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(str, 64); err == nil {
				st.DailyCostUSD[templates[i]] = f
			}
		}
	}
	return st, nil
}

// Steer queues input for an item's running attempt, whatever its state (SteerIf with no
// condition; Queue.Steer is the guarded one people reach).
func (s *Store) Steer(ctx context.Context, id, text, actor string) error {
	return s.SteerIf(ctx, id, text, actor, func(*workitems.Item) error { return nil })
}

// PeekSteer returns the queued steer input of an item from position from on, oldest first,
// without removing it: a running attempt removes what it took with the checkpoint that holds
// it (CheckpointWrite.SteerTaken), so that a crash in between loses nothing.
func (s *Store) PeekSteer(ctx context.Context, id string, from int) ([]string, error) {
	out, err := s.rdb.LRange(ctx, s.k.steer(id), int64(from), -1).Result()
	if err != nil {
		return nil, fmt.Errorf("workitems: steer %s: %w", id, err)
	}
	return out, nil
}

// WaitFor follows an item's event log until done(item) holds, and returns that item. It ends
// with ctx (wrap ctx with a timeout to bound it).
func (s *Store) WaitFor(ctx context.Context, id string, done func(*workitems.Item) bool) (*workitems.Item, error) {
	after := "0"
	for {
		it, err := s.Get(ctx, id)
		if err != nil && !errors.Is(err, workitems.ErrNotFound) {
			return nil, err
		}
		if err == nil && done(it) {
			return it, nil
		}
		// Block on the stream, not a sleep: any change of the item writes an event.
		evs, err := s.Events(ctx, id, after, 100, time.Second)
		if ctx.Err() != nil {
			return it, fmt.Errorf("workitems: waiting for %s: %w", id, context.Cause(ctx))
		}
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].ID
		}
	}
}

// InState returns a WaitFor condition: the item is in one of states.
func InState(states ...workitems.State) func(*workitems.Item) bool {
	return func(it *workitems.Item) bool { return slices.Contains(states, it.State) }
}
