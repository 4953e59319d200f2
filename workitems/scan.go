package workitems

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// ScanState calls fn with the items in state st, oldest first (by creation), page items at a
// time, reading one page per MGET. A repair pass walks a state this way so that the oldest
// items are never starved by newer ones however many there are. An error from fn ends the scan.
func (s *Store) ScanState(ctx context.Context, st State, page int, fn func([]*Item) error) error {
	if page <= 0 {
		page = 100
	}
	ids, err := s.rdb.SMembers(ctx, s.k.state(st)).Result()
	if err != nil {
		return fmt.Errorf("workitems: scan %s: %w", st, err)
	}
	if len(ids) == 0 {
		return nil
	}
	created, err := s.rdb.ZMScore(ctx, s.k.items(), ids...).Result()
	if err != nil {
		return fmt.Errorf("workitems: scan %s: %w", st, err)
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(created[a], created[b]); c != 0 {
			return c
		}
		return cmp.Compare(ids[a], ids[b])
	})
	sorted := make([]string, len(ids))
	for i, j := range order {
		sorted[i] = ids[j]
	}
	for len(sorted) > 0 {
		n := min(page, len(sorted))
		items, err := s.GetMany(ctx, sorted[:n])
		if err != nil {
			return err
		}
		batch := make([]*Item, 0, n)
		for _, id := range sorted[:n] {
			if it, ok := items[id]; ok && it.State == st { // it may have moved on since SMEMBERS
				batch = append(batch, it)
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
		}
		sorted = sorted[n:]
	}
	return nil
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
