package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"outerloop/verify"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// checklistFormat registers parseChecklist (example_parser_test.go) as an evidence format: its
// name, how auto recognises it, its parser. A built-in format is one more line in
// BuiltinFormats and its name in workitems.AllReportFormats, so the config accepts it.
func checklistFormat() verify.Format {
	return verify.Format{
		Name:  "checklist",
		Title: "PASS/FAIL checklist",
		// A checklist opens with its first result: saying so (DetectOpens) lets it win over a
		// format that only finds its lines further in.
		Detect: func(head []byte) verify.Detection {
			if bytes.HasPrefix(head, []byte("PASS ")) || bytes.HasPrefix(head, []byte("FAIL ")) {
				return verify.DetectOpens
			}
			return verify.DetectNone
		},
		Parse: func(r io.Reader, source string, _ verify.Limits) (*verify.Report, error) {
			return parseChecklist(r, source)
		},
	}
}

// checklistCheck is a done check whose command writes a checklist report into the workspace.
func checklistCheck(format workitems.ReportFormat, lines ...string) *config.Template {
	return &config.Template{
		Name: "smoke", MaxAttempts: 3, Retry: config.Retry{SameFailureLimit: 2},
		DoneCheck: config.DoneCheck{
			Commands: []string{"printf '%s\\n' '" + strings.Join(lines, "' '") + "' > checklist.txt"},
			Reports:  []string{"checklist.txt"},
			Format:   format,
		},
	}
}

// verifyAttempt runs the verifier on attempt 1 of an item, as the worker does after an attempt.
func verifyAttempt(v *verify.Verifier, tmpl *config.Template, workspace string) (verify.Result, error) {
	it := &workitems.Item{ID: "smoke@1", Template: tmpl.Name, Attempt: 1, Attempts: []workitems.Attempt{{N: 1}}}
	return v.Verify(context.Background(), verify.Request{Template: tmpl, Item: it, Attempt: 1,
		Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Workspace: workspace})
}

// Adding an evidence format: register its parser with the built-in ones and give the verifier
// the registry; a done check that names the format (or says auto) is then decided on its
// reports like on any other: green closes, a failing test retries with its name.
func Example_evidenceFormat() {
	formats, err := verify.BuiltinFormats().With(checklistFormat())
	if err != nil {
		panic(err)
	}
	v := verify.New(verify.WithFormats(formats))
	ws, err := os.MkdirTemp("", "checklist-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(ws)

	green, err := verifyAttempt(v, checklistCheck("checklist", "PASS login", "PASS logout", "END 2"), ws)
	if err != nil {
		panic(err)
	}
	fmt.Println(green.Decision.Outcome, green.Decision.Rule, "—", green.Verdict.Summary)

	red, err := verifyAttempt(v, checklistCheck(verify.FormatAuto, "PASS login", "FAIL logout: session kept", "END 2"), ws)
	if err != nil {
		panic(err)
	}
	fmt.Println(red.Decision.Outcome, red.Decision.Rule, "— failing:", red.Verdict.FailedTests, "first error:", red.Verdict.FirstError)
	// Output:
	// close all_green — checklist checklist.txt: 2 tests, 2 passed, 0 failed, 0 errors, 0 skipped
	// retry tests_failed — failing: [logout] first error: logout: session kept
}

func TestARegisteredFormatIsDecidedLikeABuiltinOne(t *testing.T) {
	t.Parallel()
	formats, err := verify.BuiltinFormats().With(checklistFormat())
	if err != nil {
		t.Fatal(err)
	}
	green := []string{"PASS login", "PASS logout", "END 2"}
	red := []string{"PASS login", "FAIL logout: session kept", "END 2"}
	cut := []string{"PASS login", "PASS logout"}
	cases := []struct {
		name    string
		tmpl    *config.Template
		formats *verify.Formats
		outcome workitems.Outcome
		rule    workitems.RuleName
	}{
		{"a green report in the named format closes", checklistCheck("checklist", green...), formats, workitems.OutcomeClose, workitems.RuleAllGreen},
		{"a green report found by auto closes", checklistCheck(verify.FormatAuto, green...), formats, workitems.OutcomeClose, workitems.RuleAllGreen},
		{"a red report in the named format retries naming the failing test", checklistCheck("checklist", red...), formats, workitems.OutcomeRetry, workitems.RuleTestsFailed},
		{"a red report found by auto retries naming the failing test", checklistCheck(verify.FormatAuto, red...), formats, workitems.OutcomeRetry, workitems.RuleTestsFailed},
		{"a report cut before its END retries as truncated", checklistCheck("checklist", cut...), formats, workitems.OutcomeRetry, workitems.RuleReportTruncated},
		{"without the format registered the report is missing", checklistCheck(verify.FormatAuto, green...), verify.BuiltinFormats(), workitems.OutcomeRetry, workitems.RuleReportMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			res, err := verifyAttempt(verify.New(verify.WithFormats(c.formats)), c.tmpl, ws)
			if err != nil {
				t.Fatal(err)
			}
			d := res.Decision
			if d.Outcome != c.outcome || d.Rule != c.rule {
				t.Fatalf("decision %s/%s, want %s/%s (%v)", d.Outcome, d.Rule, c.outcome, c.rule, d.Reasons)
			}
			if c.rule == workitems.RuleReportMissing {
				return
			}
			if len(res.Facts.Reports) != 1 || res.Facts.Reports[0].Format != "checklist" || res.Facts.Reports[0].Source != "checklist.txt" {
				t.Fatalf("reports %+v", res.Facts.Reports)
			}
			if c.rule == workitems.RuleTestsFailed {
				if d.Next == nil || !strings.Contains(d.Next.Input, "logout") || !strings.Contains(d.Next.Input, "session kept") {
					t.Fatalf("the retry does not name the failing test: %+v", d.Next)
				}
			}
		})
	}
	t.Run("a command's output in the format is its report", func(t *testing.T) {
		t.Parallel()
		tmpl := checklistCheck(verify.FormatAuto)
		tmpl.DoneCheck.Reports = nil
		tmpl.DoneCheck.Commands = []string{"printf '%s\\n' 'PASS login' 'FAIL logout: session kept' 'END 2'"}
		res, err := verifyAttempt(verify.New(verify.WithFormats(formats)), tmpl, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decision; d.Outcome != workitems.OutcomeRetry || d.Rule != "tests_failed" || !slices.Equal(res.Verdict.FailedTests, []string{"logout"}) {
			t.Fatalf("decision %s/%s failing %v (%v)", d.Outcome, d.Rule, res.Verdict.FailedTests, d.Reasons)
		}
	})
}
