package fleetview

import (
	"testing"

	"outerloop/workitems"
)

func TestRowCIAndReview(t *testing.T) {
	checks := func(s ...workitems.CheckState) []workitems.CheckResult {
		var out []workitems.CheckResult
		for _, st := range s {
			out = append(out, workitems.CheckResult{Name: string(st), State: st})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		it     workitems.Item
		ci     string
		review string
	}{
		{"nothing", workitems.Item{}, "-", ""},
		{"green", workitems.Item{Delivery: &workitems.Delivery{Checks: checks(workitems.CheckSuccess, workitems.CheckNeutral)}}, "success 2/2", ""},
		{"running", workitems.Item{Delivery: &workitems.Delivery{Checks: checks(workitems.CheckSuccess, workitems.CheckPending)}}, "pending 1/2", ""},
		{"red", workitems.Item{Delivery: &workitems.Delivery{Checks: checks(workitems.CheckPending, workitems.CheckFailure)}}, "failure 0/2", ""},
		{"waiting for CI", workitems.Item{Wait: &workitems.Wait{Kind: workitems.WaitCI}}, "pending", ""},
		{"waiting for a review", workitems.Item{Wait: &workitems.Wait{Kind: workitems.WaitReview},
			Delivery: &workitems.Delivery{Checks: checks(workitems.CheckSuccess)}}, "success 1/1", ReviewWaiting},
		{"changes requested", workitems.Item{Decisions: []workitems.Decision{{Outcome: workitems.OutcomeRetry, Rule: workitems.RuleChangesRequested}}}, "-", ReviewChangesRequested},
		{"approved", workitems.Item{Decisions: []workitems.Decision{
			{Outcome: workitems.OutcomeWait, Rule: workitems.RuleReviewPending, Wait: &workitems.WaitPlan{Kind: workitems.WaitReview}},
			{Outcome: workitems.OutcomeClose, Rule: "checks_passed"}}}, "-", ReviewApproved},
	} {
		var r Row
		fill(&r, &c.it)
		if r.CI.String() != c.ci || r.Review != c.review {
			t.Errorf("%s: CI %q review %q, want %q %q", c.name, r.CI, r.Review, c.ci, c.review)
		}
	}
}

// A repository whose branch a person holds shows who: a held delivery, or an obsolete one left
// open for them; a change built on their commit is not held.
func TestRowHeld(t *testing.T) {
	hold := &workitems.BranchHold{User: "Pat", SHA: "p"}
	open := &workitems.PullRequest{Number: 3, State: workitems.PROpen}
	for _, c := range []struct {
		outcome workitems.DeliveryOutcome
		held    bool
	}{{workitems.DeliveryHeld, true}, {workitems.DeliveryObsolete, true}, {workitems.DeliveryPRUpdated, false}} {
		var r Row
		fill(&r, &workitems.Item{Delivery: &workitems.Delivery{Outcome: c.outcome, PR: open, Held: hold}})
		if (r.Held != nil) != c.held {
			t.Errorf("%s: held %v, want %v", c.outcome, r.Held, c.held)
		}
	}
}
