package itemstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// StartAttempt moves a queued item to running under the fence, or, when the attempt is already
// running (a worker died or yielded), records a resume. It returns the item and whether this is a
// resume. ErrStale means the item is past this attempt.
func (s *Store) StartAttempt(ctx context.Context, f *Fence, worker string) (*workitems.Item, bool, error) {
	resumed := false
	it, err := s.Update(ctx, f.Item, f, func(it *workitems.Item) ([]workitems.Event, error) {
		resumed = false
		op := workitems.OpStart
		if workitems.OpResume.From(it.State) {
			op = workitems.OpResume
		}
		if err := guard(op, it, f.Attempt); err != nil {
			return nil, err
		}
		a := it.Current()
		a.Worker, a.Epoch = worker, f.Epoch
		if op == workitems.OpStart {
			if err := take(op, it, workitems.StateRunning); err != nil {
				return nil, err
			}
			a.State, a.StartedAt = workitems.AttemptRunning, s.Now().UTC()
			return []workitems.Event{{Type: workitems.EventAttemptStarted, Attempt: a.N, Actor: worker,
				Data: map[string]string{"epoch": fmt.Sprint(f.Epoch), "changed": strings.Join(a.Changed, ",")}}}, nil
		}
		resumed = true
		a.Resumes++
		return []workitems.Event{{Type: workitems.EventAttemptResumed, Attempt: a.N, Actor: worker,
			Message: "resumed from the last checkpoint", Data: map[string]string{"epoch": fmt.Sprint(f.Epoch), "phase": string(it.State)}}}, nil
	})
	return it, resumed, err
}

// RecordExit stores the inner loop's exit and spend and moves the item to verifying. The spend
// is added to the item's total, and what the attempt's checkpoints did not charge yet (see
// SaveChargedCheckpoint) to the template's daily cost, in the same transaction.
//
// restarted records that the loop could not resume its external session and started afresh
// (Condition.Restarted).
func (s *Store) RecordExit(ctx context.Context, f *Fence, exit workitems.Exit, spend workitems.Spend, workspace string, restarted bool) (*workitems.Item, error) {
	return s.RecordExitWith(ctx, f, ExitRecord{Exit: exit, Spend: spend, Workspace: workspace, Restarted: restarted})
}

// ExitRecord is what RecordExitWith stores.
type ExitRecord struct {
	Exit      workitems.Exit
	Spend     workitems.Spend
	Workspace string // the workspace's path on the host that ran the loop
	Restarted bool   // see RecordExit
	// Snapshot is the workspace's tree at the exit, recorded on the attempt so that a resume in
	// verifying on any host verifies exactly that tree. Its diff replaces the stored one in the
	// same transaction unless Keep says the stored diff is already of this tree.
	Snapshot *workitems.Snapshot
	Keep     bool
}

// RecordExitWith is RecordExit with the workspace's exit snapshot.
func (s *Store) RecordExitWith(ctx context.Context, f *Fence, r ExitRecord) (*workitems.Item, error) {
	exit, spend, workspace, restarted := r.Exit, r.Spend, r.Workspace, r.Restarted
	var template string
	var charged workitems.Spend
	chargedKey := s.k.charged(f.Item, f.Attempt)
	read := func(tx *redis.Tx) error {
		vals, err := tx.HMGet(ctx, chargedKey, spendFields...).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		strs := make([]string, len(vals))
		for i, v := range vals {
			strs[i], _ = v.(string)
		}
		charged = parseSpend(strs)
		return nil
	}
	it, err := s.updateWatched(ctx, f.Item, f, []string{chargedKey}, func(tx *redis.Tx, it *workitems.Item) ([]workitems.Event, error) {
		if err := read(tx); err != nil {
			return nil, err
		}
		if err := guard(workitems.OpExit, it, f.Attempt); err != nil {
			return nil, err
		}
		a := it.Current()
		template = it.Template
		a.Exit, a.EndedAt, a.State, a.Workspace = &exit, s.Now().UTC(), workitems.AttemptVerifying, workspace
		if restarted {
			a.Condition.Restarted = true
		}
		if r.Snapshot != nil {
			meta := r.Snapshot.WorkspaceSnapshot
			a.ExitSnapshot = &meta
		}
		delta := spend.Sub(a.Spend) // a.Spend holds what earlier exits of a resumed attempt charged (none today)
		a.Spend = spend
		it.Spend = it.Spend.Add(delta)
		if err := take(workitems.OpExit, it, workitems.StateVerifying); err != nil {
			return nil, err
		}
		data := map[string]string{"reason": string(exit.Reason), "cost_usd": fmt.Sprintf("%.4f", spend.CostUSD),
			"wall_time": spend.WallTime.D().Round(1e6).String(), "steps": fmt.Sprint(spend.Steps)}
		if exit.Budget != "" {
			data["budget"] = string(exit.Budget)
		}
		return []workitems.Event{{Type: workitems.EventAttemptExited, Attempt: a.N, Message: exit.Message, Data: data}}, nil
	}, func(it *workitems.Item, p pipeliner) {
		s.addDailyCost(ctx, p, template, workitems.Remainder(spend, charged).CostUSD)
		p.HSet(ctx, chargedKey, chargedFields(chargedAfter(charged, spend))...)
		if r.Snapshot != nil && !r.Keep {
			switch op, val := snapshotOp(r.Snapshot); op {
			case "set":
				p.Set(ctx, s.k.snap(f.Item, f.Attempt), val, 0)
			case "del":
				p.Del(ctx, s.k.snap(f.Item, f.Attempt))
			}
		}
	})
	return it, err
}

