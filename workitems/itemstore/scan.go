package itemstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// ScanState calls fn with the items in state st, oldest first (by creation), page items at a
// time: one ZRANGE of the state's ordered index and one MGET per page. A repair pass walks a
// state this way so that the oldest items are never starved by newer ones however many there
// are. The walk is a cursor on the creation score, not a rank, so items leaving the state
// meanwhile make it skip nothing. An error from fn ends the scan.
func (s *Store) ScanState(ctx context.Context, st workitems.State, page int, fn func([]*workitems.Item) error) error {
	if page <= 0 {
		page = 100
	}
	min := "-inf"
	var atMin map[string]bool // ids already seen whose score is min (ties on creation time)
	for {
		count := page + len(atMin)
		zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: s.k.state(st), Start: min, Stop: "+inf", ByScore: true, Count: int64(count),
		}).Result()
		if err != nil {
			return fmt.Errorf("workitems: scan %s: %w", st, err)
		}
		ids := make([]string, 0, len(zs))
		for _, z := range zs {
			if id, _ := z.Member.(string); !atMin[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		last := zs[len(zs)-1].Score
		next := map[string]bool{}
		for _, z := range zs {
			if z.Score == last {
				next[z.Member.(string)] = true
			}
		}
		if strconv.FormatFloat(last, 'f', -1, 64) == min {
			for id := range atMin {
				next[id] = true
			}
		}
		min, atMin = strconv.FormatFloat(last, 'f', -1, 64), next
		items, err := s.GetMany(ctx, ids)
		if err != nil {
			return err
		}
		batch := make([]*workitems.Item, 0, len(ids))
		for _, id := range ids {
			if it, ok := items[id]; ok && it.State == st { // it may have moved on since the ZRANGE
				batch = append(batch, it)
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
		}
		if len(zs) < count { // a short page: the end of the index
			return nil
		}
	}
}

// LeaseHeld reports whether attempt n of an item has a live lease, and its newest fencing epoch.
// An item running or verifying with no live lease has lost its worker: nobody renews it.
func (s *Store) LeaseHeld(ctx context.Context, item string, n int) (held bool, epoch int64, err error) {
	p := s.rdb.Pipeline()
	ex := p.Exists(ctx, s.k.lease(item, n))
	ep := p.Get(ctx, s.k.epoch(item, n))
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, 0, fmt.Errorf("workitems: lease of %s attempt %d: %w", item, n, err)
	}
	epoch, _ = ep.Int64()
	return ex.Val() == 1, epoch, nil
}
