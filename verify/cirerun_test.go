package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
)

// A wake whose read asked CI to re-run checks that failed for infrastructure reasons waits for
// them by the table's ci_rerun row, with the count carried into the wait; a read that asked for
// nothing more is decided on the checks as they are (an infrastructure failure is a failure).
func TestCIReRunsAskedForByAWakeAreWaitedForByTheTable(t *testing.T) {
	t.Parallel()
	v, _ := ciVerifier(&scriptedCI{})
	tmpl := ciTemplate()
	tmpl.Retry.InfraRetries = 2
	sha := strings.Repeat("d", 40)
	deadline := time.Now().Add(time.Hour)
	ci := &CIEvidence{SHA: sha, Required: []string{"build", "test"}, Checks: []CICheck{
		{Name: "build", State: CISuccess, SHA: sha}, {Name: "test", State: CIInfraError, SHA: sha}}}
	local := workitems.Decision{Outcome: workitems.OutcomeClose, Rule: workitems.RuleChecksPassed}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, PushedSHA: sha,
		PR: &workitems.PullRequest{Number: 3, State: workitems.PROpen}}
	judge := func(before, now int) workitems.Decision {
		w := &workitems.Wait{Kind: workitems.WaitCI, Attempt: 1, Deadline: deadline, InfraReruns: before}
		return v.Judge(context.Background(), Judgement{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
			Local: &local, Delivery: del, CI: ci, CIDeadline: deadline, Wait: w, CIReruns: now})
	}
	for _, c := range []struct {
		name        string
		before, now int
		rule        workitems.RuleName
		outcome     workitems.Outcome
	}{
		{"first re-run asked", 0, 1, workitems.RuleCIRerun, workitems.OutcomeWait},
		{"second re-run asked", 1, 2, workitems.RuleCIRerun, workitems.OutcomeWait},
		{"no re-run left: the failure decides", 2, 2, workitems.RuleCIFailed, workitems.OutcomeRetry},
	} {
		d := judge(c.before, c.now)
		if d.Rule != c.rule || d.Outcome != c.outcome {
			t.Errorf("%s: %s/%s, want %s/%s (%v)", c.name, d.Outcome, d.Rule, c.outcome, c.rule, d.Reasons)
			continue
		}
		if c.outcome == workitems.OutcomeWait {
			if d.Wait == nil || d.Wait.Kind != workitems.WaitCI || d.Wait.InfraReruns != c.now || !d.Wait.Deadline.Equal(deadline) {
				t.Errorf("%s: wait %+v, want CI until the wait's deadline with %d re-runs", c.name, d.Wait, c.now)
			}
			if !strings.Contains(strings.Join(d.Reasons, "; "), "CI check test: infra_error") {
				t.Errorf("%s: the reason must name the check re-run: %v", c.name, d.Reasons)
			}
		}
	}
	// At push time there is no wait, so nothing was re-run: the row never fires.
	if d := v.Judge(context.Background(), Judgement{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
		Local: &local, Delivery: del, CI: ci, CIDeadline: deadline, CIReruns: 1}); d.Rule == workitems.RuleCIRerun {
		t.Errorf("ci_rerun without a wait: %s", d.Rule)
	}
}
