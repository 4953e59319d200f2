package itemstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// ErrWaitEnded means a wake named a wait the item is no longer in: another wake decided first,
// a person acted, or the item moved on. Nothing was written.
var ErrWaitEnded = errors.New("the wait has ended")

// park records a wait decision: the item keeps its attempt (still verifying, by CI or by a
// person) and waits without a worker. The wait takes the forge, repository, commit and pull
// request from the item's latest delivery.
func (s *Store) park(op workitems.Op, it *workitems.Item, a *workitems.Attempt, d workitems.Decision) ([]workitems.Event, error) {
	if d.Wait == nil || !slicesContains(workitems.AllWaitKinds(), d.Wait.Kind) {
		return nil, fmt.Errorf("workitems: item %s: a wait decision needs a wait kind (one of %v)", it.ID, workitems.AllWaitKinds())
	}
	now := s.Now().UTC()
	w := &workitems.Wait{Kind: d.Wait.Kind, Attempt: a.N, Since: now, Deadline: d.Wait.Deadline.UTC(), Reason: firstNonEmpty(d.Summary, joinReasons(d.Reasons))}
	if w.Deadline.IsZero() || w.Deadline.Before(now) {
		w.Deadline = now
	}
	var prevSeq int64
	if it.Wait != nil && it.Wait.Kind == w.Kind {
		w.Since = it.Wait.Since // the same wait goes on (one of several checks answered)
	}
	if it.Wait != nil {
		prevSeq = it.Wait.Seq
		w.PushedAt, w.LocalRule, w.LocalSummary, w.InfraReruns = it.Wait.PushedAt, it.Wait.LocalRule, it.Wait.LocalSummary, it.Wait.InfraReruns
	}
	w.Seq = max(prevSeq, it.WaitSeqs()) + 1
	if del := it.Delivery; del != nil && del.Attempt == a.N {
		w.SHA = del.PushedSHA
		if del.PR != nil {
			w.PR = del.PR.Number
		}
		if w.PushedAt.IsZero() || (it.Wait != nil && it.Wait.SHA != w.SHA) {
			w.PushedAt = del.At
		}
	}
	w.Forge, w.Repo = d.Wait.Forge, d.Wait.Repo
	w.InfraReruns = max(w.InfraReruns, d.Wait.InfraReruns)
	if d.Wait.LocalRule != "" {
		w.LocalRule, w.LocalSummary = d.Wait.LocalRule, d.Wait.LocalSummary
	}
	first := d.Wait.PollIn
	if first <= 0 {
		first = workitems.DefaultFirstPoll
	}
	w.NextPoll = minTime(now.Add(first), w.Deadline)
	d.Next = nil
	it.Decisions = append(it.Decisions, d)
	evs := []workitems.Event{
		{Type: workitems.EventDecision, Attempt: a.N, Actor: d.Actor, Message: d.Summary,
			Data: map[string]string{"outcome": string(d.Outcome), "rule": string(d.Rule), "reasons": joinReasons(d.Reasons)}},
		{Type: workitems.EventWaiting, Attempt: a.N, Message: "waiting for " + w.String(),
			Data: map[string]string{"kind": string(w.Kind), "sha": w.SHA, "pr": strconv.Itoa(w.PR),
				"deadline": w.Deadline.Format(time.RFC3339), "seq": strconv.FormatInt(w.Seq, 10)}},
	}
	if err := take(op, it, workitems.StateWaiting); err != nil {
		return nil, err
	}
	it.Wait = w
	return evs, nil
}

// Wake records the decision on a waiting item's evidence: close, retry (the next attempt),
// escalate, or wait again (a review after green CI, a new deadline). seq names the wait it
// ends; ErrWaitEnded when the item is no longer in it (nothing is written). del, when set,
// replaces the item's latest delivery record (the checks read, the merge commit, the pull
// request's state). The woken event says by what.
func (s *Store) Wake(ctx context.Context, id string, seq int64, by workitems.WakeReason, d workitems.Decision, del *workitems.Delivery) (*workitems.Item, error) {
	if !slicesContains(workitems.AllWakeReasons(), by) {
		return nil, fmt.Errorf("workitems: wake %s: reason %q is not one of %v", id, by, workitems.AllWakeReasons())
	}
	return s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpWake, it, 0); err != nil {
			return nil, err
		}
		if it.Wait == nil || it.Wait.Seq != seq {
			return nil, fmt.Errorf("workitems: wake %s (wait %d): %w", id, seq, ErrWaitEnded)
		}
		a := it.Current()
		if a == nil || a.N != it.Wait.Attempt {
			return nil, fmt.Errorf("workitems: wake %s: the wait's attempt %d is not the current one: %w", id, it.Wait.Attempt, ErrWaitEnded)
		}
		if d.At.IsZero() {
			d.At = s.Now().UTC()
		}
		evs := []workitems.Event{{Type: workitems.EventWoken, Attempt: a.N, Message: fmt.Sprintf("woken by %s after waiting for %s", by, it.Wait.String()),
			Data: map[string]string{"by": string(by), "kind": string(it.Wait.Kind), "seq": strconv.FormatInt(seq, 10)}}}
		if del != nil {
			rec := *del
			rec.Attempt = a.N
			a.Delivery, it.Delivery = &rec, &rec
		}
		more, err := s.applyDecision(workitems.OpWake, it, a, d)
		return append(evs, more...), err
	})
}

