package itemstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"outerloop/workitems"
)

// AlertEffect is what a resolved alert did to its item.
type AlertEffect string

// The effects of AlertResolved.
const (
	AlertCancelled AlertEffect = "cancelled" // queued, never started: cancelled
	AlertNoted     AlertEffect = "noted"     // open and under way: its next attempt is told
	AlertIgnored   AlertEffect = "ignored"   // already ended, or already told
)

// AllAlertEffects lists every AlertEffect.
func AllAlertEffects() []AlertEffect { return []AlertEffect{AlertCancelled, AlertNoted, AlertIgnored} }

// AlertResolved records that the alert group which made item id resolved at at, in one
// watched update: an item still queued for its first attempt (never started) is cancelled
// with the reason "resolved before it started at T"; any other open item goes on, and its
// next attempt's input says the alert resolved (Item.NextInput). Either way Origin.Alert
// records the time and an EventAlertResolved says what it did. A repeat changes nothing.
func (s *Store) AlertResolved(ctx context.Context, id string, at time.Time, actor string) (*workitems.Item, AlertEffect, error) {
	effect := AlertIgnored
	it, err := s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		effect = AlertIgnored
		al := it.Origin.Alert
		if al == nil {
			return nil, fmt.Errorf("workitems: item %s was not made by an alert", id)
		}
		if !al.ResolvedAt.IsZero() {
			return nil, nil
		}
		al.ResolvedAt = at.UTC()
		ts := al.ResolvedAt.Format(time.RFC3339)
		ev := workitems.Event{Type: workitems.EventAlertResolved, Attempt: it.Attempt, Actor: actor,
			Data: map[string]string{"resolved_at": ts, "group_key": al.GroupKey}}
		a := it.Current()
		switch {
		case it.State == workitems.StateQueued && it.Attempt == 1 && a != nil && a.State == workitems.AttemptQueued && a.StartedAt.IsZero():
			if err := guard(workitems.OpCancel, it, 0); err != nil {
				return nil, err
			}
			reason := "resolved before it started at " + ts
			it.CancelReq = true
			it.Resolution = append(it.Resolution, workitems.Resolution{Action: workitems.ResolveCancel, Actor: actor,
				Input: reason, At: s.Now().UTC()})
			effect, ev.Message, ev.Data["effect"] = AlertCancelled, "the alert "+reason, string(AlertCancelled)
			return []workitems.Event{ev}, take(workitems.OpCancel, it, workitems.StateCancelled)
		case it.State.Open():
			it.NextInput = append(it.NextInput, "The alert that made this item resolved at "+ts+
				" (Alertmanager). Check whether the cause is gone or only hidden before changing more.")
			effect, ev.Message, ev.Data["effect"] = AlertNoted, "the alert resolved at "+ts+"; the item goes on and its next attempt is told", string(AlertNoted)
			return []workitems.Event{ev}, nil
		}
		ev.Message, ev.Data["effect"] = "the alert resolved at "+ts+" after the item ended", string(AlertIgnored)
		return []workitems.Event{ev}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return it, effect, nil
}

// withNextInput adds the item's NextInput to a new attempt's input and clears it.
func withNextInput(it *workitems.Item, c workitems.Condition) workitems.Condition {
	if len(it.NextInput) == 0 {
		return c
	}
	parts := append([]string{}, it.NextInput...)
	if c.Input != "" {
		parts = append([]string{c.Input}, parts...)
	}
	c.Input = strings.Join(parts, "\n\n")
	it.NextInput = nil
	return c
}
