package itemstore

import (
	"context"
	"fmt"

	"outerloop/workitems"
)

// EscalateConfigChange escalates an open item its template no longer fits (removed, or changed
// incompatibly: see config.Incompatible) with the reason in its headline, so it reaches the
// escalation inbox instead of failing unseen. The attempt that was about to run ends without
// having run (or, for an attempt resumed after its worker died, without going on); a person may
// cancel, close or retry it (a retry runs under the config then in force). The caller holds the
// attempt's lease (f), so no execution of it runs meanwhile; the item is queued, waiting to
// retry, or running (a resumed attempt whose worker died): OpEscalate's sources, any other state
// (or another attempt) is refused with a *RefusedError.
//
// d is the policy's decision on the change (verify's template_removed / template_incompatible
// rows); it must escalate.
func (s *Store) EscalateConfigChange(ctx context.Context, f *Fence, reason workitems.ConfigChangeReason, d workitems.Decision) (*workitems.Item, error) {
	if d.Outcome != workitems.OutcomeEscalate {
		return nil, fmt.Errorf("workitems: escalate %s for a config change: the decision is %s, not escalate", f.Item, d.Outcome)
	}
	summary := firstNonEmpty(d.Summary, joinReasons(d.Reasons))
	return s.Update(ctx, f.Item, f, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpEscalate, it, f.Attempt); err != nil {
			return nil, err
		}
		at := s.Now().UTC()
		d.Actor, d.At, d.Summary = workitems.ActorWorkerName, at, summary
		a := it.Current()
		a.State = workitems.AttemptDone
		a.EndedAt = at
		a.Decision = &d
		it.Decisions = append(it.Decisions, d)
		it.Escalation = &workitems.Escalation{Reason: string(reason), Summary: summary, At: at,
			Actions: []workitems.EscalationAction{workitems.SuggestCancel, workitems.SuggestRetry, workitems.SuggestClose}}
		return []workitems.Event{{Type: workitems.EventEscalated, Attempt: it.Attempt, Actor: workitems.ActorWorkerName, Message: summary,
			Data: map[string]string{"reason": string(reason)}}}, take(workitems.OpEscalate, it, workitems.StateEscalated)
	})
}