// RecordDecision applies a verifier decision to a verifying item: close, retry (a new attempt
// with the decision's condition, which must differ from the last one) or escalate.
func (s *Store) RecordDecision(ctx context.Context, f *Fence, d workitems.Decision, v *workitems.Verdict) (*workitems.Item, error) {
	return s.Update(ctx, f.Item, f, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpDecide, it, f.Attempt); err != nil {
			return nil, err
		}
		a := it.Current()
		if d.At.IsZero() {
			d.At = s.Now().UTC()
		}
		a.Verified = v
		return s.applyDecision(workitems.OpDecide, it, a, d)
	})
}

// applyDecision records d on the item and its attempt and takes op's edge to the state the
// outcome leads to.
func (s *Store) applyDecision(op workitems.Op, it *workitems.Item, a *workitems.Attempt, d workitems.Decision) ([]workitems.Event, error) {
	if d.Outcome == workitems.OutcomeWait {
		return s.park(op, it, a, d)
	}
	if d.Outcome == workitems.OutcomeRetry {
		// The policy's guards (unchanged_retry_refused, max_attempts) turn such a retry into an
		// escalation before it gets here; the store only refuses what would break the item.
		switch {
		case d.Next == nil || len(d.Next.Changes(a.Condition)) == 0:
			return nil, workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("workitems: item %s: a retry (%s) must change its condition: %w", it.ID, d.Rule, workitems.ErrInvalidTransition))
		case it.Attempt >= it.AttemptsAllowed():
			return nil, workitems.Classify(workitems.ClassInvariantViolation, fmt.Errorf("workitems: item %s: a retry (%s) after attempt %d of %d: %w", it.ID, d.Rule, it.Attempt, it.AttemptsAllowed(), workitems.ErrInvalidTransition))
		}
	}
	a.Decision = &d
	a.State = workitems.AttemptDone
	it.Decisions = append(it.Decisions, d)
	evs := []workitems.Event{{Type: workitems.EventDecision, Attempt: a.N, Actor: d.Actor, Message: d.Summary,
		Data: map[string]string{"outcome": string(d.Outcome), "rule": string(d.Rule), "reasons": strings.Join(d.Reasons, "; ")}}}
	switch d.Outcome {
	case workitems.OutcomeClose:
		return evs, take(op, it, workitems.StateClosed)
	case workitems.OutcomeRetry:
		next := workitems.Attempt{N: a.N + 1, Condition: withNextInput(it, *d.Next), Changed: d.Next.Changes(a.Condition), State: workitems.AttemptQueued}
		it.Attempts = append(it.Attempts, next)
		it.Attempt = next.N
		evs = append(evs, workitems.Event{Type: workitems.EventStep, Attempt: next.N, Message: "retry with a changed condition",
			Data: map[string]string{"kind": string(workitems.KindRetryPlanned), "changed": strings.Join(next.Changed, ",")}})
		return evs, take(op, it, workitems.StateRetryWait)
	case workitems.OutcomeEscalate:
		it.Escalation = &workitems.Escalation{Reason: string(d.Rule), Summary: firstNonEmpty(d.Summary, strings.Join(d.Reasons, "; ")),
			Cause: d.Cause, Output: d.Output, At: d.At, Actions: workitems.AllEscalationActions()}
		evs = append(evs, workitems.Event{Type: workitems.EventEscalated, Attempt: a.N, Message: it.Escalation.Summary,
			Data: map[string]string{"reason": string(d.Rule)}})
		return evs, take(op, it, workitems.StateEscalated)
	}
	return nil, fmt.Errorf("workitems: item %s: decision outcome %q is not close, retry, escalate or wait", it.ID, d.Outcome)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// MarkQueued moves an item waiting to retry to queued once its next attempt's task is enqueued.
