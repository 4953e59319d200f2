package itemstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// Every list reads only the page it returns: each filter (none, template, state, template and
// state) has two sorted sets, one scored by creation time and one by spend, so any filter in
// any order is one ZRANGE by rank for the page's ids and one MGET for its records, whatever
// the store holds. Transitions move an item between the per-state sets in the same MULTI as
// its record; the retention janitor finds ended items in the per-state "ended" sets, scored
// by when they ended.

// IndexVersion is the layout of the indexes this code reads and writes. Stores written before
// version 2 kept unordered sets per state; MigrateIndexes builds the ordered ones from the
// records.
const IndexVersion = 2

// ListSort orders a list.
type ListSort string

// The list orders.
const (
	SortNewest ListSort = "newest" // by creation, newest first (the default)
	SortOldest ListSort = "oldest" // by creation, oldest first
	SortSpend  ListSort = "spend"  // by spend, highest first: cost, then wall time
)

// Valid reports whether o is one of the list orders ("" is SortNewest).
func (o ListSort) Valid() bool {
	return o == "" || o == SortNewest || o == SortOldest || o == SortSpend
}

// ListOptions filters and pages List.
type ListOptions struct {
	State    workitems.State
	Template string
	Sort     ListSort
	Limit    int // 0: 100
	Offset   int // skip this many in the order (pagination)
}

// createdKey and spendKey are the indexes of a filter.
func (s *Store) createdKey(o ListOptions) string {
	switch {
	case o.State != "" && o.Template != "":
		return s.k.tmplState(o.Template, o.State)
	case o.State != "":
		return s.k.state(o.State)
	case o.Template != "":
		return s.k.byTemplate(o.Template)
	}
	return s.k.items()
}

func (s *Store) spendKey(o ListOptions) string {
	switch {
	case o.State != "" && o.Template != "":
		return s.k.tmplStateSpend(o.Template, o.State)
	case o.State != "":
		return s.k.stateSpend(o.State)
	case o.Template != "":
		return s.k.tmplSpend(o.Template)
	}
	return s.k.spend()
}

// List returns one page of items in the order asked for (newest first by default), in two
// round trips: the page's ids from the filter's index, then their records.
func (s *Store) List(ctx context.Context, o ListOptions) ([]*workitems.Item, error) {
	if !o.Sort.Valid() {
		return nil, fmt.Errorf("workitems: list: sort %q is not one of newest, oldest, spend", o.Sort)
	}
	if o.Limit <= 0 {
		o.Limit = 100
	}
	o.Offset = max(o.Offset, 0)
	lo, hi := int64(o.Offset), int64(o.Offset+o.Limit-1)
	var ids []string
	var err error
	switch o.Sort {
	case SortOldest:
		ids, err = s.rdb.ZRange(ctx, s.createdKey(o), lo, hi).Result()
	case SortSpend:
		ids, err = s.rdb.ZRevRange(ctx, s.spendKey(o), lo, hi).Result()
	default:
		ids, err = s.rdb.ZRevRange(ctx, s.createdKey(o), lo, hi).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("workitems: list: %w", err)
	}
	return s.getMany(ctx, ids)
}

// Count returns how many items List would page through with these filters (one ZCARD).
func (s *Store) Count(ctx context.Context, o ListOptions) (int, error) {
	n, err := s.rdb.ZCard(ctx, s.createdKey(o)).Result()
	if err != nil {
		return 0, fmt.Errorf("workitems: count: %w", err)
	}
	return int(n), nil
}

// getMany reads records in the order of ids, skipping those gone in between.
func (s *Store) getMany(ctx context.Context, ids []string) ([]*workitems.Item, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ks := make([]string, len(ids))
	for i, id := range ids {
		ks[i] = s.k.item(id)
	}
	vals, err := s.rdb.MGet(ctx, ks...).Result()
	if err != nil {
		return nil, fmt.Errorf("workitems: list: %w", err)
	}
	out := make([]*workitems.Item, 0, len(vals))
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		var it workitems.Item
		if json.Unmarshal([]byte(str), &it) == nil {
			out = append(out, &it)
		}
	}
	return out, nil
}

