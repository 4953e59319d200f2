package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// TestSteerInputSurvivesACrashBeforeItsCheckpoint drains steer input through the handler's
// adapters, "crashes" before the checkpoint, and checks a new execution gets it again; once a
// checkpoint holds it, it is gone from the queue and never handed over twice.
func TestSteerInputSurvivesACrashBeforeItsCheckpoint(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	it := &workitems.Item{ID: "st", Template: "t", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "a"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 1}
	if err := store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	_ = store.Steer(ctx, "st", "prefer the smaller fix", "person")
	execution := func() (*steerSource, Checkpointer) {
		f, err := store.AcquireLease(ctx, "st", 1, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s := &steerSource{store: store, item: "st"}
		cp := NewFencedCheckpointer(store, f, NewMeter(workitems.Budget{}, workitems.Spend{}, nil), nil).(*fencedCheckpointer)
		cp.steer = s
		return s, cp
	}
	s1, _ := execution()
	if got, err := s1.Drain(ctx); err != nil || fmt.Sprint(got) != "[prefer the smaller fix]" {
		t.Fatalf("first drain %v %v", got, err)
	}
	if got, _ := s1.Drain(ctx); len(got) != 0 {
		t.Fatalf("a second drain before the checkpoint handed input over twice: %v", got)
	}
	// Crash: no checkpoint was written. The next execution is handed the input again.
	s2, cp2 := execution()
	got, err := s2.Drain(ctx)
	if err != nil || fmt.Sprint(got) != "[prefer the smaller fix]" {
		t.Fatalf("input lost by a crash before its checkpoint: %v %v", got, err)
	}
	_ = store.Steer(ctx, "st", "and the docs", "person")
	if err := cp2.Save(ctx, []byte(`{"pending_input":["prefer the smaller fix"]}`)); err != nil {
		t.Fatal(err)
	}
	if q, _ := store.PeekSteer(ctx, "st", 0); fmt.Sprint(q) != "[and the docs]" {
		t.Fatalf("queue after the checkpoint holding the first input: %v", q)
	}
	if got, _ := s2.Drain(ctx); fmt.Sprint(got) != "[and the docs]" {
		t.Fatalf("drain after the checkpoint: %v", got)
	}
}
