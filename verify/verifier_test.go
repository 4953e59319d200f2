package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newTestVerifier() *Verifier {
	return New(WithClock(fakeclock.New(testNow)))
}

// fixtureCmd is a done-check command that replays a recorded report and exits with code.
func fixtureCmd(t *testing.T, fixture string, code int) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	return "cat '" + abs + "'; exit " + string(rune('0'+code))
}

func template(cmds ...string) *config.Template {
	return &config.Template{
		Name:        "fix-tests",
		MaxAttempts: 3,
		DoneCheck:   config.DoneCheck{Commands: cmds, Format: "auto", Timeout: workitems.Duration(time.Minute)},
		Retry:       config.Retry{SameFailureLimit: 2, InfraRetries: 1},
	}
}

func item(attempts ...workitems.Attempt) *workitems.Item {
	it := &workitems.Item{ID: "fix-tests@1", Template: "fix-tests", Attempts: attempts}
	if len(attempts) > 0 {
		it.Attempt = attempts[len(attempts)-1].N
	}
	return it
}

func completed() workitems.Exit { return workitems.Exit{Reason: workitems.ExitCompleted} }

func TestVerifyExitReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		reason  workitems.ExitReason
		outcome workitems.Outcome
		rule    workitems.RuleName
	}{
		{workitems.ExitBudgetExhausted, workitems.OutcomeEscalate, "exit_budget_exhausted"},
		{workitems.ExitNeedsInput, workitems.OutcomeEscalate, "exit_needs_input"},
		{workitems.ExitNeedsApproval, workitems.OutcomeEscalate, "exit_needs_approval"},
		{workitems.ExitFailed, workitems.OutcomeEscalate, "exit_failed"},
		{workitems.ExitNoProgress, workitems.OutcomeEscalate, "exit_no_progress"},
		{workitems.ExitAborted, workitems.OutcomeEscalate, "exit_aborted"},
		{workitems.ExitTransientError, workitems.OutcomeRetry, "exit_transient_error"},
		{"bogus", workitems.OutcomeEscalate, "exit_unknown"},
	}
	for _, c := range cases {
		t.Run("an attempt that exited "+string(c.reason)+" is decided without running the check", func(t *testing.T) {
			t.Parallel()
			// A done check that would fail loudly if it ran.
			tmpl := template("echo must-not-run; exit 9")
			res, err := newTestVerifier().Verify(context.Background(), Request{
				Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
				Exit: workitems.Exit{Reason: c.reason, Message: "model said so", Budget: workitems.BudgetCostUSD},
			})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Decision
			if d.Outcome != c.outcome || d.Rule != c.rule {
				t.Fatalf("got %s/%s, want %s/%s (%v)", d.Outcome, d.Rule, c.outcome, c.rule, d.Reasons)
			}
			if len(res.Facts.Commands) != 0 {
				t.Fatalf("the done check ran: %+v", res.Facts.Commands)
			}
			if d.Actor != "verifier" || !d.At.Equal(testNow) {
				t.Fatalf("actor/at: %q %v", d.Actor, d.At)
			}
			if c.outcome == workitems.OutcomeRetry {
				if d.Next == nil || !d.Next.NotBefore.After(testNow) {
					t.Fatalf("a transient retry must wait: %+v", d.Next)
				}
			}
		})
	}
}

