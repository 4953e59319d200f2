package console

import (
	"testing"

	"outerloop/workitems"
)

// TestEveryEscalationActionReadsAsWords: the inbox shows each suggested action as words, not
// its raw value; an action added to the vocabulary without a label fails here.
func TestEveryEscalationActionReadsAsWords(t *testing.T) {
	t.Parallel()
	for _, a := range workitems.AllEscalationActions() {
		if got := actionLabel(a); got == string(a) || got == "" {
			t.Errorf("action %s reads %q", a, got)
		}
	}
}
