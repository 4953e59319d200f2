package config

import (
	"fmt"

	"outerloop/workitems"
)

// validateBudget names the first negative field of b.
func validateBudget(b workitems.Budget) error {
	for _, k := range workitems.AllBudgetKinds() {
		if b.Cap(k) < 0 {
			return fmt.Errorf("%s: must not be negative", k)
		}
	}
	if b.VerifyReserve < 0 {
		return fmt.Errorf("verify_reserve: must not be negative")
	}
	if b.WallTime != 0 && b.VerifyReserve >= b.WallTime {
		return fmt.Errorf("verify_reserve: %s leaves nothing of wall_time %s", b.VerifyReserve, b.WallTime)
	}
	return nil
}