// It is a no-op for an item already past that point (another attempt, or a state OpMarkQueued
// does not start from): it writes nothing then, and returns the item as it is.
func (s *Store) MarkQueued(ctx context.Context, id string, n int) (*workitems.Item, error) {
	it, err := s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpMarkQueued, it, n); err != nil {
			return nil, err
		}
		return nil, take(workitems.OpMarkQueued, it, workitems.StateQueued)
	})
	var refused *workitems.RefusedError
	if errors.As(err, &refused) && refused.Op == workitems.OpMarkQueued {
		return s.Get(ctx, id)
	}
	return it, err
}

// ErrNoChange is returned for a retry that would run exactly as the last attempt.
var ErrNoChange = errors.New("retry changes nothing")

// Resolve applies a person's action to an escalated item: close, retry (a new attempt whose
// condition carries the person's input and budget) or cancel (also allowed on any open item).
// The item's total spend is never reset; raising a budget raises caps only.
func (s *Store) Resolve(ctx context.Context, id string, r workitems.Resolution) (*workitems.Item, error) {
	if r.At.IsZero() {
		r.At = s.Now().UTC()
	}
	if r.Actor == "" {
		return nil, fmt.Errorf("workitems: resolve %s: actor missing", id)
	}
	return s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		ev := workitems.Event{Type: workitems.EventResolved, Attempt: it.Attempt, Actor: r.Actor, Message: string(r.Action),
			Data: map[string]string{"action": string(r.Action)}}
		if r.Rule != "" {
			ev.Data["rule"] = string(r.Rule)
		}
		switch r.Action {
		case workitems.ResolveCancel:
			if err := guard(workitems.OpCancel, it, 0); err != nil {
				return nil, err
			}
			it.CancelReq = true
			it.Resolution = append(it.Resolution, r)
			return []workitems.Event{ev}, take(workitems.OpCancel, it, workitems.StateCancelled)
		case workitems.ResolveClose:
			if err := guard(workitems.OpResolveClose, it, 0); err != nil {
				return nil, err
			}
			it.Resolution = append(it.Resolution, r)
			return []workitems.Event{ev}, take(workitems.OpResolveClose, it, workitems.StateClosed)
		case workitems.ResolveRetry:
			if err := guard(workitems.OpResolveRetry, it, 0); err != nil {
				return nil, err
			}
			prev := it.Current()
			cond := workitems.Condition{}
			if prev != nil {
				cond = prev.Condition
			}
			if r.Input != "" {
				cond.Input = r.Input
			}
			cond.Budget = cond.Budget.Merge(r.Budget)
			it.ItemBudget = raise(it.ItemBudget, r.ItemBudget)
			next := workitems.Attempt{N: it.Attempt + 1, Condition: cond, State: workitems.AttemptQueued}
			if prev != nil {
				next.Changed = cond.Changes(prev.Condition)
			}
			next.Condition = withNextInput(it, next.Condition)
			if r.Input == "" && r.Budget.IsZero() && r.ItemBudget.IsZero() {
				return nil, fmt.Errorf("workitems: resolve %s: %w: give input or a budget", id, ErrNoChange)
			}
			if prev != nil && prev.State != workitems.AttemptDone {
				prev.State = workitems.AttemptDone // a waiting attempt a person retried from its pull request
			}
			it.Attempts = append(it.Attempts, next)
			it.Attempt = next.N
			it.Resolution = append(it.Resolution, r)
			it.Escalation = nil
			ev.Data["changed"] = strings.Join(next.Changed, ",")
			return []workitems.Event{ev}, take(workitems.OpResolveRetry, it, workitems.StateQueued)
		}
		return nil, fmt.Errorf("workitems: resolve %s: action %q is not one of %v", id, r.Action, workitems.AllResolutionActions())
	})
}

// raise lays o over b only where o is higher (a person never lowers spend already made).
func raise(b, o workitems.Budget) workitems.Budget {
	for _, k := range workitems.AllBudgetKinds() {
		if o.Cap(k) > b.Cap(k) {
			_ = b.Set(k, o.Cap(k))
		}
	}
	return b
}

// Fail moves an item to failed (an invariant broke: e.g. its template is gone).
func (s *Store) Fail(ctx context.Context, id string, f *Fence, reason string) (*workitems.Item, error) {
	return s.Update(ctx, id, f, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpFail, it, 0); err != nil {
			return nil, err
		}
		return []workitems.Event{{Type: workitems.EventWarning, Attempt: it.Attempt, Message: reason}}, take(workitems.OpFail, it, workitems.StateFailed)
	})
}
