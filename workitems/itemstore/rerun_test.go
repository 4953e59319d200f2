package itemstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func TestCreateRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	orig := newItem("orig")
	orig.Attempts = []workitems.Attempt{{N: 1, Condition: workitems.Condition{Input: "first input"}, State: workitems.AttemptQueued}}
	if err := s.Create(ctx, orig, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	rerun := func(id string) *workitems.Item {
		it := newItem(id)
		it.Attempts = []workitems.Attempt{{N: 1, Condition: workitems.Condition{Input: "first input"}, State: workitems.AttemptQueued}}
		return it
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		got, _ := s.Get(ctx, "orig")
		if n, _ := s.Count(ctx, itemstore.ListOptions{}); n != 1 || got.Version != orig.Version {
			t.Errorf("a refused rerun changed something: %d items, original version %d", n, got.Version)
		}
	}
	t.Run("RefusesAnOpenItem", func(t *testing.T) {
		err := s.CreateRerun(ctx, "orig", rerun("r0"), itemstore.CreateLimits{})
		if !errors.Is(err, itemstore.ErrStillOpen) || !errors.Is(err, workitems.ErrInvalidTransition) {
			t.Fatalf("err %v, want ErrStillOpen (an invalid transition)", err)
		}
		unchanged(t)
	})
	if _, err := s.Fail(ctx, "orig", nil, "broken"); err != nil {
		t.Fatal(err)
	}
	orig, _ = s.Get(ctx, "orig")
	t.Run("RefusesAnotherTemplate", func(t *testing.T) {
		it := rerun("r1")
		it.Template = "other"
		if err := s.CreateRerun(ctx, "orig", it, itemstore.CreateLimits{}); err == nil {
			t.Fatal("a rerun under another template was stored")
		}
		unchanged(t)
	})
	t.Run("RefusesAnUnknownItem", func(t *testing.T) {
		if err := s.CreateRerun(ctx, "nope", rerun("r2"), itemstore.CreateLimits{}); !errors.Is(err, workitems.ErrNotFound) {
			t.Fatalf("err %v", err)
		}
		unchanged(t)
	})
	t.Run("LinksAFailedItemAndItsRerunBothWays", func(t *testing.T) {
		if err := s.CreateRerun(ctx, "orig", rerun("r3"), itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, "orig")
		re, err := s.Get(ctx, "r3")
		if err != nil || re.RerunOf != "orig" || re.State != workitems.StateQueued || !slices.Equal(got.Reruns, []string{"r3"}) ||
			got.State != workitems.StateFailed {
			t.Fatalf("rerun %+v %v; original reruns %v state %s", re, err, got.Reruns, got.State)
		}
		if ev := eventTypes(t, s, "orig"); ev[len(ev)-1] != string(workitems.EventRerun) {
			t.Errorf("original's events %v: want a rerun event last", ev)
		}
		if open, _ := s.OpenCount(ctx, "tmpl"); open != 1 {
			t.Errorf("open count %d, want the rerun", open)
		}
	})
	t.Run("RefusesAnIDInUse", func(t *testing.T) {
		if err := s.CreateRerun(ctx, "orig", rerun("r3"), itemstore.CreateLimits{}); !errors.Is(err, workitems.ErrExists) {
			t.Fatalf("err %v", err)
		}
		if got, _ := s.Get(ctx, "orig"); len(got.Reruns) != 1 {
			t.Errorf("reruns %v after a refused rerun", got.Reruns)
		}
	})
}
