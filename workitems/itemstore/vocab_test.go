package itemstore_test

import (
	"context"
	"slices"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// TestAttemptStatesMoveForwardThroughTheList follows one attempt through the store's named
// transitions and checks each state it takes is listed, in AllAttemptStates order.
func TestAttemptStatesMoveForwardThroughTheList(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Create(ctx, newItem("v"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	all := workitems.AllAttemptStates()
	last := -1
	see := func(step string) {
		t.Helper()
		it, err := s.Get(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(all, it.Attempts[0].State)
		if i < 0 || i < last {
			t.Fatalf("after %s attempt 1 is %q (listed at %d, before it %d)", step, it.Attempts[0].State, i, last)
		}
		last = i
	}
	see("create")
	f := mustLease(t, s, "v", 1)
	_, _, _ = s.StartAttempt(ctx, f, "w")
	see("start")
	_, _ = s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false)
	see("exit")
	_, _ = s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeClose, Actor: "verifier"}, nil)
	see("decision")
	if all[last] != workitems.AttemptDone {
		t.Fatalf("a decided attempt is %q", all[last])
	}
}

func TestResolveRefusesAnActionNotListed(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("r"), itemstore.CreateLimits{})
	if _, err := s.Resolve(ctx, "r", workitems.Resolution{Action: "reopen", Actor: "p"}); err == nil {
		t.Fatal("an unlisted action was applied")
	}
	if it, _ := s.Get(ctx, "r"); it.State != workitems.StateQueued || len(it.Resolution) != 0 {
		t.Fatalf("a refused action changed the item: %s %v", it.State, it.Resolution)
	}
}
