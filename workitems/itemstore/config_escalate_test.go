package itemstore_test

import (
	"context"
	"errors"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// TestAConfigChangeEscalatesAlongOpEscalate: EscalateConfigChange takes OpEscalate's edges
// (queued to escalated here) and is refused, with a *RefusedError of OpEscalate naming its
// sources, from a state outside them (verifying: the verifier decides there).
func TestAConfigChangeEscalatesAlongOpEscalate(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	d := workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: workitems.ConfigTemplateRemoved.Rule(), Summary: "template removed"}
	for _, id := range []string{"queued", "verifying"} {
		if err := s.Create(ctx, newItem(id), itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	it, err := s.EscalateConfigChange(ctx, mustLease(t, s, "queued", 1), workitems.ConfigTemplateRemoved, d)
	if err != nil || it.State != workitems.StateEscalated || it.Escalation == nil || it.Escalation.Reason != string(workitems.ConfigTemplateRemoved) {
		t.Fatalf("queued: %v, %+v", err, it)
	}

	f := mustLease(t, s, "verifying", 1)
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	_, err = s.EscalateConfigChange(ctx, f, workitems.ConfigTemplateRemoved, d)
	var refused *workitems.RefusedError
	if !errors.As(err, &refused) || refused.Op != workitems.OpEscalate || refused.State != workitems.StateVerifying ||
		!errors.Is(err, workitems.ErrInvalidTransition) {
		t.Fatalf("verifying: %v, want a *RefusedError of %s", err, workitems.OpEscalate)
	}
}
