package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/workitems"
)

func TestMeterStopsAtEachCap(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind  workitems.BudgetKind
		b     workitems.Budget
		spend workitems.Spend
	}{
		{workitems.BudgetModelCalls, workitems.Budget{ModelCalls: 2}, workitems.Spend{ModelCalls: 1}},
		{workitems.BudgetToolCalls, workitems.Budget{ToolCalls: 2}, workitems.Spend{ToolCalls: 1}},
		{workitems.BudgetInputTokens, workitems.Budget{InputTokens: 100}, workitems.Spend{InputTokens: 50}},
		{workitems.BudgetOutputTokens, workitems.Budget{OutputTokens: 100}, workitems.Spend{OutputTokens: 50}},
		{workitems.BudgetCostUSD, workitems.Budget{CostUSD: 1}, workitems.Spend{CostUSD: 0.5}},
		{workitems.BudgetSteps, workitems.Budget{Steps: 2}, workitems.Spend{Steps: 1}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			c := fakeclock.New(time.Unix(0, 0))
			m := NewMeter(tc.b, workitems.Spend{}, c)
			if err := m.Add(tc.spend); err != nil {
				t.Fatalf("half the cap: %v", err)
			}
			if k, near := m.Near(0.5); !near || k != tc.kind {
				t.Fatalf("Near(0.5) = %s %v", k, near)
			}
			err := m.Add(tc.spend)
			var be *BudgetError
			if !errors.As(err, &be) || be.Kind != tc.kind || !errors.Is(err, ErrBudgetExhausted) {
				t.Fatalf("at the cap: %v", err)
			}
		})
	}
}

func TestMeterWallTimeCountsPriorSpendAndTheClock(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(time.Unix(1000, 0))
	// A resumed attempt already used 40s of its 60s.
	m := NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute)}, workitems.Spend{WallTime: workitems.Duration(40 * time.Second)}, c)
	if dl, ok := m.Deadline(); !ok || !dl.Equal(time.Unix(1020, 0)) {
		t.Fatalf("deadline %v", dl)
	}
	c.Advance(19 * time.Second)
	if err := m.Check(); err != nil {
		t.Fatalf("59s of 60s: %v", err)
	}
	if r := m.Remaining(workitems.BudgetWallTime); r < 0.99 || r > 1.01 {
		t.Fatalf("remaining %v", r)
	}
	c.Advance(time.Second)
	var be *BudgetError
	if err := m.Check(); !errors.As(err, &be) || be.Kind != workitems.BudgetWallTime {
		t.Fatalf("at 60s: %v", err)
	}
	if m.Spent().WallTime.D() != time.Minute {
		t.Fatalf("spent %v", m.Spent().WallTime)
	}
	// Charged wall time is ignored: wall time is measured.
	_ = m.Add(workitems.Spend{WallTime: workitems.Duration(time.Hour)})
	if m.Spent().WallTime.D() != time.Minute {
		t.Fatalf("charged wall time counted: %v", m.Spent().WallTime)
	}
}

func TestRegistryNamesUnknownLoops(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Register("script", InnerLoopFunc(func(_ context.Context, _ *Attempt) workitems.Exit { return workitems.Exit{} }))
	_, err := r.Lookup("robot")
	if !errors.Is(err, ErrUnknownLoop) || !strings.Contains(err.Error(), `"robot"`) || !strings.Contains(err.Error(), "script") {
		t.Fatalf("got %v", err)
	}
}

func TestMeterDeadlineRunsOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	c := fakeclock.New(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	m := NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute), VerifyReserve: workitems.Duration(10 * time.Second)},
		workitems.Spend{WallTime: workitems.Duration(20 * time.Second)}, c)
	if left, ok := m.WallTimeLeft(); !ok || left != 30*time.Second {
		t.Fatalf("left %v %v, want 30s", left, ok)
	}
	cause := errors.New("wall time")
	ctx, cancel := m.DeadlineContext(context.Background(), cause)
	defer cancel()
	c.BlockUntil(1, nil)
	c.Advance(29 * time.Second)
	if ctx.Err() != nil {
		t.Fatal("the deadline fired early")
	}
	c.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), cause) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if _, ok := NewMeter(workitems.Budget{}, workitems.Spend{}, c).WallTimeLeft(); ok {
		t.Fatal("an uncapped meter has a deadline")
	}
}
