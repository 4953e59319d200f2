package itemstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func alertItem(id string) *workitems.Item {
	it := newItem(id)
	it.Origin = workitems.Origin{Kind: workitems.OriginAlert, Actor: "alertmanager:outerloop",
		Alert: &workitems.AlertOrigin{Receiver: "outerloop", GroupKey: "g", Status: "firing"}}
	it.Attempts = []workitems.Attempt{{N: 1, State: workitems.AttemptQueued, Condition: workitems.Condition{Input: "alert facts"}}}
	it.Attempt = 1
	return it
}

var resolvedAt = time.Date(2026, 12, 7, 10, 10, 0, 0, time.UTC)

func TestAResolvedAlertCancelsItsQueuedItem(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Create(ctx, alertItem("q"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	it, eff, err := s.AlertResolved(ctx, "q", resolvedAt, "alertmanager:outerloop")
	if err != nil || eff != itemstore.AlertCancelled || it.State != workitems.StateCancelled || !slices.Contains(itemstore.AllAlertEffects(), eff) {
		t.Fatalf("effect %s, state %s, err %v", eff, it.State, err)
	}
	if it.Resolution[0].Input != "resolved before it started at 2026-12-07T10:10:00Z" {
		t.Errorf("reason %q", it.Resolution[0].Input)
	}
	// A repeat changes nothing.
	if _, eff, err := s.AlertResolved(ctx, "q", resolvedAt.Add(time.Minute), "x"); err != nil || eff != itemstore.AlertIgnored {
		t.Errorf("repeat: %s %v", eff, err)
	}
	// An item not made by an alert refuses.
	if err := s.Create(ctx, newItem("m"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AlertResolved(ctx, "m", resolvedAt, "x"); err == nil {
		t.Error("a manual item took an alert's resolution")
	}
	if _, _, err := s.AlertResolved(ctx, "none", resolvedAt, "x"); !errors.Is(err, workitems.ErrNotFound) {
		t.Errorf("a missing item: %v", err)
	}
}

func TestAResolvedAlertGoesIntoTheRunningItemsNextAttempt(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Create(ctx, alertItem("r"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f := mustLease(t, s, "r", 1)
	if _, _, err := s.StartAttempt(ctx, f, "w1"); err != nil {
		t.Fatal(err)
	}
	it, eff, err := s.AlertResolved(ctx, "r", resolvedAt, "alertmanager:outerloop")
	if err != nil || eff != itemstore.AlertNoted || it.State != workitems.StateRunning {
		t.Fatalf("effect %s, state %s, err %v", eff, it.State, err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	next := workitems.Condition{Input: "TestX failed"}
	it, err = s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "real_failure", Next: &next, Actor: "verifier"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := it.Current().Condition.Input
	if !strings.HasPrefix(in, "TestX failed\n\n") || !strings.Contains(in, "resolved at 2026-12-07T10:10:00Z") || len(it.NextInput) != 0 {
		t.Errorf("attempt 2's input %q, next input left %q", in, it.NextInput)
	}
	if got := eventTypes(t, s, "r"); !strings.Contains(strings.Join(got, " "), "alert_resolved") {
		t.Errorf("events %v lack alert_resolved", got)
	}
}
