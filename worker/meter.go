package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"outerloop/workitems"
)

// ErrBudgetExhausted is matched by every *BudgetError.
var ErrBudgetExhausted = errors.New("budget exhausted")

// BudgetError says which cap was reached.
type BudgetError struct {
	Kind  workitems.BudgetKind
	Spent float64
	Cap   float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget %s exhausted: %g of %g", e.Kind, e.Spent, e.Cap)
}

// Is makes errors.Is(err, ErrBudgetExhausted) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// Meter charges an attempt's spend against its budget. Wall time runs from the meter's start
// plus whatever earlier executions of the attempt already used (a resumed attempt does not get
// its time back). It is safe for concurrent use.
type Meter struct {
	mu     sync.Mutex
	budget workitems.Budget
	spent  workitems.Spend // excluding the running wall-time segment
	start  time.Time
	clock  workitems.Clock // reads the spend's wall time and times its deadline
}

// NewMeter starts a meter for budget b, with prior spend already charged, whose spend, wall
// time and deadline all run on clock c (the handler's one clock; nil: the system clock), so
// that a fake clock moves every wall-time budget.
func NewMeter(b workitems.Budget, prior workitems.Spend, c workitems.Clock) *Meter {
	if c == nil {
		c = workitems.SystemClock{}
	}
	return &Meter{budget: b, spent: prior, start: c.Now(), clock: c}
}

// Budget returns the caps.
func (m *Meter) Budget() workitems.Budget { return m.budget }

// Spent returns the spend so far, wall time included.
func (m *Meter) Spent() workitems.Spend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spentLocked()
}

func (m *Meter) spentLocked() workitems.Spend {
	s := m.spent
	s.WallTime += workitems.Duration(m.clock.Now().Sub(m.start))
	return s
}

// Add charges s and reports a *BudgetError when a cap is reached (the spend is charged anyway:
// it happened).
func (m *Meter) Add(s workitems.Spend) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.WallTime = 0 // wall time is measured, not charged
	m.spent = m.spent.Add(s)
	return m.checkLocked()
}

// Check reports a *BudgetError when any cap, wall time included, is reached.
func (m *Meter) Check() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkLocked()
}

func (m *Meter) checkLocked() error {
	s := m.spentLocked()
	if k, over := m.budget.Exceeded(s); over {
		return &BudgetError{Kind: k, Spent: s.Of(k), Cap: m.budget.Cap(k)}
	}
	return nil
}

// Allow reports a *BudgetError when an action that spends the given kinds may not start: one
// of them, or the wall time or steps that every action spends, is at its cap. A kind the
// action does not spend does not stop it: a model request may still show the model the output
// of the last tool call it paid for when tool_calls is used up, and a response's tool call may
// still run when model_calls is.
func (m *Meter) Allow(kinds ...workitems.BudgetKind) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spentLocked()
	for _, k := range append([]workitems.BudgetKind{workitems.BudgetWallTime, workitems.BudgetSteps}, kinds...) {
		if c := m.budget.Cap(k); c > 0 && s.Of(k) >= c {
			return &BudgetError{Kind: k, Spent: s.Of(k), Cap: c}
		}
	}
	return nil
}

// ModelKinds are what one model request spends (for Allow).
func ModelKinds() []workitems.BudgetKind {
	return []workitems.BudgetKind{workitems.BudgetModelCalls, workitems.BudgetInputTokens,
		workitems.BudgetOutputTokens, workitems.BudgetCostUSD}
}

// Near returns the first kind past frac of its cap, or of a counted kind (model and tool
// calls) with at most one left, so that a small cap still gets its wrap-up notice on the last
// allowed step (80% of 3 calls is the third, when it is too late to say so).
func (m *Meter) Near(frac float64) (workitems.BudgetKind, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.spentLocked()
	for _, k := range []workitems.BudgetKind{workitems.BudgetModelCalls, workitems.BudgetToolCalls} {
		if c := m.budget.Cap(k); c > 0 && c-s.Of(k) <= 1 {
			return k, true
		}
	}
	return m.budget.Near(s, frac)
}

// Remaining returns what is left of one kind (0 when uncapped or used up).
func (m *Meter) Remaining(k workitems.BudgetKind) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.budget.Cap(k)
	if c == 0 {
		return 0
	}
	return max(0, c-m.spentLocked().Of(k))
}

// WallTimeLeft returns how long the wall-time budget (less the verify reserve) has left on the
// meter's clock, never less than zero, and false when wall time is not capped.
func (m *Meter) WallTimeLeft() (time.Duration, bool) {
	d, ok := m.Deadline()
	if !ok {
		return 0, false
	}
	return max(0, d.Sub(m.clock.Now())), true
}

// WallTimeUp returns a channel that receives when the wall-time budget runs out on the meter's
// clock, and false when wall time is not capped.
func (m *Meter) WallTimeUp() (<-chan time.Time, bool) {
	left, ok := m.WallTimeLeft()
	if !ok {
		return nil, false
	}
	return m.clock.After(left), true
}

// DeadlineContext returns ctx cancelled with cause when the wall-time budget runs out on the
// meter's clock (ctx itself, with a no-op cancel, when wall time is not capped). The caller
// must call the cancel function, which also stops the wait.
func (m *Meter) DeadlineContext(ctx context.Context, cause error) (context.Context, context.CancelFunc) {
	left, ok := m.WallTimeLeft()
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	fire := m.clock.After(left)
	go func() {
		select {
		case <-fire:
			cancel(cause)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Deadline returns when the wall-time budget (less the verify reserve) runs out.
func (m *Meter) Deadline() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.budget.WallTime == 0 {
		return time.Time{}, false
	}
	left := m.budget.WallTime.D() - m.budget.VerifyReserve.D() - m.spent.WallTime.D()
	return m.start.Add(left), true
}
