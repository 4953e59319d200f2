package main

import (
	"strings"
	"testing"

	"outerloop/workitems"
)

// `outerloop items ID` says who holds a branch outerloop pushed nothing to, and what a build
// was made on; a draft pull request says so.
func TestPrintDeliverySaysWhoHoldsTheBranch(t *testing.T) {
	t.Parallel()
	hold := &workitems.BranchHold{User: "Pat Person", SHA: "0123456789abcdef0123456789abcdef01234567", Commits: 1}
	var b strings.Builder
	printDelivery(&b, "", &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryHeld, Branch: "outerloop/bump",
		PR: &workitems.PullRequest{Number: 4, URL: "https://forge.example/o/r/pulls/4", State: workitems.PROpen, Draft: true}, Held: hold})
	out := b.String()
	for _, want := range []string{"held: Pat Person pushed 0123456789ab\n", "pull request #4 [open, draft]"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printDelivery(&b, "", &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPRUpdated, Branch: "outerloop/bump",
		PushedSHA: "89abcdef0123456789abcdef0123456789abcdef", Held: hold})
	if out := b.String(); !strings.Contains(out, "built on: Pat Person pushed 0123456789ab") || strings.Contains(out, "held:") {
		t.Errorf("a build on a person's commit:\n%s", out)
	}
}
