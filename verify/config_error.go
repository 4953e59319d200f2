package verify

import (
	"fmt"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
)

// configErrorRule is the first rule of the policy (see configProblem): a configuration error
// found at run time. Another attempt under the same configuration cannot do better, so it
// escalates at once with the cause in its headline instead of spending retries on it.
func configErrorRule() Rule {
	return Rule{Name: workitems.RuleConfigError,
		When: "the configuration cannot work: a step or done-check command not found (exit 127), the repo path or the workspace " +
			"cannot be prepared, a provider key variable unset, a sandbox unavailable, or the done check ran no tests on a tree the attempt left unchanged",
		Outcome: workitems.OutcomeEscalate,
		Match:   func(f *Facts) bool { return configProblem(f) != "" },
		Reason:  func(f *Facts) string { return "configuration error: " + configProblem(f) }}
}

// exitNotFound is the shell's exit code for a command it cannot find.
const exitNotFound = 127

// configProblem names what in the configuration stops every attempt alike ("" when nothing).
func configProblem(f *Facts) string {
	if f.Exit.Reason == workitems.ExitFailed {
		msg := shorten.Clip(f.Exit.Message, 300)
		switch {
		case f.Exit.Class == workitems.ClassNotFound, f.Exit.Class == workitems.ClassPermission:
			if t := lastLine(f.Exit.LastMessage); t != "" && !strings.Contains(msg, t) {
				msg += ": " + t
			}
			return msg
		case strings.Contains(f.Exit.Message, "api key not set"), strings.Contains(f.Exit.Message, "is not set"):
			return msg
		}
	}
	for _, c := range f.Commands {
		if c.Infra == "" && !c.TimedOut && c.ExitCode == exitNotFound {
			s := fmt.Sprintf("done-check command %q not found (exit %d)", shorten.Clip(c.Command, 200), exitNotFound)
			if t := lastLine(c.Tail); t != "" {
				s += ": " + t
			}
			return s
		}
	}
	if f.Exit.Reason == workitems.ExitCompleted && len(f.Reports) > 0 && totalRan(f) == 0 && f.Diff != nil && len(f.Diff.Files) == 0 {
		return "the done check ran no tests and the attempt changed nothing: the repo as configured has no tests to run " +
			"(add tests, or a done check that needs none)"
	}
	return ""
}

// lastLine is the last non-empty line of s, clipped.
func lastLine(s string) string { return shorten.Clip(strings.TrimSpace(shorten.LastLine(s)), 200) }

// headline is a decision's summary: the evidence summary, led by the cause when the
// configuration is at fault (an escalation shows the summary as its headline).
func headline(d workitems.Decision, evidence string) string {
	if len(d.Reasons) > 0 && (d.Outcome == workitems.OutcomeWait || afterPushRule(d.Rule)) {
		return shorten.Clip(d.Reasons[0], 1000) // what it waits for, or the problem found, says it all
	}
	if d.Rule != workitems.RuleConfigError || len(d.Reasons) == 0 {
		return evidence
	}
	return shorten.Clip(d.Reasons[0]+"; "+evidence, 1000)
}

// afterPushRule: a rule decided on the delivery's or the pull request's facts, whose reason is
// the headline (the local evidence's summary is in its reasons).
func afterPushRule(rule workitems.RuleName) bool {
	switch rule {
	case workitems.RuleBaseMoved, workitems.RuleDeliveryFailed, workitems.RuleDeclined, workitems.RuleAlreadyDelivered,
		workitems.RulePREndRefused, workitems.RulePRMerged, workitems.RulePRClosed, workitems.RuleAutomergeRefused, workitems.RuleChangesRequested,
		workitems.RuleHeldByPerson, workitems.RuleHeldByPersonEscalate, workitems.RuleObsolete,
		workitems.RuleChangesRequestedEscalate, workitems.RuleReviewRoundsExhausted, workitems.RuleReviewMissing,
		workitems.RuleTemplateRemoved, workitems.RuleTemplateIncompatible, workitems.RuleWorkspaceLost:
		return true
	}
	return false
}
