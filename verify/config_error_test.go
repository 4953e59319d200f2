package verify

import (
	"strings"
	"testing"

	"outerloop/workitems"
)

// Configuration errors escalate at once (no retry) with the cause in the headline; failures an
// attempt can fix keep their rules.
func TestConfigurationErrorsEscalateAtOnceWithTheirCause(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		facts func(f *Facts)
		rule  workitems.RuleName
		want  string
	}{
		{"a done-check command that does not exist", func(f *Facts) {
			f.Reports = nil
			f.Commands = []CommandResult{{Command: "mkae test", ExitCode: 127, Tail: "sh: 1: mkae: not found\n"}}
		}, workitems.RuleConfigError, `done-check command "mkae test" not found (exit 127): sh: 1: mkae: not found`},
		{"a step command that does not exist", func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound,
				Message: "command 1 (gofmtt -w .) not found (exit 127)", LastMessage: "sh: 1: gofmtt: not found"}
		}, workitems.RuleConfigError, "command 1 (gofmtt -w .) not found (exit 127): sh: 1: gofmtt: not found"},
		{"a repo path that is missing", func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound,
				Message: `worker: repo "/srv/nope": no such directory`}
		}, workitems.RuleConfigError, `repo "/srv/nope": no such directory`},
		{"a provider key variable that is unset", func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission,
				Message: `execloop: provider "main": environment variable OPENAI_API_KEY is not set`}
		}, workitems.RuleConfigError, "OPENAI_API_KEY is not set"},
		{"zero tests on an unchanged tree", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Observed, r.Tests = Counts{}, nil })}
			f.Diff = &DiffEvidence{}
		}, workitems.RuleConfigError, "ran no tests"},
		{"zero tests after the attempt changed files stay a retry", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Observed, r.Tests = Counts{}, nil })}
			f.Diff = &DiffEvidence{Files: []DiffFile{{Path: "a_test.go"}}}
		}, "zero_tests", ""},
		{"a step that exits 1 stays exit_failed", func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown, Message: "command 1 (make) exited 1"}
		}, "exit_failed", ""},
		{"a done-check that exits 2 stays a retry", func(f *Facts) { f.Commands[0].ExitCode = 2 }, "command_failed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := baseFacts()
			c.facts(f)
			d := decide(f)
			if d.Rule != c.rule {
				t.Fatalf("rule %s (%v), want %s", d.Rule, d.Reasons, c.rule)
			}
			if c.rule != workitems.RuleConfigError {
				return
			}
			if d.Outcome != workitems.OutcomeEscalate || d.Next != nil {
				t.Fatalf("a configuration error must escalate without a retry: %+v", d)
			}
			if !strings.HasPrefix(d.Reasons[0], "configuration error: ") || !strings.Contains(d.Reasons[0], c.want) {
				t.Fatalf("headline %q, want the cause %q", d.Reasons[0], c.want)
			}
		})
	}
}
