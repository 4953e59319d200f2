package main

import (
	"testing"

	"outerloop/workitems"
)

// TestEveryResolutionActionIsAResolveFlag: `outerloop resolve` takes each action a person may
// take (workitems.AllResolutionActions) as its flag, and the flag builds that action.
func TestEveryResolutionActionIsAResolveFlag(t *testing.T) {
	t.Parallel()
	c := resolveCmd(&globals{})
	for _, a := range workitems.AllResolutionActions() {
		if c.Flags().Lookup(string(a)) == nil {
			t.Errorf("resolve has no --%s", a)
		}
		req, err := resolveRequest(a == workitems.ResolveClose, a == workitems.ResolveRetry, a == workitems.ResolveCancel, "", nil)
		if err != nil || req.Action != string(a) {
			t.Errorf("--%s built %q, %v", a, req.Action, err)
		}
	}
}
