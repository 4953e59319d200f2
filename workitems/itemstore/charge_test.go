package itemstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// chargeFixture is a store on a movable clock with one running item of template "tmpl".
type chargeFixture struct {
	s     *itemstore.Store
	clock *fakeclock.Clock
	fence *itemstore.Fence
	id    string
}

func newChargeFixture(t *testing.T) *chargeFixture {
	t.Helper()
	env := redistest.New(t)
	f := &chargeFixture{clock: fakeclock.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), id: "tmpl@charge"}
	f.s = itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(f.clock))
	ctx := context.Background()
	if err := f.s.Create(ctx, newItem(f.id), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f.fence = mustLease(t, f.s, f.id, 1)
	if _, _, err := f.s.StartAttempt(ctx, f.fence, "w1"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *chargeFixture) advance(d time.Duration) { f.clock.Advance(d) }

func (f *chargeFixture) daily(t *testing.T, day time.Time) float64 {
	t.Helper()
	v, err := f.s.DailyCost(context.Background(), "tmpl", day)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCheckpointsChargeTheSpendAsItHappens(t *testing.T) {
	t.Parallel()
	f := newChargeFixture(t)
	ctx := context.Background()
	day := f.clock.Now()
	steps := []struct {
		name      string
		spend     workitems.Spend
		wantDelta float64
		wantDaily float64
	}{
		{"the first checkpoint charges its spend", workitems.Spend{CostUSD: 0.5, InputTokens: 100, ModelCalls: 1}, 0.5, 0.5},
		{"the next charges only what it adds", workitems.Spend{CostUSD: 0.75, InputTokens: 150, ModelCalls: 2}, 0.25, 0.75},
		{"the same spend again charges nothing", workitems.Spend{CostUSD: 0.75, InputTokens: 150, ModelCalls: 2}, 0, 0.75},
		{"a lower spend never takes a charge back", workitems.Spend{CostUSD: 0.5, InputTokens: 150, ModelCalls: 2}, 0, 0.75},
	}
	for _, st := range steps {
		charged, delta, err := f.s.SaveChargedCheckpoint(ctx, f.fence, "tmpl", st.spend, []byte(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !near(delta.CostUSD, st.wantDelta) || !near(f.daily(t, day), st.wantDaily) || !near(charged.CostUSD, st.wantDaily) {
			t.Errorf("%s: delta %v charged %v daily %v, want delta %v and %v charged", st.name, delta.CostUSD, charged.CostUSD, f.daily(t, day), st.wantDelta, st.wantDaily)
		}
	}
	if got, _ := f.s.ChargedSpend(ctx, f.id, 1); got.InputTokens != 150 || got.ModelCalls != 2 || !near(got.CostUSD, 0.75) {
		t.Errorf("charged record %+v", got)
	}

	t.Run("and the daily cap sees it before the attempt exits", func(t *testing.T) {
		it := newItem("tmpl@next")
		if err := f.s.Create(ctx, it, itemstore.CreateLimits{DailyCostCap: 0.7}); !errors.Is(err, itemstore.ErrDailyCap) {
			t.Errorf("create under a $0.70 cap after $0.75 of checkpoints: %v, want ErrDailyCap", err)
		}
	})
}

func TestAResumedAttemptChargesOnlyWhatItAdds(t *testing.T) {
	t.Parallel()
	f := newChargeFixture(t)
	ctx := context.Background()
	day := f.clock.Now()
	if _, _, err := f.s.SaveChargedCheckpoint(ctx, f.fence, "tmpl", workitems.Spend{CostUSD: 0.75}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// Another worker takes the attempt over: its meter starts from the checkpoint's spend.
	old := f.fence
	f.fence = mustLease(t, f.s, f.id, 1)
	if _, resumed, err := f.s.StartAttempt(ctx, f.fence, "w2"); err != nil || !resumed {
		t.Fatalf("resume: %v %v", resumed, err)
	}
	prior, err := f.s.ChargedSpend(ctx, f.id, 1)
	if err != nil || !near(prior.CostUSD, 0.75) {
		t.Fatalf("charged at resume: %+v %v", prior, err)
	}

	t.Run("the fenced-out worker charges nothing", func(t *testing.T) {
		if _, _, err := f.s.SaveChargedCheckpoint(ctx, old, "tmpl", workitems.Spend{CostUSD: 5}, []byte(`{}`)); !errors.Is(err, workitems.ErrLeaseLost) {
			t.Fatalf("stale checkpoint: %v", err)
		}
		if _, err := f.s.RecordExit(ctx, old, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 5}, "", false); !errors.Is(err, workitems.ErrLeaseLost) {
			t.Fatalf("stale exit: %v", err)
		}
		if d := f.daily(t, day); !near(d, 0.75) {
			t.Errorf("daily cost %v after a fenced-out worker's writes, want 0.75", d)
		}
	})

	_, delta, err := f.s.SaveChargedCheckpoint(ctx, f.fence, "tmpl", prior.Add(workitems.Spend{CostUSD: 0.25}), []byte(`{}`))
	if err != nil || !near(delta.CostUSD, 0.25) || !near(f.daily(t, day), 1) {
		t.Fatalf("the resumed attempt's checkpoint: delta %v daily %v %v", delta.CostUSD, f.daily(t, day), err)
	}

	t.Run("and its exit charges only what no checkpoint charged", func(t *testing.T) {
		it, err := f.s.RecordExit(ctx, f.fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 1.5}, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if d := f.daily(t, day); !near(d, 1.5) {
			t.Errorf("daily cost %v after the exit, want 1.5 (the attempt's spend, once)", d)
		}
		if !near(it.Spend.CostUSD, 1.5) {
			t.Errorf("the item's spend %v, want 1.5", it.Spend.CostUSD)
		}
	})
}

func TestACheckpointChargesTheDayItIsWrittenOn(t *testing.T) {
	t.Parallel()
	f := newChargeFixture(t)
	ctx := context.Background()
	day1 := f.clock.Now()
	if _, _, err := f.s.SaveChargedCheckpoint(ctx, f.fence, "tmpl", workitems.Spend{CostUSD: 1}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	f.advance(12 * time.Hour) // past 00:00 UTC
	day2 := f.clock.Now()
	if _, _, err := f.s.SaveChargedCheckpoint(ctx, f.fence, "tmpl", workitems.Spend{CostUSD: 1.25}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RecordExit(ctx, f.fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 2}, "", false); err != nil {
		t.Fatal(err)
	}
	if d1, d2 := f.daily(t, day1), f.daily(t, day2); !near(d1, 1) || !near(d2, 1) {
		t.Errorf("day one %v, day two %v, want 1 and 1 (each day what was spent on it)", d1, d2)
	}
}

func TestAnExitWithoutCheckpointsChargesEverything(t *testing.T) {
	t.Parallel()
	f := newChargeFixture(t)
	if _, err := f.s.RecordExit(context.Background(), f.fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 0.4}, "", false); err != nil {
		t.Fatal(err)
	}
	if d := f.daily(t, f.clock.Now()); !near(d, 0.4) {
		t.Errorf("daily cost %v, want 0.4", d)
	}
	if _, _, err := f.s.SaveChargedCheckpoint(context.Background(), f.fence, "", workitems.Spend{}, nil); err == nil {
		t.Error("a charged checkpoint without a template was accepted")
	}
}

// BenchmarkCheckpointCharge is a fenced checkpoint write with the spend charged in the same Lua
// call, against the same write without a charge (the baseline).
func BenchmarkCheckpointCharge(b *testing.B) {
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
	state := []byte(`{"spend":{},"loop":{"step":1}}`)
	b.Run("uncharged(baseline)", func(b *testing.B) {
		for b.Loop() {
			if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: state}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("charged", func(b *testing.B) {
		spend := workitems.Spend{}
		for b.Loop() {
			spend.CostUSD += 0.001
			spend.InputTokens += 100
			if _, err := s.WriteChargedCheckpoint(ctx, f, itemstore.CheckpointWrite{State: state,
				Charge: &itemstore.Charge{Template: "tmpl", Spend: spend}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
