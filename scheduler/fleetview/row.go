package fleetview

import "outerloop/workitems"

// The review states of a row (empty: no review is asked for or known).
const (
	ReviewWaiting          = "waiting"           // the item waits for the pull request's review
	ReviewPending          = "pending"           // fewer approvals than required so far
	ReviewChangesRequested = "changes_requested" // a reviewer asked for changes
	ReviewMissing          = "missing"           // the review wait ran out
	ReviewApproved         = "approved"          // the item closed with the review in hand
)

// fill sets a row's item columns from the item.
func fill(row *Row, it *workitems.Item) {
	row.Item, row.State, row.Outcome = it.ID, it.State, string(it.State)
	row.CostUSD, row.UpdatedAt = it.Spend.CostUSD, it.UpdatedAt
	var d *workitems.Decision
	if n := len(it.Decisions); n > 0 {
		d = &it.Decisions[n-1]
		if d.Rule != "" {
			row.Outcome += " (" + string(d.Rule) + ")"
		}
	}
	if it.Delivery != nil {
		row.PR = it.Delivery.PR
		row.CI = ciOf(it.Delivery.Checks)
		if it.Delivery.Outcome == workitems.DeliveryHeld || (it.Delivery.Outcome == workitems.DeliveryObsolete && it.Delivery.Held != nil) {
			row.Held = it.Delivery.Held
		}
	}
	// While CI is waited for, the checks read so far are incomplete: pending, unless one failed.
	if w := it.Wait; w != nil && w.Kind == workitems.WaitCI && (row.CI.State == "" || rank(row.CI.State) < 3) {
		row.CI.State = workitems.CheckPending
	}
	row.Review = reviewState(it, d)
}

// ciOf summarises checks: the worst state wins (failure over pending over success), and
// Passed counts the successful and neutral ones.
func ciOf(checks []workitems.CheckResult) CI {
	c := CI{Total: len(checks)}
	if c.Total == 0 {
		return CI{}
	}
	worst := 0
	for _, ch := range checks {
		r := rank(ch.State)
		if r == 0 {
			c.Passed++
		}
		if r > worst {
			worst, c.State = r, ch.State
		}
	}
	if worst == 0 {
		c.State = workitems.CheckSuccess
	}
	return c
}

// rank orders check states by how much they hold a change back.
func rank(s workitems.CheckState) int {
	switch s {
	case workitems.CheckSuccess, workitems.CheckNeutral:
		return 0
	case workitems.CheckPending, workitems.CheckStale, workitems.CheckUnknown:
		return 1
	case workitems.CheckCancelled, workitems.CheckActionRequired:
		return 2
	}
	return 3 // failure, infra_error
}

// reviewState reads the review from what the item knows: its wait, or the rule of its newest
// decision (the verifier's review rules; a close after a review wait means approved).
func reviewState(it *workitems.Item, d *workitems.Decision) string {
	if w := it.Wait; w != nil && w.Kind == workitems.WaitReview {
		return ReviewWaiting
	}
	if d == nil {
		return ""
	}
	switch d.Rule {
	case workitems.RuleReviewPending:
		return ReviewPending
	case workitems.RuleChangesRequested, workitems.RuleChangesRequestedEscalate, workitems.RuleReviewRoundsExhausted:
		return ReviewChangesRequested
	case workitems.RuleReviewMissing:
		return ReviewMissing
	}
	if d.Outcome == workitems.OutcomeClose && waitedForReview(it) {
		return ReviewApproved
	}
	return ""
}

// waitedForReview reports whether any decision of the item waited for a review.
func waitedForReview(it *workitems.Item) bool {
	for _, d := range it.Decisions {
		if d.Wait != nil && d.Wait.Kind == workitems.WaitReview {
			return true
		}
	}
	return false
}
