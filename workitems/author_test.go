package workitems

import (
	"testing"
)

func TestDeliveryVocabulariesAreDistinct(t *testing.T) {
	t.Parallel()
	check := func(name string, vals []string) {
		seen := map[string]bool{}
		for _, v := range vals {
			if v == "" || seen[v] {
				t.Errorf("%s: %q empty or repeated", name, v)
			}
			seen[v] = true
		}
	}
	var modes, outcomes, states, checks, steps []string
	for _, v := range AllDeliveryModes() {
		modes = append(modes, string(v))
	}
	for _, v := range AllDeliveryOutcomes() {
		outcomes = append(outcomes, string(v))
	}
	for _, v := range AllPRStates() {
		states = append(states, string(v))
	}
	for _, v := range AllCheckStates() {
		checks = append(checks, string(v))
	}
	for _, v := range AllDeliverySteps() {
		steps = append(steps, string(v))
	}
	check("modes", modes)
	check("outcomes", outcomes)
	check("pr states", states)
	check("check states", checks)
	check("steps", steps)
	if len(outcomes) != 10 || len(modes) != 3 || len(checks) != 9 {
		t.Fatalf("a vocabulary lost a value: %v %v %v", modes, outcomes, checks)
	}
	if DeliverPatch.NeedsForge() || !DeliverBranch.NeedsForge() || !DeliverPullRequest.NeedsForge() {
		t.Fatal("NeedsForge")
	}
}
