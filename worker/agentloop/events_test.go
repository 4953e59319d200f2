package agentloop

import (
	"slices"
	"testing"

	"outerloop/workitems"
)

// TestTheLoopsEventKindsAreWorkitemsKinds: the loop's kinds are a part of the one vocabulary
// of event kinds (workitems.AllEventKinds), each listed once.
func TestTheLoopsEventKindsAreWorkitemsKinds(t *testing.T) {
	t.Parallel()
	for i, k := range AllEventKinds() {
		if !slices.Contains(workitems.AllEventKinds(), k) {
			t.Errorf("%s is not in workitems.AllEventKinds", k)
		}
		if slices.Index(AllEventKinds(), k) != i {
			t.Errorf("%s is listed twice", k)
		}
	}
}
