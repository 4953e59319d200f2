package workitems

import (
	"encoding/json"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a Go duration string ("90s", "30m") in YAML and JSON.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (use 90s, 30m, 2h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration", s)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%s is not a duration", b)
	}
	*d = Duration(n)
	return nil
}

// BudgetKind names one budget.
type BudgetKind string

// The budget kinds. Steps counts loop steps (a script command, an agent transition).
const (
	BudgetWallTime     BudgetKind = "wall_time"
	BudgetModelCalls   BudgetKind = "model_calls"
	BudgetToolCalls    BudgetKind = "tool_calls"
	BudgetInputTokens  BudgetKind = "input_tokens"
	BudgetOutputTokens BudgetKind = "output_tokens"
	BudgetCostUSD      BudgetKind = "cost_usd"
	BudgetSteps        BudgetKind = "steps"
)

// AllBudgetKinds lists every budget kind.
func AllBudgetKinds() []BudgetKind {
	return []BudgetKind{BudgetWallTime, BudgetModelCalls, BudgetToolCalls, BudgetInputTokens,
		BudgetOutputTokens, BudgetCostUSD, BudgetSteps}
}

// Budget caps spend. A zero field is no cap for that kind, except WallTime, which validation
// requires for attempt budgets (asynq's default 30-minute timeout must never apply).
// VerifyReserve is kept back from the wall time for the final done check.
type Budget struct {
	WallTime      Duration `yaml:"wall_time" json:"wall_time,omitempty"`
	ModelCalls    int64    `yaml:"model_calls" json:"model_calls,omitempty"`
	ToolCalls     int64    `yaml:"tool_calls" json:"tool_calls,omitempty"`
	InputTokens   int64    `yaml:"input_tokens" json:"input_tokens,omitempty"`
	OutputTokens  int64    `yaml:"output_tokens" json:"output_tokens,omitempty"`
	CostUSD       float64  `yaml:"cost_usd" json:"cost_usd,omitempty"`
	Steps         int64    `yaml:"steps" json:"steps,omitempty"`
	VerifyReserve Duration `yaml:"verify_reserve" json:"verify_reserve,omitempty"`
}

// Merge returns b with every non-zero field of o laid over it.
func (b Budget) Merge(o Budget) Budget {
	if o.WallTime != 0 {
		b.WallTime = o.WallTime
	}
	if o.ModelCalls != 0 {
		b.ModelCalls = o.ModelCalls
	}
	if o.ToolCalls != 0 {
		b.ToolCalls = o.ToolCalls
	}
	if o.InputTokens != 0 {
		b.InputTokens = o.InputTokens
	}
	if o.OutputTokens != 0 {
		b.OutputTokens = o.OutputTokens
	}
	if o.CostUSD != 0 {
		b.CostUSD = o.CostUSD
	}
	if o.Steps != 0 {
		b.Steps = o.Steps
	}
	if o.VerifyReserve != 0 {
		b.VerifyReserve = o.VerifyReserve
	}
	return b
}

// IsZero reports whether no cap is set.
func (b Budget) IsZero() bool { return b == Budget{} }

// Cap returns the cap of one kind as a float (0: none).
func (b Budget) Cap(k BudgetKind) float64 {
	switch k {
	case BudgetWallTime:
		return b.WallTime.D().Seconds()
	case BudgetModelCalls:
		return float64(b.ModelCalls)
	case BudgetToolCalls:
		return float64(b.ToolCalls)
	case BudgetInputTokens:
		return float64(b.InputTokens)
	case BudgetOutputTokens:
		return float64(b.OutputTokens)
	case BudgetCostUSD:
		return b.CostUSD
	case BudgetSteps:
		return float64(b.Steps)
	}
	return 0
}

// Set sets the cap of one kind from a float (seconds for wall time).
func (b *Budget) Set(k BudgetKind, v float64) error {
	if v < 0 {
		return fmt.Errorf("budget %s: %v is negative", k, v)
	}
	switch k {
	case BudgetWallTime:
		b.WallTime = Duration(time.Duration(v * float64(time.Second)))
	case BudgetModelCalls:
		b.ModelCalls = int64(v)
	case BudgetToolCalls:
		b.ToolCalls = int64(v)
	case BudgetInputTokens:
		b.InputTokens = int64(v)
	case BudgetOutputTokens:
		b.OutputTokens = int64(v)
	case BudgetCostUSD:
		b.CostUSD = v
	case BudgetSteps:
		b.Steps = int64(v)
	default:
		return fmt.Errorf("budget: unknown kind %q", k)
	}
	return nil
}

// Spend is what an attempt or an item has used.
type Spend struct {
	WallTime          Duration `json:"wall_time,omitempty"`
	ModelCalls        int64    `json:"model_calls,omitempty"`
	ToolCalls         int64    `json:"tool_calls,omitempty"`
	InputTokens       int64    `json:"input_tokens,omitempty"`
	CachedInputTokens int64    `json:"cached_input_tokens,omitempty"`
	OutputTokens      int64    `json:"output_tokens,omitempty"`
	CostUSD           float64  `json:"cost_usd,omitempty"`
	Steps             int64    `json:"steps,omitempty"`
}

// Add returns s + o.
func (s Spend) Add(o Spend) Spend {
	s.WallTime += o.WallTime
	s.ModelCalls += o.ModelCalls
	s.ToolCalls += o.ToolCalls
	s.InputTokens += o.InputTokens
	s.CachedInputTokens += o.CachedInputTokens
	s.OutputTokens += o.OutputTokens
	s.CostUSD += o.CostUSD
	s.Steps += o.Steps
	return s
}

// Sub returns s - o (the delta between two readings).
func (s Spend) Sub(o Spend) Spend {
	s.WallTime -= o.WallTime
	s.ModelCalls -= o.ModelCalls
	s.ToolCalls -= o.ToolCalls
	s.InputTokens -= o.InputTokens
	s.CachedInputTokens -= o.CachedInputTokens
	s.OutputTokens -= o.OutputTokens
	s.CostUSD -= o.CostUSD
	s.Steps -= o.Steps
	return s
}

// Of returns the spend of one kind as a float (seconds for wall time).
func (s Spend) Of(k BudgetKind) float64 {
	switch k {
	case BudgetWallTime:
		return s.WallTime.D().Seconds()
	case BudgetModelCalls:
		return float64(s.ModelCalls)
	case BudgetToolCalls:
		return float64(s.ToolCalls)
	case BudgetInputTokens:
		return float64(s.InputTokens)
	case BudgetOutputTokens:
		return float64(s.OutputTokens)
	case BudgetCostUSD:
		return s.CostUSD
	case BudgetSteps:
		return float64(s.Steps)
	}
	return 0
}

// Exceeded returns the first kind whose cap in b the spend s has reached.
func (b Budget) Exceeded(s Spend) (BudgetKind, bool) {
	for _, k := range AllBudgetKinds() {
		if c := b.Cap(k); c > 0 && s.Of(k) >= c {
			return k, true
		}
	}
	return "", false
}

// Near returns the first kind whose spend has passed frac (e.g. 0.8) of its cap.
func (b Budget) Near(s Spend, frac float64) (BudgetKind, bool) {
	for _, k := range AllBudgetKinds() {
		if c := b.Cap(k); c > 0 && s.Of(k) >= frac*c {
			return k, true
		}
	}
	return "", false
}