// indexWait keeps the waiting indexes in step with the item's Wait, in the item's MULTI.
func (s *Store) indexWait(ctx context.Context, p pipeliner, it *workitems.Item, before *workitems.Wait) {
	after := it.Wait
	if before != nil && (after == nil || after.Seq != before.Seq) {
		p.ZRem(ctx, s.k.waits(), it.ID)
		p.HIncrBy(ctx, s.k.waitKinds(), string(before.Kind), -1)
		if before.SHA != "" {
			p.SRem(ctx, s.k.waitSHA(before.SHA), it.ID)
		}
		if before.PR != 0 {
			p.SRem(ctx, s.k.waitPR(before.Forge, before.Repo, before.PR), it.ID)
		}
	}
	if after != nil && (before == nil || after.Seq != before.Seq) {
		p.ZAdd(ctx, s.k.waits(), redis.Z{Score: float64(after.NextPoll.UnixMilli()), Member: it.ID})
		p.HIncrBy(ctx, s.k.waitKinds(), string(after.Kind), 1)
		if after.SHA != "" {
			p.SAdd(ctx, s.k.waitSHA(after.SHA), it.ID)
		}
		if after.PR != 0 {
			p.SAdd(ctx, s.k.waitPR(after.Forge, after.Repo, after.PR), it.ID)
		}
	}
}

// claimScript takes up to ARGV[3] waiting items whose next poll is due (score ≤ ARGV[1]) and
// moves each to ARGV[2] (the claim's end), so the pollers of other replicas skip them until
// then: one round is O(due items), whatever the number waiting.
var claimScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id)
end
return due
`)

// ClaimDueWaits returns up to limit waiting items whose next poll is due at now, claimed for
// hold: another poller does not see them again before now+hold unless they are postponed.
func (s *Store) ClaimDueWaits(ctx context.Context, now time.Time, hold time.Duration, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 100
	}
	res, err := claimScript.Run(ctx, s.rdb, []string{s.k.waits()}, now.UnixMilli(), now.Add(hold).UnixMilli(), limit).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workitems: claim due waits: %w", err)
	}
	return res, nil
}

// PostponeWait sets when the poller looks at a waiting item next. It never adds an item that
// has left waiting (ZADD XX): a wake that ended the wait in between wins.
func (s *Store) PostponeWait(ctx context.Context, id string, next time.Time) error {
	return s.rdb.ZAddXX(ctx, s.k.waits(), redis.Z{Score: float64(next.UnixMilli()), Member: id}).Err()
}

// NextPoll returns when the poller looks at a waiting item next (zero: not waiting).
func (s *Store) NextPoll(ctx context.Context, id string) (time.Time, error) {
	sc, err := s.rdb.ZScore(ctx, s.k.waits(), id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(int64(sc)).UTC(), nil
}

// WaitingOnCommit returns the items waiting on the pushed commit sha (O(those items)).
func (s *Store) WaitingOnCommit(ctx context.Context, sha string) ([]string, error) {
	return s.rdb.SMembers(ctx, s.k.waitSHA(sha)).Result()
}

// WaitingOnPR returns the items waiting on a pull request of repo on forge.
func (s *Store) WaitingOnPR(ctx context.Context, forge, repo string, number int) ([]string, error) {
	return s.rdb.SMembers(ctx, s.k.waitPR(forge, repo, number)).Result()
}

// WaitingCount is the number of waiting items (one ZCARD).
func (s *Store) WaitingCount(ctx context.Context) (int64, error) {
	return s.rdb.ZCard(ctx, s.k.waits()).Result()
}

// WaitingByKind counts the waiting items by what they wait for (one HGETALL).
func (s *Store) WaitingByKind(ctx context.Context) (map[workitems.WaitKind]int64, error) {
	m, err := s.rdb.HGetAll(ctx, s.k.waitKinds()).Result()
	if err != nil {
		return nil, err
	}
	return waitKindCounts(m), nil
}

// waitKindCounts reads the waitkinds hash: every kind, absent ones at zero.
func waitKindCounts(m map[string]string) map[workitems.WaitKind]int64 {
	out := map[workitems.WaitKind]int64{}
	for _, k := range workitems.AllWaitKinds() {
		n, _ := strconv.ParseInt(m[string(k)], 10, 64)
		out[k] = max(n, 0)
	}
	return out
}

// PollLag is how far the earliest due poll is behind now (0: none due): a poller that stopped
// shows as a lag that grows.
func (s *Store) PollLag(ctx context.Context, now time.Time) (time.Duration, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.k.waits(), 0, 0).Result()
	if err != nil || len(zs) == 0 {
		return 0, err
	}
	lag := now.Sub(time.UnixMilli(int64(zs[0].Score)))
	return max(lag, 0), nil
}

// Waiting lists waiting items whose wait began before since (oldest first is not kept: the
// page is by next poll), at most limit: the inbox's "waiting for a person" reads it.
func (s *Store) Waiting(ctx context.Context, offset, limit int) ([]*workitems.Item, error) {
	ids, err := s.rdb.ZRange(ctx, s.k.state(workitems.StateWaiting), int64(offset), int64(offset+limit-1)).Result()
	if err != nil {
		return nil, err
	}
	return s.getMany(ctx, ids)
}

func slicesContains[T comparable](xs []T, x T) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}
