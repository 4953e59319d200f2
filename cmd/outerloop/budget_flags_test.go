package main

import (
	"strings"
	"testing"
)

// --budget takes the config's units (durations, decimals) through the config's decoder, and
// names what is wrong with a bad value.
func TestBudgetFlagsTakeTheConfigsUnits(t *testing.T) {
	t.Parallel()
	req, err := resolveRequest(false, true, false, "x", []string{"wall_time=1h", "cost_usd=2.5", "model_calls=40", "item.wall_time=90m", "item.cost_usd=30"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Budget["wall_time"] != 3600 || req.Budget["cost_usd"] != 2.5 || req.Budget["model_calls"] != 40 {
		t.Errorf("attempt caps %v", req.Budget)
	}
	if req.ItemBudget["wall_time"] != 5400 || req.ItemBudget["cost_usd"] != 30 {
		t.Errorf("item caps %v", req.ItemBudget)
	}
	if req, err := resolveRequest(false, true, false, "x", []string{"wall_time=600"}); err != nil || req.Budget["wall_time"] != 600 {
		t.Errorf("bare seconds: %v %v", req.Budget, err)
	}
	for flag, want := range map[string]string{
		"wall_time=soon":   "duration",
		"cost_usd=cheap":   "dollars",
		"model_calls=2.5":  "whole number",
		"dollars=3":        `unknown kind "dollars"`,
		"wall_time":        "KIND=VALUE",
		"cost_usd=-1":      "negative",
		"item.steps=a lot": "whole number",
	} {
		_, err := resolveRequest(false, true, false, "x", []string{flag})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), flag) {
			t.Errorf("--budget %s: %v, want an error naming the flag and %q", flag, err, want)
		}
	}
}
