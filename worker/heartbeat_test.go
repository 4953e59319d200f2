package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func heartbeatFixture(t *testing.T, id string) (*itemstore.Store, *fakeclock.Clock, *itemstore.Fence) {
	t.Helper()
	env := redistest.New(t)
	clock := fakeclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	st := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	it := &workitems.Item{ID: id, Template: "t", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 1}
	if err := st.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := st.AcquireLease(ctx, id, 1, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return st, clock, f
}

// TestHeartbeatStopsTheAttemptWhenTheLeaseWasTakenOver: after another execution took the
// attempt over, the next renewal (on the injected clock) cancels the attempt with ErrLeaseLost
// and records one lease_lost event; Stop then returns.
func TestHeartbeatStopsTheAttemptWhenTheLeaseWasTakenOver(t *testing.T) {
	t.Parallel()
	st, clock, f := heartbeatFixture(t, "hb-lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hb := &Heartbeat{Store: st, Clock: clock, TTL: 30 * time.Second, Fence: f, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Cancel: cancel}
	hb.Start(ctx)
	defer hb.Stop()

	clock.BlockUntil(1, nil)
	clock.Advance(10 * time.Second) // a renewal while the lease is ours
	clock.BlockUntil(1, nil)
	if ctx.Err() != nil {
		t.Fatalf("a renewal of a held lease cancelled the attempt: %v", context.Cause(ctx))
	}
	if err := st.ReleaseLease(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(context.Background(), "hb-lost", 1, "B", time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), workitems.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(ctx))
	}
	evs, err := st.Events(context.Background(), "hb-lost", "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, e := range evs {
		if e.Type == workitems.EventLeaseLost {
			lost++
		}
	}
	if lost != 1 {
		t.Fatalf("%d lease_lost events, want 1", lost)
	}
}

// TestHeartbeatStopsTheAttemptOnACancelRequest: a person's cancel is seen at the next beat.
func TestHeartbeatStopsTheAttemptOnACancelRequest(t *testing.T) {
	t.Parallel()
	st, clock, f := heartbeatFixture(t, "hb-cancel")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	hb := &Heartbeat{Store: st, Clock: clock, TTL: 30 * time.Second, Fence: f, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Cancel: cancel}
	hb.Start(ctx)
	defer hb.Stop()
	if _, err := st.Resolve(context.Background(), "hb-cancel", workitems.Resolution{Action: workitems.ResolveCancel, Actor: "p"}); err != nil {
		t.Fatal(err)
	}
	clock.BlockUntil(1, nil)
	clock.Advance(10 * time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errCancelled) {
		t.Fatalf("cause %v, want the cancel", context.Cause(ctx))
	}
}
