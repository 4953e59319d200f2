package workitems

import (
	"errors"
	"fmt"
	"testing"
)

// TestTransitionEveryEdge checks all 81 (from, to) pairs against the allowed list below, so that
// an edge added or removed by accident fails here.
func TestTransitionEveryEdge(t *testing.T) {
	t.Parallel()
	allowed := map[[2]State]bool{
		{StateQueued, StateRunning}: true, {StateQueued, StateEscalated}: true,
		{StateQueued, StateFailed}: true, {StateQueued, StateCancelled}: true,
		{StateRunning, StateVerifying}: true, {StateRunning, StateEscalated}: true,
		{StateRunning, StateFailed}: true, {StateRunning, StateCancelled}: true,
		{StateVerifying, StateClosed}: true, {StateVerifying, StateRetryWait}: true,
		{StateVerifying, StateEscalated}: true, {StateVerifying, StateFailed}: true,
		{StateVerifying, StateCancelled}: true, {StateVerifying, StateWaiting}: true,
		{StateWaiting, StateClosed}: true, {StateWaiting, StateRetryWait}: true,
		{StateWaiting, StateEscalated}: true, {StateWaiting, StateQueued}: true,
		{StateWaiting, StateFailed}: true, {StateWaiting, StateCancelled}: true,
		{StateRetryWait, StateQueued}: true, {StateRetryWait, StateEscalated}: true,
		{StateRetryWait, StateCancelled}: true,
		{StateEscalated, StateQueued}:    true, {StateEscalated, StateClosed}: true,
		{StateEscalated, StateCancelled}: true,
	}
	for _, from := range AllStates() {
		for _, to := range AllStates() {
			name := fmt.Sprintf("%s to %s", from, to)
			want := allowed[[2]State{from, to}]
			t.Run(name, func(t *testing.T) {
				got, err := Transition(from, to)
				if want {
					if err != nil || got != to {
						t.Fatalf("Transition(%s, %s) = %s, %v; want allowed", from, to, got, err)
					}
					return
				}
				if !errors.Is(err, ErrInvalidTransition) {
					t.Fatalf("Transition(%s, %s) err = %v; want ErrInvalidTransition", from, to, err)
				}
				var te *TransitionError
				if !errors.As(err, &te) || te.From != from || te.To != to || got != from {
					t.Fatalf("refused edge should name %s→%s and keep the state, got %v, %s", from, to, err, got)
				}
			})
		}
	}
}

func TestTerminalStatesHaveNoWayOut(t *testing.T) {
	t.Parallel()
	for _, s := range AllStates() {
		if s.Terminal() != (len(edges[s]) == 0) {
			t.Errorf("%s: Terminal()=%v but has %d edges", s, s.Terminal(), len(edges[s]))
		}
		if s.Terminal() == s.Open() {
			t.Errorf("%s: open and terminal must be opposites", s)
		}
	}
	if State("bogus").Valid() || State("bogus").Open() {
		t.Error("an unknown state must not be valid or open")
	}
}

func TestTaskIDRoundTrip(t *testing.T) {
	t.Parallel()
	id, n, err := ParseTaskID(TaskID("nightly@20260101T030000Z", 3))
	if err != nil || id != "nightly@20260101T030000Z" || n != 3 {
		t.Fatalf("round trip: %q %d %v", id, n, err)
	}
	for _, bad := range []string{"x", "x/attempt-", "x/attempt-0", "x/attempt-abc"} {
		if _, _, err := ParseTaskID(bad); err == nil {
			t.Errorf("ParseTaskID(%q) accepted", bad)
		}
	}
}

func TestConditionChangesNamesEveryField(t *testing.T) {
	t.Parallel()
	base := Condition{Input: "a", Env: map[string]string{"A": "1"}}
	cases := []struct {
		name string
		mod  func(*Condition)
		want string
	}{
		{"input", func(c *Condition) { c.Input = "b" }, "input"},
		{"env", func(c *Condition) { c.Env = map[string]string{"A": "2"} }, "env"},
		{"clean checkout", func(c *Condition) { c.CleanCheckout = true }, "clean_checkout"},
		{"model", func(c *Condition) { c.Strategy.Model = "m" }, "strategy.model"},
		{"prompt variant", func(c *Condition) { c.Strategy.PromptVariant = "stabilise" }, "strategy.prompt_variant"},
		{"budget", func(c *Condition) { c.Budget.CostUSD = 1 }, "budget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.Env = map[string]string{"A": "1"}
			tc.mod(&c)
			got := c.Changes(base)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("Changes = %v, want [%s]", got, tc.want)
			}
		})
	}
	if got := base.Changes(base); len(got) != 0 {
		t.Fatalf("identical conditions differ in %v", got)
	}
}

func TestAttemptBudgetIsClippedByWhatIsLeftOfTheItemBudget(t *testing.T) {
	t.Parallel()
	it := &Item{Budget: Budget{CostUSD: 5, WallTime: Duration(3600e9)}, ItemBudget: Budget{CostUSD: 6}, Spend: Spend{CostUSD: 4}}
	b := it.AttemptBudget(Condition{})
	if b.CostUSD != 2 {
		t.Fatalf("cost cap = %v, want 2 (6 item - 4 spent)", b.CostUSD)
	}
	it.Spend.CostUSD = 7
	if b := it.AttemptBudget(Condition{}); b.CostUSD <= 0 || b.CostUSD > 1e-6 {
		t.Fatalf("an exhausted item budget must leave a tiny positive cap, got %v", b.CostUSD)
	}
}
