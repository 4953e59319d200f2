package workitems

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseBudgetValue reads a cap written as in outerloop.yaml — wall_time as a duration ("1h",
// "90s"), cost_usd as a decimal ("2.5"), the counts as whole numbers — through the config's own
// decoder, so that a flag takes exactly what the config takes. A bare number is taken as
// seconds for wall_time, as the flags always did. It returns the value as Budget.Set takes it
// (seconds for wall time).
func ParseBudgetValue(k BudgetKind, v string) (float64, error) {
	if !slices.Contains(AllBudgetKinds(), k) {
		return 0, fmt.Errorf("budget: unknown kind %q (want one of %v)", k, AllBudgetKinds())
	}
	v = strings.TrimSpace(v)
	if k == BudgetWallTime {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			return f, nil
		}
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: string(k)},
		{Kind: yaml.ScalarNode, Value: v},
	}}
	var b Budget
	err := doc.Decode(&b)
	if counted := k != BudgetWallTime && k != BudgetCostUSD; counted && err == nil {
		_, err = strconv.ParseInt(v, 10, 64) // YAML would take 2.5 calls as 2
	}
	if err != nil || v == "" {
		return 0, fmt.Errorf("budget %s: %q is not %s", k, v, budgetUnit(k))
	}
	c := b.Cap(k)
	if c < 0 {
		return 0, fmt.Errorf("budget %s: %q is negative", k, v)
	}
	return c, nil
}

// budgetUnit says what a kind's value is written as.
func budgetUnit(k BudgetKind) string {
	switch k {
	case BudgetWallTime:
		return "a duration (90s, 30m, 1h) or a number of seconds"
	case BudgetCostUSD:
		return "a number of dollars (2.5)"
	}
	return "a whole number"
}
