package evals

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Listed is an experiment on a page of the list, with the number of its runs recorded as ended
// (a run whose item ended since the last Status or Step is counted once one of them looks).
type Listed struct {
	*Experiment
	Done int
}

// Page returns a page of experiments, newest first, each with its count of recorded runs, and
// the total. It costs two round trips whatever the page size (the ids and the total, then
// every record and run count of the page), and reads no run: the list of the console and of
// GET /api/experiments must not grow with the experiments' sizes.
func (s *Store) Page(ctx context.Context, offset, limit int) ([]Listed, int64, error) {
	if limit <= 0 {
		limit = 50
	}
	var ids *redis.StringSliceCmd
	var total *redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ids = p.ZRevRange(ctx, s.k.all(), int64(offset), int64(offset+limit-1))
		total = p.ZCard(ctx, s.k.all())
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("evals: list experiments: %w", err)
	}
	if len(ids.Val()) == 0 {
		return []Listed{}, total.Val(), nil
	}
	recs := make([]*redis.StringCmd, len(ids.Val()))
	done := make([]*redis.IntCmd, len(ids.Val()))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids.Val() {
			recs[i] = p.Get(ctx, s.k.exp(id))
			done[i] = p.HLen(ctx, s.k.runs(id))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("evals: list experiments: %w", err)
	}
	out := make([]Listed, 0, len(recs))
	for i, id := range ids.Val() {
		b, err := recs[i].Bytes()
		if errors.Is(err, redis.Nil) {
			continue // deleted in between
		}
		if err != nil {
			return nil, 0, fmt.Errorf("evals: experiment %s: %w", id, err)
		}
		e, err := decodeExperiment(id, b)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, Listed{Experiment: e, Done: int(done[i].Val())})
	}
	return out, total.Val(), nil
}

// List returns a page of experiments with their recorded runs (Store.Page), so that a Runner
// is all a reader of experiments needs: the list, Status and Report.
func (r *Runner) List(ctx context.Context, offset, limit int) ([]Listed, int64, error) {
	return r.Exps.Page(ctx, offset, limit)
}