func TestVerifyCompleted(t *testing.T) {
	t.Parallel()
	t.Run("a green go test -json report closes the item", func(t *testing.T) {
		t.Parallel()
		res := verifyFixture(t, "gojson/pass.json", 0, item(workitems.Attempt{N: 1}), 1)
		if res.Decision.Outcome != workitems.OutcomeClose || res.Decision.Rule != "all_green" {
			t.Fatalf("got %+v", res.Decision)
		}
		if res.Verdict.Passed != 4 || res.Verdict.Skipped != 1 {
			t.Fatalf("verdict %+v", res.Verdict)
		}
	})
	t.Run("a failing report retries with the first error and failing ids in the input", func(t *testing.T) {
		t.Parallel()
		res := verifyFixture(t, "gojson/fail.json", 1, item(workitems.Attempt{N: 1}), 1)
		d := res.Decision
		if d.Outcome != workitems.OutcomeRetry || d.Rule != "tests_failed" {
			t.Fatalf("got %+v", d)
		}
		if d.Next == nil || !strings.Contains(d.Next.Input, "fixtures/fail.TestWrongSum") ||
			!strings.Contains(d.Next.Input, "sum = 3, want 4") {
			t.Fatalf("next input: %+v", d.Next)
		}
		if d.Signature == "" {
			t.Fatal("a failure needs a signature")
		}
		if res.Verdict.FirstError == "" || len(res.Verdict.FailedTests) != 3 {
			t.Fatalf("verdict %+v", res.Verdict)
		}
	})
	t.Run("a build failure retries with the compiler error", func(t *testing.T) {
		t.Parallel()
		res := verifyFixture(t, "gojson/depbuild.json", 1, item(workitems.Attempt{N: 1}), 1)
		if res.Decision.Rule != "build_failed" || !strings.Contains(res.Decision.Next.Input, "undefined: undefinedName") {
			t.Fatalf("got %+v", res.Decision)
		}
	})
	t.Run("zero tests never close", func(t *testing.T) {
		t.Parallel()
		res := verifyFixture(t, "gojson/notests.json", 0, item(workitems.Attempt{N: 1}), 1)
		if res.Decision.Outcome == workitems.OutcomeClose || res.Decision.Rule != "zero_tests" {
			t.Fatalf("got %+v", res.Decision)
		}
	})
	t.Run("a green report with a non-zero exit code never closes", func(t *testing.T) {
		t.Parallel()
		res := verifyFixture(t, "gojson/pass.json", 1, item(workitems.Attempt{N: 1}), 1)
		if res.Decision.Outcome == workitems.OutcomeClose || res.Decision.Rule != "command_failed" {
			t.Fatalf("got %+v", res.Decision)
		}
	})
	t.Run("the last attempt escalates with the evidence summary", func(t *testing.T) {
		t.Parallel()
		it := item(workitems.Attempt{N: 1, Decision: &workitems.Decision{Signature: "other"}},
			workitems.Attempt{N: 2, Decision: &workitems.Decision{Signature: "x"}},
			workitems.Attempt{N: 3, Condition: workitems.Condition{Input: "try harder"}})
		res := verifyFixture(t, "gojson/fail.json", 1, it, 3)
		if res.Decision.Outcome != workitems.OutcomeEscalate || res.Decision.Rule != "max_attempts" {
			t.Fatalf("got %+v", res.Decision)
		}
		if !strings.Contains(res.Decision.Summary, "3 failed") {
			t.Fatalf("summary %q", res.Decision.Summary)
		}
	})
	t.Run("the same failure twice in a row escalates", func(t *testing.T) {
		t.Parallel()
		first := verifyFixture(t, "gojson/fail.json", 1, item(workitems.Attempt{N: 1}), 1)
		it := item(workitems.Attempt{N: 1, Decision: &first.Decision},
			workitems.Attempt{N: 2, Condition: *first.Decision.Next})
		res := verifyFixture(t, "gojson/fail.json", 1, it, 2)
		if res.Decision.Rule != "same_failure_repeated" {
			t.Fatalf("got %+v", res.Decision)
		}
	})
	t.Run("a retry whose condition equals the current one is refused", func(t *testing.T) {
		t.Parallel()
		first := verifyFixture(t, "gojson/fail.json", 1, item(workitems.Attempt{N: 1}), 1)
		// The second attempt already ran with this failure's input and the other-approach
		// variant; the previous decision had another signature, so only the unchanged-condition
		// guard fires.
		it := item(workitems.Attempt{N: 1, Decision: &workitems.Decision{Signature: "different"}},
			workitems.Attempt{N: 2, Condition: workitems.Condition{Input: first.Decision.Next.Input + "\n\n" + againNote,
				Strategy: workitems.Strategy{PromptVariant: "another-approach"}}})
		res := verifyFixture(t, "gojson/fail.json", 1, it, 2)
		if res.Decision.Rule != "unchanged_retry_refused" || res.Decision.Outcome != workitems.OutcomeEscalate {
			t.Fatalf("got %+v", res.Decision)
		}
	})
}

func verifyFixture(t *testing.T, fixture string, code int, it *workitems.Item, attempt int) Result {
	t.Helper()
	res, err := newTestVerifier().Verify(context.Background(), Request{
		Template: template(fixtureCmd(t, fixture, code)), Item: it, Attempt: attempt,
		Exit: completed(), Workspace: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestVerifyRealGoModule runs a real `go test -json` in a workspace: failing, then fixed.
func TestVerifyRealGoModule(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	ws := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module demo\n\ngo 1.26\n")
	write("sum.go", "package demo\n\nfunc Sum(a, b int) int { return a - b }\n")
	write("sum_test.go", "package demo\n\nimport \"testing\"\n\nfunc TestSum(t *testing.T) {\n\tif Sum(2, 2) != 4 {\n\t\tt.Fatalf(\"Sum(2, 2) = %d\", Sum(2, 2))\n\t}\n}\n")
	tmpl := template("go test -json ./...")
	v := newTestVerifier()
	res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}),
		Attempt: 1, Exit: completed(), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Outcome != workitems.OutcomeRetry || !strings.Contains(res.Decision.Next.Input, "demo.TestSum") {
		t.Fatalf("failing module: %+v", res.Decision)
	}
	passed, summary, err := v.Check(context.Background(), tmpl, ws)
	if err != nil || passed {
		t.Fatalf("Check on a failing module: %v %q %v", passed, summary, err)
	}
	write("sum.go", "package demo\n\nfunc Sum(a, b int) int { return a + b }\n")
	res, err = v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}),
		Attempt: 2, Exit: completed(), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Outcome != workitems.OutcomeClose {
		t.Fatalf("fixed module: %+v", res.Decision)
	}
	if passed, summary, err := v.Check(context.Background(), tmpl, ws); err != nil || !passed {
		t.Fatalf("Check on a fixed module: %v %q %v", passed, summary, err)
	}
}