// Escalated returns one page of escalated items, oldest escalation first (limit 0: 100).
func (s *Store) Escalated(ctx context.Context, offset, limit int) ([]*workitems.Item, error) {
	if limit <= 0 {
		limit = 100
	}
	offset = max(offset, 0)
	ids, err := s.rdb.ZRange(ctx, s.k.escalated(), int64(offset), int64(offset+limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("workitems: escalations: %w", err)
	}
	return s.getMany(ctx, ids)
}

// EscalatedCount returns how many items are escalated.
func (s *Store) EscalatedCount(ctx context.Context) (int, error) {
	n, err := s.rdb.ZCard(ctx, s.k.escalated()).Result()
	if err != nil {
		return 0, fmt.Errorf("workitems: escalations: %w", err)
	}
	return int(n), nil
}

// Recent is an item as the per-template state indexes know it: enough for a list of outcomes
// without reading the item.
type Recent struct {
	ID        string
	State     workitems.State
	CreatedAt time.Time
}

// RecentEnded returns, per template, up to n of its newest items that ended or escalated
// (closed, failed, cancelled, escalated), newest first by creation: one pipeline of 4 small
// ZRANGEs per template and no item read, since the index an item sits in is its state (moved
// in the same MULTI as the state) and its score the creation time.
func (s *Store) RecentEnded(ctx context.Context, templates []string, n int) (map[string][]Recent, error) {
	states := []workitems.State{workitems.StateClosed, workitems.StateFailed, workitems.StateCancelled, workitems.StateEscalated}
	cmds := make([][]*redis.ZSliceCmd, len(templates))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range templates {
			for _, st := range states {
				cmds[i] = append(cmds[i], p.ZRevRangeWithScores(ctx, s.k.tmplState(t, st), 0, int64(n-1)))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("workitems: recent items: %w", err)
	}
	out := map[string][]Recent{}
	for i, t := range templates {
		var all []Recent
		for j, c := range cmds[i] {
			for _, z := range c.Val() {
				id, _ := z.Member.(string)
				all = append(all, Recent{ID: id, State: states[j], CreatedAt: time.UnixMilli(int64(z.Score)).UTC()})
			}
		}
		// Newest first across the four states (ties by id, so the order is stable); the page
		// is n, so a sort of ≤ 4n is bounded.
		slices.SortFunc(all, func(a, b Recent) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		if len(all) > 0 {
			out[t] = all[:min(n, len(all))]
		}
	}
	return out, nil
}

// spendScore orders by cost (to a hundredth of a cent), then by wall time in seconds (scripts
// cost nothing but take time), exactly in a float64 up to $900k.
func spendScore(sp workitems.Spend) float64 {
	wall := min(math.Floor(sp.WallTime.D().Seconds()), 1e7-1)
	return math.Round(sp.CostUSD*1e4)*1e7 + max(wall, 0)
}

// indexState moves the item between the per-state indexes, the open set of its template, the
// escalation queue, the ended indexes and the per-template counters.
func (s *Store) indexState(ctx context.Context, p redis.Pipeliner, it *workitems.Item, from, to workitems.State) {
	created := float64(it.CreatedAt.UnixMilli())
	if from != "" {
		p.ZRem(ctx, s.k.state(from), it.ID)
		p.ZRem(ctx, s.k.tmplState(it.Template, from), it.ID)
		p.ZRem(ctx, s.k.stateSpend(from), it.ID)
		p.ZRem(ctx, s.k.tmplStateSpend(it.Template, from), it.ID)
		p.HIncrBy(ctx, s.k.counts(), it.Template+"|"+string(from), -1)
	}
	sc := spendScore(it.Spend)
	p.ZAdd(ctx, s.k.state(to), redis.Z{Score: created, Member: it.ID})
	p.ZAdd(ctx, s.k.tmplState(it.Template, to), redis.Z{Score: created, Member: it.ID})
	p.ZAdd(ctx, s.k.stateSpend(to), redis.Z{Score: sc, Member: it.ID})
	p.ZAdd(ctx, s.k.tmplStateSpend(it.Template, to), redis.Z{Score: sc, Member: it.ID})
	p.HIncrBy(ctx, s.k.counts(), it.Template+"|"+string(to), 1)
	if to.Open() {
		p.SAdd(ctx, s.k.open(it.Template), it.ID)
	} else {
		p.SRem(ctx, s.k.open(it.Template), it.ID)
	}
	if to.Terminal() {
		p.ZAdd(ctx, s.k.ended(to), redis.Z{Score: float64(s.Now().UnixMilli()), Member: it.ID})
	}
	if to == workitems.StateEscalated {
		at := s.Now()
		if it.Escalation != nil {
			at = it.Escalation.At
		}
		p.ZAdd(ctx, s.k.escalated(), redis.Z{Score: float64(at.UnixMilli()), Member: it.ID})
	} else if from == workitems.StateEscalated {
		p.ZRem(ctx, s.k.escalated(), it.ID)
	}
	if to == workitems.StateClosed {
		p.HSet(ctx, s.k.lastClosed(), it.Template, s.Now().Unix())
	}
}

// indexSpend re-scores the item in the spend indexes of its filters.
func (s *Store) indexSpend(ctx context.Context, p redis.Pipeliner, it *workitems.Item) {
	z := redis.Z{Score: spendScore(it.Spend), Member: it.ID}
	p.ZAdd(ctx, s.k.spend(), z)
	p.ZAdd(ctx, s.k.tmplSpend(it.Template), z)
	p.ZAdd(ctx, s.k.stateSpend(it.State), z)
	p.ZAdd(ctx, s.k.tmplStateSpend(it.Template, it.State), z)
}

// unindex takes the item out of every index (Delete's share of the MULTI).
func (s *Store) unindex(ctx context.Context, p redis.Pipeliner, it *workitems.Item) {
	p.ZRem(ctx, s.k.items(), it.ID)
	p.ZRem(ctx, s.k.byTemplate(it.Template), it.ID)
	p.ZRem(ctx, s.k.spend(), it.ID)
	p.ZRem(ctx, s.k.tmplSpend(it.Template), it.ID)
	p.ZRem(ctx, s.k.state(it.State), it.ID)
	p.ZRem(ctx, s.k.tmplState(it.Template, it.State), it.ID)
	p.ZRem(ctx, s.k.stateSpend(it.State), it.ID)
	p.ZRem(ctx, s.k.tmplStateSpend(it.Template, it.State), it.ID)
	p.ZRem(ctx, s.k.ended(it.State), it.ID)
	p.SRem(ctx, s.k.open(it.Template), it.ID)
	p.ZRem(ctx, s.k.escalated(), it.ID)
	p.HIncrBy(ctx, s.k.counts(), it.Template+"|"+string(it.State), -1)
	if it.Wait != nil {
		saved := it.Wait
		it.Wait = nil
		s.indexWait(ctx, p, it, saved)
		it.Wait = saved
	}
}

// migrateScript adds one item to its version-2 indexes if its record still says the state
// the caller read (else a writer running this code moved it since and indexed it itself).
// KEYS: item, state, tmplState, stateSpend, tmplStateSpend, spend, tmplSpend, ended (or "").
// ARGV: state, created ms, spend score, ended ms (or "").
var migrateScript = redis.NewScript(`
local b = redis.call('GET', KEYS[1])
if not b then return 0 end
local ok, it = pcall(cjson.decode, b)
if not ok or it.state ~= ARGV[1] then return 0 end
local id = it.id
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('ZADD', KEYS[3], ARGV[2], id)
redis.call('ZADD', KEYS[4], ARGV[3], id)
redis.call('ZADD', KEYS[5], ARGV[3], id)
redis.call('ZADD', KEYS[6], ARGV[3], id)
redis.call('ZADD', KEYS[7], ARGV[3], id)
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[8], ARGV[4], id) end
return 1
`)

// IndexesCurrent reports whether the store's indexes are at IndexVersion (one GET). A store
// with no items at all is current too.
func (s *Store) IndexesCurrent(ctx context.Context) (bool, error) {
	v, err := s.rdb.Get(ctx, s.k.indexVersion()).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("workitems: index version: %w", err)
	}
	if v >= IndexVersion {
		return true, nil
	}
	n, err := s.rdb.ZCard(ctx, s.k.items()).Result()
	if err != nil {
		return false, fmt.Errorf("workitems: index version: %w", err)
	}
	if n == 0 {
		return true, s.rdb.Set(ctx, s.k.indexVersion(), IndexVersion, 0).Err()
	}
	return false, nil
}

// MigrateIndexes builds the ordered indexes of a store written before IndexVersion from its
// records, batch by batch in creation order, then drops the old unordered state sets and
// records the version. It is idempotent and safe beside writers running this code (each item
// is indexed by a script that re-checks its state); run it once every process is upgraded.
// It returns how many items it indexed.
func (s *Store) MigrateIndexes(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		batch = 1000
	}
	done := 0
	for lo := int64(0); ; lo += int64(batch) {
		ids, err := s.rdb.ZRange(ctx, s.k.items(), lo, lo+int64(batch)-1).Result()
		if err != nil {
			return done, fmt.Errorf("workitems: migrate indexes: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		items, err := s.getMany(ctx, ids)
		if err != nil {
			return done, err
		}
		if err := migrateScript.Load(ctx, s.rdb).Err(); err != nil {
			return done, fmt.Errorf("workitems: migrate indexes: %w", err)
		}
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, it := range items {
				ended, endedKey := "", ""
				if it.State.Terminal() {
					ended, endedKey = fmt.Sprint(it.UpdatedAt.UnixMilli()), s.k.ended(it.State)
				}
				sc := spendScore(it.Spend)
				migrateScript.EvalSha(ctx, p, []string{s.k.item(it.ID), s.k.state(it.State), s.k.tmplState(it.Template, it.State),
					s.k.stateSpend(it.State), s.k.tmplStateSpend(it.Template, it.State), s.k.spend(), s.k.tmplSpend(it.Template),
					endedKey}, string(it.State), it.CreatedAt.UnixMilli(), sc, ended)
			}
			return nil
		})
		if err != nil {
			return done, fmt.Errorf("workitems: migrate indexes: %w", err)
		}
		done += len(items)
	}
	legacy := make([]string, 0, len(workitems.AllStates()))
	for _, st := range workitems.AllStates() {
		legacy = append(legacy, s.k.legacyState(st))
	}
	if err := s.rdb.Del(ctx, legacy...).Err(); err != nil {
		return done, fmt.Errorf("workitems: migrate indexes: %w", err)
	}
	if err := s.rdb.Set(ctx, s.k.indexVersion(), IndexVersion, 0).Err(); err != nil {
		return done, fmt.Errorf("workitems: migrate indexes: %w", err)
	}
	return done, nil
}

// TemplateStat is what the templates pages show of one template's items.
type TemplateStat struct {
	DailyCostUSD float64   // today's (UTC) spend
	Open         int64     // items counting against max_open
	LastClosedAt time.Time // zero: never closed
}

// TemplateStats reads the stats of these templates (a page of them) in one pipeline.
func (s *Store) TemplateStats(ctx context.Context, templates []string) (map[string]TemplateStat, error) {
	day := s.Now().UTC().Format("2006-01-02")
	cost := make([]*redis.StringCmd, len(templates))
	open := make([]*redis.IntCmd, len(templates))
	closed := make([]*redis.StringCmd, len(templates))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range templates {
			cost[i] = p.Get(ctx, s.k.dailyCost(t, day))
			open[i] = p.SCard(ctx, s.k.open(t))
			closed[i] = p.HGet(ctx, s.k.lastClosed(), t)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workitems: template stats: %w", err)
	}
	out := make(map[string]TemplateStat, len(templates))
	for i, t := range templates {
		var st TemplateStat
		st.DailyCostUSD, _ = cost[i].Float64()
		st.Open = open[i].Val()
		if sec, err := closed[i].Int64(); err == nil {
			st.LastClosedAt = time.Unix(sec, 0).UTC()
		}
		out[t] = st
	}
	return out, nil
}
