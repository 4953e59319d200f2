package itemstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// ChargeRunning only rises, charges the daily cost by what the cost rose, and a stale fence
// charges nothing.
func TestChargeRunningRisesOnlyAndIsFenced(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	if err := s.Create(ctx, newItem("tmpl@run"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.AcquireLease(ctx, "tmpl@run", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	charge := func(f *itemstore.Fence, wall time.Duration, usd float64) (itemstore.Charged, error) {
		return s.ChargeRunning(ctx, f, itemstore.Charge{Template: "tmpl", Spend: workitems.Spend{WallTime: workitems.Duration(wall), CostUSD: usd}})
	}
	if c, err := charge(f, 5*time.Second, 0.5); err != nil || c.Delta.WallTime.D() != 5*time.Second || c.Delta.CostUSD != 0.5 {
		t.Fatalf("first charge %+v %v", c, err)
	}
	if c, err := charge(f, 3*time.Second, 0.2); err != nil || c.Total.WallTime.D() != 5*time.Second || c.Delta != (workitems.Spend{}) {
		t.Fatalf("a lower reading lowered or charged: %+v %v", c, err)
	}
	if _, err := charge(f, 9*time.Second, 0.75); err != nil {
		t.Fatal(err)
	}
	_, err = s.AcquireLease(ctx, "tmpl@run", 1, "w", time.Minute) // the same holder re-acquires: a newer epoch
	if err != nil {
		t.Fatal(err)
	}
	if _, err := charge(f, time.Hour, 100); !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("a stale fence: %v, want ErrLeaseLost", err)
	}
	got, _ := s.ChargedSpend(ctx, "tmpl@run", 1)
	daily, _ := s.DailyCost(ctx, "tmpl", time.Now())
	if got.WallTime.D() != 9*time.Second || got.CostUSD != 0.75 || daily != 0.75 {
		t.Fatalf("charged %+v, daily %v; want 9s and 0.75 once", got, daily)
	}
}

// BenchmarkChargeRunning is the running charge the worker writes every lease renewal, against
// the lease renewal itself (the baseline it rides beside).
func BenchmarkChargeRunning(b *testing.B) {
	env := redistest.New(b)
	s := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	if err := s.Create(ctx, newItem("tmpl@bench"), itemstore.CreateLimits{}); err != nil {
		b.Fatal(err)
	}
	f, err := s.AcquireLease(ctx, "tmpl@bench", 1, "w", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("renew-lease(baseline)", func(b *testing.B) {
		for b.Loop() {
			if err := s.RenewLease(ctx, f, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("charge-running", func(b *testing.B) {
		spend := workitems.Spend{}
		for b.Loop() {
			spend.WallTime += workitems.Duration(5 * time.Second)
			if _, err := s.ChargeRunning(ctx, f, itemstore.Charge{Template: "tmpl", Spend: spend}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
