package verify

import (
	"context"
	"strings"
	"testing"

	"outerloop/workitems"
)

// A change delivered through a forge: the local verification leaves CI out (DeferCI), and
// VerifyPushed reads it for exactly the pushed SHA.
func TestDeferredCIIsReadOnThePushedCommitOnly(t *testing.T) {
	t.Parallel()
	ws, _ := gitRepo(t, map[string]string{"a.txt": "a\n"})
	pushed := strings.Repeat("c", 40)
	src := &scriptedCI{steps: [][]CICheck{{{Name: "build", State: CISuccess, SHA: pushed},
		{Name: "test", State: CIFailure, SHA: pushed, Details: "TestAdd: got 1, want 5"}}}}
	v, _ := ciVerifier(src)
	tmpl := ciTemplate()
	tmpl.DoneCheck.Commands = []string{"true"}
	req := Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: ws, DeferCI: true}
	local, err := v.Verify(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if local.Decision.Outcome != workitems.OutcomeClose || local.Facts.CI != nil || src.calls != 0 {
		t.Fatalf("the local check must pass without reading CI: %s/%s, %d CI calls", local.Decision.Outcome, local.Decision.Rule, src.calls)
	}
	res, err := v.VerifyPushed(context.Background(), req, pushed)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Outcome != workitems.OutcomeRetry || res.Decision.Rule != "ci_failed" || res.Facts.CI.SHA != pushed {
		t.Fatalf("got %s/%s on %s", res.Decision.Outcome, res.Decision.Rule, res.Facts.CI.SHA)
	}
	in := res.Decision.Next.Input
	if !strings.Contains(in, "Failing CI checks: test") || !strings.Contains(in, "test: TestAdd: got 1, want 5") {
		t.Fatalf("the next input must name the failing check with its summary: %q", in)
	}

	// CI as the only evidence: the local check has nothing to refuse.
	only := ciTemplate()
	only.DoneCheck.Commands = nil
	local, err = v.Verify(context.Background(), Request{Template: only, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
		Exit: completed(), Workspace: ws, DeferCI: true})
	if err != nil || local.Decision.Outcome != workitems.OutcomeClose {
		t.Fatalf("CI-only template, deferred: %v %s/%s %v", err, local.Decision.Outcome, local.Decision.Rule, local.Decision.Reasons)
	}
	if _, err := v.VerifyPushed(context.Background(), Request{Template: template()}, pushed); err == nil {
		t.Fatal("VerifyPushed without done_check.ci must refuse")
	}
}
