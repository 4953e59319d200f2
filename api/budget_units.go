package api

import (
	"encoding/json"
	"fmt"

	"outerloop/workitems"
)

// BudgetValues are caps by kind in a request body. A value is a number (seconds for wall_time)
// or a string in the config's units ("1h", "2.5"), read by the config's own decoder
// (workitems.ParseBudgetValue).
type BudgetValues map[string]float64

// UnmarshalJSON reads {kind: number | string}, naming a bad kind or value.
func (b *BudgetValues) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("budget: want an object of caps by kind: %w", err)
	}
	out := BudgetValues{}
	for k, v := range raw {
		var f float64
		if err := json.Unmarshal(v, &f); err == nil {
			out[k] = f
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("budget %s: %s is neither a number nor a string", k, v)
		}
		f, err := workitems.ParseBudgetValue(workitems.BudgetKind(k), s)
		if err != nil {
			return err
		}
		out[k] = f
	}
	*b = out
	return nil
}
