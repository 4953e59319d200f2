package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Facts is everything the policy decides on: the attempt's exit and the evidence gathered.
type Facts struct {
	Exit      workitems.Exit
	Attempt   int
	Condition workitems.Condition // the condition the attempt ran under
	Item      *workitems.Item
	Template  *config.Template
	Now       time.Time

	Commands       []CommandResult
	Reports        []*Report
	Missing        []string // expected reports that are absent or unreadable (with why)
	ReportExpected bool     // the template asks for a test report
	Diff           *DiffEvidence
	CI             *CIEvidence
	InfraReruns    int    // how often the check was re-run for infrastructure failures
	InfraProblem   string // infrastructure failure still present after the re-runs
	// NetworkRefused are the connections the sandbox's proxy refused to the attempt's commands
	// ("host:port (reason)"), from the item's events.
	NetworkRefused []string

	// After the push (afterpush.go): the local evidence's close, the delivery's facts, until
	// when CI is waited for, the review, a refused automerge, the wait being woken.
	Local        *workitems.Decision
	Delivery     *workitems.Delivery
	CIDeadline   time.Time
	Review       *ReviewEvidence
	MergeRefused string
	PREndRefused string // why the pull request's merge or close does not end the item (Judgement.PREndRefused)
	// CIReruns counts the re-runs of CI checks that failed for infrastructure reasons, this
	// read's included; the wait being woken (Wait.InfraReruns) knew of fewer when this read
	// asked for more.
	CIReruns int
	Wait     *workitems.Wait
	// Precondition is a problem found before any evidence (a lost workspace, a removed template).
	Precondition *Precondition

	files *evidenceSet // the files read, kept for an offline replay (nil: not kept)
}

// keep adds a file the decision reads to the evidence files, when they are kept.
func (f *Facts) keep(name, path string) {
	if f.files != nil {
		f.files.addFile(name, path)
	}
}

// Rule is one row of the decision policy. The first rule whose Match holds decides.
type Rule struct {
	Name    workitems.RuleName
	When    string // the condition, in words (POLICY.md is generated from these)
	Outcome workitems.Outcome
	Match   func(f *Facts) bool
	Reason  func(f *Facts) string
	// Next builds the next attempt's condition from the current one (retry rules only).
	Next func(f *Facts, cur workitems.Condition) workitems.Condition
	// Wait says what to wait for and until when (wait rules only).
	Wait func(f *Facts) workitems.WaitPlan
}

// Guard is a check applied to every retry; when it holds the retry becomes an escalation.
type Guard struct {
	Name   workitems.RuleName
	When   string
	Match  func(f *Facts, sig string, next workitems.Condition) bool
	Reason func(f *Facts, sig string) string
}

// Rules returns the decision policy, in order.
func Rules() []Rule {
	esc := func(name workitems.RuleName, when string, reason workitems.ExitReason) Rule {
		return Rule{Name: name, When: when, Outcome: workitems.OutcomeEscalate,
			Match: func(f *Facts) bool { return f.Exit.Reason == reason },
			Reason: func(f *Facts) string {
				s := "the attempt ended with " + string(reason)
				if f.Exit.Budget != "" {
					s += " (" + string(f.Exit.Budget) + ")"
				}
				if f.Exit.Message != "" {
					s += ": " + shorten.Clip(f.Exit.Message, 200)
				}
				return s
			}}
	}
	rules := []Rule{configErrorRule()}
	rules = append(rules, preconditionRules()...)
	rules = append(rules, []Rule{
		esc(workitems.RuleExitBudgetExhausted, "the attempt exited budget_exhausted", workitems.ExitBudgetExhausted),
		esc(workitems.RuleExitNeedsInput, "the attempt exited needs_input", workitems.ExitNeedsInput),
		esc(workitems.RuleExitNeedsApproval, "the attempt exited needs_approval", workitems.ExitNeedsApproval),
		esc(workitems.RuleExitFailed, "the attempt exited failed", workitems.ExitFailed),
		esc(workitems.RuleExitNoProgress, "the attempt exited no_progress", workitems.ExitNoProgress),
		esc(workitems.RuleExitAborted, "the attempt exited aborted (the worker normally resumes instead)", workitems.ExitAborted),
		{Name: workitems.RuleExitTransientError, When: "the attempt exited transient_error", Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool { return f.Exit.Reason == workitems.ExitTransientError },
			Reason: func(f *Facts) string {
				return "transient error, retry later: " + shorten.Clip(f.Exit.Message, 200)
			},
			Next: func(f *Facts, c workitems.Condition) workitems.Condition {
				c.NotBefore = f.Now.Add(TransientBackoff(f.Attempt)).UTC()
				return c
			}},
		{Name: workitems.RuleExitUnknown, When: "the attempt exited with a reason other than completed", Outcome: workitems.OutcomeEscalate,
			Match:  func(f *Facts) bool { return f.Exit.Reason != workitems.ExitCompleted },
			Reason: func(f *Facts) string { return fmt.Sprintf("unknown exit reason %q", f.Exit.Reason) }},
	}...)
	rules = append(rules, deliveryRules()...)
	rules = append(rules, ciRerunRule())
	rules = append(rules, []Rule{
		{Name: workitems.RuleInfraError, When: "the check kept failing for infrastructure reasons after Retry.InfraRetries re-runs",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return f.InfraProblem != "" },
			Reason: func(f *Facts) string {
				return fmt.Sprintf("infrastructure failure after %d re-runs: %s", f.InfraReruns, f.InfraProblem)
			}},
		{Name: workitems.RuleDiffSecret, When: "the diff adds something that looks like a secret", Outcome: workitems.OutcomeEscalate,
			Match:  func(f *Facts) bool { return f.Diff != nil && len(f.Diff.Secrets) > 0 },
			Reason: func(f *Facts) string { return "secret-looking additions: " + strings.Join(f.Diff.Secrets, "; ") }},
		{Name: workitems.RuleDiffOutOfScope, When: "the diff touches paths outside allowed_paths or exceeds max_files / max_lines",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return f.Diff != nil && len(f.Diff.Violations) > 0 },
			Reason:  func(f *Facts) string { return "diff out of scope: " + strings.Join(f.Diff.Violations, "; ") }},
		{Name: workitems.RuleCIActionRequired, When: "a required CI check needs a person (action_required)", Outcome: workitems.OutcomeEscalate,
			Match: func(f *Facts) bool { return f.CI != nil && len(f.CI.withState(CIActionRequired)) > 0 },
			Reason: func(f *Facts) string {
				return "CI needs action: " + strings.Join(f.CI.withState(CIActionRequired), ", ")
			}},
		ciPendingRule(),
		{Name: workitems.RuleCIMissing, When: "required CI checks are missing, pending or stale when the wait deadline passes",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return f.CI != nil && len(f.CI.Missing) > 0 },
			Reason: func(f *Facts) string {
				return "required CI checks without a result after the wait: " + strings.Join(f.CI.Missing, ", ")
			}},
		{Name: workitems.RuleCountsDisagree, When: "a report's declared totals contradict the tests it lists under its reporter's conventions, and no report shows a failure (a contradiction next to real failures is retried with them below; it never closes)",
			Outcome: workitems.OutcomeEscalate,
			Match: func(f *Facts) bool {
				return badCounts(f) != "" && len(failingIDs(f)) == 0 && !anyReport(f, func(r *Report) bool { return r.BuildFailed })
			},
			Reason: func(f *Facts) string {
				return "contradicting evidence, the report cannot be trusted: " + badCounts(f)
			}},
		{Name: workitems.RuleBuildFailed, When: "a report shows a build failure", Outcome: workitems.OutcomeRetry,
			Match:  func(f *Facts) bool { return anyReport(f, func(r *Report) bool { return r.BuildFailed }) },
			Reason: func(f *Facts) string { return "build failed: " + firstError(f) },
			Next:   withFailureInput},
		{Name: workitems.RuleTestsFailed, When: "a test's final outcome is fail, error, timeout or incomplete", Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool { return len(failingIDs(f)) > 0 },
			Reason: func(f *Facts) string {
				ids := failingIDs(f)
				return fmt.Sprintf("%d failing tests (%s): %s", len(ids), listClip(ids, 5), firstError(f))
			},
			Next: withFailureInput},
		{Name: workitems.RuleReportMissing, When: "an expected test report is missing or not a report", Outcome: workitems.OutcomeRetry,
			Match:  func(f *Facts) bool { return len(f.Missing) > 0 || (f.ReportExpected && len(f.Reports) == 0) },
			Reason: func(f *Facts) string { return "no test report: " + missingText(f) },
			Next:   withFailureInput},
		{Name: workitems.RuleCheckTimedOut, When: "a done-check command ran past its timeout", Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool {
				return slices.ContainsFunc(f.Commands, func(c CommandResult) bool { return c.TimedOut })
			},
			Reason: func(f *Facts) string { return "the done check timed out: " + firstError(f) },
			Next:   withFailureInput},
		{Name: workitems.RuleReportTruncated, When: "a report is incomplete (cut off, a package without its end, TAP plan mismatch or bail out)",
			Outcome: workitems.OutcomeRetry,
			Match:   func(f *Facts) bool { return anyReport(f, func(r *Report) bool { return !r.Complete || r.Bailed }) },
			Reason:  func(f *Facts) string { return "incomplete test report: " + incompleteText(f) },
			Next:    withFailureInput},
		{Name: workitems.RuleZeroTests, When: "the reports ran no tests (or skipped all of them)", Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool {
				return len(f.Reports) > 0 && totalRan(f) == 0
			},
			Reason: func(f *Facts) string { return "zero tests ran: that is no evidence" },
			Next:   withFailureInput},
		{Name: workitems.RuleCommandFailed, When: "a done-check command exited non-zero although its report is green (contradiction) or gave no report",
			Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool {
				return slices.ContainsFunc(f.Commands, func(c CommandResult) bool { return !c.OK() })
			},
			Reason: func(f *Facts) string { return "a done-check command failed: " + firstError(f) },
			Next:   withFailureInput},
		{Name: workitems.RuleCIFailed, When: "a required CI check failed (or was cancelled)", Outcome: workitems.OutcomeRetry,
			Match: func(f *Facts) bool { return f.CI != nil && len(f.CI.failed()) > 0 },
			Reason: func(f *Facts) string {
				return "CI checks failed: " + strings.Join(f.CI.failed(), ", ")
			},
			Next: withFailureInput},
		{Name: workitems.RuleExitStatusUnknown, When: "a report's reporter cannot show a failure outside its tests (rspec's JUnit formatter, cargo's per-binary JUnit, any TAP stream: conventions `rspec-outside-examples`, `cargo-crashed-binary`, `tap-outside-points`) and no exit status of the test command is known",
			Outcome: workitems.OutcomeEscalate,
			Match: func(f *Facts) bool {
				return len(f.Commands) == 0 && f.Local == nil && anyReport(f, func(r *Report) bool { return r.ExitStatusNeeded != "" })
			},
			Reason: func(f *Facts) string {
				for _, r := range f.Reports {
					if r.ExitStatusNeeded != "" {
						return "the report alone cannot tell whether the run passed: " + r.Source + ": " + r.ExitStatusNeeded +
							"; give the test command's exit status (`outerloop verify --exit-code N`) or run it as a done-check command"
					}
				}
				return ""
			}},
		{Name: workitems.RuleFlakyInTouchedCode, When: "a test failed then passed on the same SHA, and its code is in the diff",
			Outcome: workitems.OutcomeRetry,
			Match:   func(f *Facts) bool { return len(flakyTouched(f)) > 0 },
			Reason: func(f *Facts) string {
				return "flaky tests in code this attempt changed: " + listClip(flakyTouched(f), 5)
			},
			Next: func(f *Facts, c workitems.Condition) workitems.Condition {
				c.Strategy.PromptVariant = "stabilise"
				c.Input = "These tests are flaky (failed, then passed on a rerun) and live in code you changed; " +
					"make them deterministic: " + listClip(flakyTouched(f), 10)
				return c
			}},
	}...)
	rules = append(rules, reviewRules()...)
	rules = append(rules, []Rule{
		{Name: workitems.RuleNoChange, When: "the evidence would close the item (one of the three close rules below) and the diff against the base commit is empty",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				if f.Local != nil && f.Delivery != nil { // delivery found nothing but reports changed
					return f.Delivery.Outcome == workitems.DeliveryUnchanged && f.Delivery.SameAs == nil
				}
				return f.Diff != nil && len(f.Diff.Files) == 0 && wouldClose(f)
			},
			Reason: func(f *Facts) string {
				return "unchanged: the check passes and the attempt changed nothing, so nothing is committed or delivered"
			}},
		{Name: workitems.RuleFlakyUnrelated, When: "all green on the final run; some tests failed then passed, outside the diff",
			Outcome: workitems.OutcomeClose,
			Match:   func(f *Facts) bool { return allGreen(f) && len(flakyAll(f)) > 0 },
			Reason: func(f *Facts) string {
				where := "unrelated to the diff"
				if f.Diff == nil {
					where = "no diff to relate them to"
				}
				return fmt.Sprintf("all green (%d tests); flaky, %s: %s", totalRan(f), where, listClip(flakyAll(f), 5))
			}},
		{Name: workitems.RuleAllGreen, When: "every required evidence present, right SHA, > 0 tests ran, counts agree, all green",
			Outcome: workitems.OutcomeClose,
			Match:   func(f *Facts) bool { return len(f.Reports) > 0 && allGreen(f) },
			Reason: func(f *Facts) string {
				s := fmt.Sprintf("all green: %d tests passed", totalRan(f))
				if f.CI != nil && len(f.CI.Checks) > 0 {
					s += fmt.Sprintf(", %d required CI checks green", len(f.CI.Required))
				}
				return s
			}},
		{Name: workitems.RuleChecksPassed, When: "no test report was asked for, every done-check command exited 0 (and CI, if any, is green)",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				return !f.ReportExpected && len(f.Reports) == 0 && (len(f.Commands) > 0 || f.CI != nil || f.Local != nil) && allGreen(f)
			},
			Reason: func(f *Facts) string {
				if f.Local != nil {
					return deliveredGreen(f)
				}
				if len(f.Commands) == 0 {
					return "all required CI checks green"
				}
				return fmt.Sprintf("all %d done-check commands exited 0 (no test report was asked for)", len(f.Commands))
			}},
		{Name: workitems.RuleNoEvidence, When: "nothing above matched: no evidence that the goal is met", Outcome: workitems.OutcomeEscalate,
			Match:  func(f *Facts) bool { return true },
			Reason: func(f *Facts) string { return "no evidence either way" }},
	}...)
	return rules
}

// Guards returns the checks every retry passes; the first that holds escalates instead.
func Guards() []Guard {
	return []Guard{
		{Name: workitems.RuleItemBudgetExhausted, When: "the item's total budget is spent",
			Match: func(f *Facts, _ string, _ workitems.Condition) bool {
				if f.Item == nil {
					return false
				}
				_, over := f.Item.ItemBudget.Exceeded(f.Item.Spend)
				return over
			},
			Reason: func(f *Facts, _ string) string {
				k, _ := f.Item.ItemBudget.Exceeded(f.Item.Spend)
				return "the item budget is exhausted (" + string(k) + ")"
			}},
		{Name: workitems.RuleMaxAttempts, When: "the attempt was the template's last (max_attempts)",
			Match: func(f *Facts, _ string, _ workitems.Condition) bool { return f.Attempt >= maxAttempts(f) },
			Reason: func(f *Facts, _ string) string {
				return fmt.Sprintf("attempt %d of %d failed, no attempts left", f.Attempt, maxAttempts(f))
			}},
		{Name: workitems.RuleSameFailureRepeated, When: "the same failure signature Retry.SameFailureLimit times in a row",
			Match: func(f *Facts, sig string, _ workitems.Condition) bool {
				return sig != "" && sameRun(f, sig) >= sameLimit(f.Template)
			},
			Reason: func(f *Facts, sig string) string {
				return fmt.Sprintf("the same failure %d times in a row (signature %s)", sameRun(f, sig), sig)
			}},
		{Name: workitems.RuleUnchangedRetryRefused, When: "the next condition would equal the current one",
			Match: func(f *Facts, _ string, next workitems.Condition) bool {
				return len(next.Changes(f.Condition)) == 0
			},
			Reason: func(f *Facts, _ string) string {
				return "unchanged retry refused: the next attempt's condition would be the same as this one's"
			}},
	}
}

// PolicyMarkdown renders the rule table and the retry guards as markdown (POLICY.md).
func PolicyMarkdown() string {
	var b strings.Builder
	b.WriteString("# The decision policy\n\n")
	b.WriteString("Generated from `verify/policy.go` and `verify/afterpush.go` (`go test ./verify -run TestPolicyDoc -update-policy` rewrites it).\n")
	b.WriteString("One table decides everything that follows an attempt, in one order: the first rule whose\n")
	b.WriteString("condition holds decides close, retry (with a changed condition), escalate or wait. The worker\n")
	b.WriteString("drives one pipeline after the inner loop: the local done check (evidence gathered by the\n")
	b.WriteString("verifier), then, for a change that closes locally, delivery (commit, push, pull request: facts\n")
	b.WriteString("only), then this table again on the delivery's facts; a `wait` parks the item in the `waiting`\n")
	b.WriteString("state, which holds no worker, and a forge event, the poller or the deadline wakes it: the\n")
	b.WriteString("evidence read then (CI on the pushed commit, the pull request's state and reviews) goes through\n")
	b.WriteString("the same table. Rules that only look at the exit reason run without the done check. An\n")
	b.WriteString("infrastructure failure re-runs the check (not an item attempt) up to `retry.infra_retries`\n")
	b.WriteString("times before `infra_error` can fire.\n\n")
	b.WriteString("| # | rule | when | outcome |\n|---|---|---|---|\n")
	for i, r := range Rules() {
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", i+1, r.Name, r.When, r.Outcome)
	}
	b.WriteString("\nEvery retry then passes these guards in order; the first that holds turns it into an\n")
	b.WriteString("escalation with its reason. A retry that passes records the next attempt's condition and\n")
	b.WriteString("what changed (`condition.Changes`).\n\n")
	b.WriteString("| guard | when | outcome |\n|---|---|---|\n")
	for _, g := range Guards() {
		fmt.Fprintf(&b, "| `%s` | %s | escalate |\n", g.Name, g.When)
	}
	b.WriteString("\nA failure signature is the rule, the sorted failing test ids, the first error line with\n")
	b.WriteString("durations and addresses removed, and the failing CI checks, hashed. Close never happens on\n")
	b.WriteString("zero tests, a missing or truncated report, a non-zero exit code, or declared counts that\n")
	b.WriteString("disagree with the report's entries. A retry's input is a short failure summary: the first\n")
	b.WriteString("error, the failing test ids, failing CI checks and missing reports, after any input a person\n")
	b.WriteString("gave. When a failure repeats exactly (so the input would not change), the retry adds a note\n")
	b.WriteString("and the `another-approach` prompt variant; a third identical failure has nothing left to\n")
	b.WriteString("change and is refused (`unchanged_retry_refused`), if `same_failure_repeated` has not fired.\n")
	b.WriteString("Flaky tests are related to the diff when a changed file is in the test's Go package (or, for\n")
	b.WriteString("other reports, a changed file's path matches its class or module); without a base commit\n")
	b.WriteString("there is no diff and flaky tests count as unrelated. A flaky test failed in one invocation and passed\n")
	b.WriteString("on a later rerun; failing in one of the runs of the same invocation (`go test -count=N`) is failing.\n")
	b.WriteString("A test command's exit code is evidence: `outerloop verify --exit-code N` and the done-check\n")
	b.WriteString("commands' exit codes, non-zero, never close (`command_failed`), however green the report looks.\n\n")
	b.WriteString("## A person's decisions\n\n")
	b.WriteString("The table above decides for the system; a person decides for themself. A resolution given\n")
	b.WriteString("directly (`outerloop resolve`, the console, the API) is recorded as the person gave it. What a\n")
	b.WriteString("person does on the forge is a signal the system reads (`waits.Sink`), and this second table\n")
	b.WriteString("(`verify/person.go`) decides what it resolves. A signal counts only on the item's own pull\n")
	b.WriteString("request and from an account with write access to the item's repository (anything else is\n")
	b.WriteString("refused, audited and a `forge_refused` event); in a state its row does not list, a command is\n")
	b.WriteString("refused and audited, and a pull request's end passes. The resolution records its row\n")
	b.WriteString("(`rule` on the `resolved` event); the store takes the transition or refuses it.\n\n")
	b.WriteString("| rule | signal | the item | resolution |\n|---|---|---|---|\n")
	for _, r := range PersonRules() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Name, r.When, joinStates(r.States), r.Action)
	}
	b.WriteString("\nA pull request merged or closed while its item *waits* is evidence instead: the wake reads it and\n")
	b.WriteString("the table decides (`pr_merged`, `pr_closed`, `pr_end_refused`).\n\n")
	b.WriteString("## Reporter conventions\n\n")
	b.WriteString("Each parser detects the tool that wrote the report (its flavour) and counts its entries by\n")
	b.WriteString("that tool's rule; a report records the rules it applied (`conventions:` in `outerloop verify`).\n")
	b.WriteString("A count rule is applied only when it makes the declared totals agree with the listed entries;\n")
	b.WriteString("a contradiction no rule explains stays a contradiction.\n\n")
	b.WriteString("| flavour | convention | rule |\n|---|---|---|\n")
	for _, c := range Conventions() {
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", c.Flavor, c.Name, c.Rule)
	}
	return b.String()
}

// TransientBackoff is how long to wait before retrying attempt n after a transient error.
func TransientBackoff(n int) time.Duration {
	d := 30 * time.Second
	for i := 1; i < n && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

// maxAttempts is the attempts the item may run: its template's max_attempts in force, and no
// more than the item was made with (the store refuses a retry past that).
func maxAttempts(f *Facts) int {
	n := workitems.DefaultMaxAttempts
	if f.Template != nil && f.Template.MaxAttempts > 0 {
		n = f.Template.MaxAttempts
	}
	if f.Item != nil {
		n = min(n, f.Item.AttemptsAllowed())
	}
	return n
}

func sameLimit(t *config.Template) int {
	if t == nil || t.Retry.SameFailureLimit <= 0 {
		return 2
	}
	return t.Retry.SameFailureLimit
}

// sameRun counts this attempt plus the directly preceding attempts with the same signature.
func sameRun(f *Facts, sig string) int {
	n := 1
	if f.Item == nil {
		return n
	}
	prev := slices.Clone(f.Item.Attempts)
	slices.SortFunc(prev, func(a, b workitems.Attempt) int { return b.N - a.N })
	for _, a := range prev {
		if a.N >= f.Attempt {
			continue
		}
		if a.Decision == nil || a.Decision.Signature != sig {
			break
		}
		n++
	}
	return n
}

// decide runs the table and the guards over the facts.
func decide(f *Facts) workitems.Decision {
	d := workitems.Decision{Actor: workitems.ActorVerifierName, At: f.Now.UTC()}
	var r Rule
	for _, r = range Rules() {
		if r.Match(f) {
			break
		}
	}
	d.Outcome, d.Rule = r.Outcome, r.Name
	d.Reasons = append(d.Reasons, r.Reason(f))
	if r.Outcome == workitems.OutcomeWait {
		plan := r.Wait(f)
		d.Wait = &plan
		return d
	}
	d.Signature = signature(f, r.Name)
	if r.Outcome != workitems.OutcomeRetry {
		return d
	}
	next := r.Next(f, f.Condition)
	for _, g := range Guards() {
		if g.Match(f, d.Signature, next) {
			d.Outcome = workitems.OutcomeEscalate
			d.Rule = g.Name
			d.Reasons = append(d.Reasons, g.Reason(f, d.Signature))
			return d
		}
	}
	d.Next = &next
	d.Reasons = append(d.Reasons, "next attempt changes "+strings.Join(next.Changes(f.Condition), ", "))
	return d
}

var volatile = regexp.MustCompile(`\(\d+(\.\d+)?m?s\)|0x[0-9a-f]+|\d+(\.\d+)?m?s\b|goroutine \d+`)

// signature identifies a failure: the rule, the failing ids and the first error line with
// durations and addresses removed, so the same failure gives the same signature.
func signature(f *Facts, rule workitems.RuleName) string {
	switch rule {
	case workitems.RuleAllGreen, workitems.RuleFlakyUnrelated, workitems.RuleChecksPassed, workitems.RuleNoEvidence, workitems.RuleNoChange:
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", rule, strings.Join(failingIDs(f), ","), volatile.ReplaceAllString(firstError(f), ""))
	if f.CI != nil {
		fmt.Fprintf(h, "%s\n", strings.Join(f.CI.failed(), ","))
	}
	if rule == workitems.RuleExitTransientError {
		fmt.Fprintf(h, "%s\n", f.Exit.Class)
	}
	return string(rule) + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// failureMarker starts every failure summary; text before it in an input came from a person
// (a resolution's --input) and is kept.
const failureMarker = "The previous attempt did not pass the done check."

// againNote is added when a failure repeats exactly, together with another prompt variant, so
// the retry still changes its condition; a third identical failure leaves nothing to change.
const againNote = "The same failure happened again: take a different approach."

// withFailureInput is the retry condition for failures: the input carries the failure summary
// after whatever a person had said.
func withFailureInput(f *Facts, c workitems.Condition) workitems.Condition {
	prev := c.Input
	human := prev
	if i := strings.Index(prev, failureMarker); i >= 0 {
		human = strings.TrimSpace(prev[:i])
	}
	join := func(parts ...string) string {
		var keep []string
		for _, p := range parts {
			if p != "" {
				keep = append(keep, p)
			}
		}
		return strings.Join(keep, "\n\n")
	}
	in := join(shorten.Clip(human, 1000), FailureSummary(f))
	if in == prev || join(in, againNote) == prev {
		in = join(in, againNote)
		c.Strategy.PromptVariant = "another-approach"
	}
	c.Input = in
	return c
}

// FailureSummary is the short text the next attempt gets: first error and failing test ids.
func FailureSummary(f *Facts) string {
	var b strings.Builder
	b.WriteString(failureMarker)
	if e := firstError(f); e != "" {
		b.WriteString("\nFirst error: " + e)
	}
	if ids := failingIDs(f); len(ids) > 0 {
		b.WriteString("\nFailing tests: " + listClip(ids, 20))
	}
	if f.CI != nil && len(f.CI.failed()) > 0 {
		b.WriteString("\nFailing CI checks: " + strings.Join(f.CI.failed(), ", "))
		for _, c := range f.CI.Checks {
			if (c.State == CIFailure || c.State == CICancelled || c.State == CIInfraError) && c.Details != "" {
				b.WriteString("\n  " + c.Name + ": " + shorten.Clip(c.Details, 200))
			}
		}
	}
	if len(f.Missing) > 0 {
		b.WriteString("\nMissing reports: " + missingText(f))
	}
	if inc := incompleteText(f); inc != "" {
		b.WriteString("\nIncomplete: " + inc)
	}
	return shorten.Clip(b.String(), 2000)
}

func anyReport(f *Facts, pred func(*Report) bool) bool { return slices.ContainsFunc(f.Reports, pred) }

func failingIDs(f *Facts) []string {
	var ids []string
	for _, r := range f.Reports {
		ids = append(ids, r.Failing()...)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func firstError(f *Facts) string {
	for _, r := range f.Reports {
		if r.BuildFailed && len(r.BuildErrors) > 0 {
			return r.BuildErrors[0]
		}
	}
	for _, r := range f.Reports {
		if r.FirstError != "" && (r.Observed.Bad() > 0 || r.BuildFailed) {
			return r.FirstError
		}
	}
	for _, c := range f.Commands {
		switch {
		case c.TimedOut:
			return fmt.Sprintf("%q timed out after %s", c.Command, c.Elapsed.Round(time.Second))
		case !c.OK():
			if l := lastMeaningfulLine(c.Tail); l != "" {
				return fmt.Sprintf("%q exited %d: %s", c.Command, c.ExitCode, l)
			}
			return fmt.Sprintf("%q exited %d", c.Command, c.ExitCode)
		}
	}
	return ""
}

// lastMeaningfulLine picks an error-looking line from a command's output tail.
func lastMeaningfulLine(s string) string {
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && (strings.Contains(strings.ToLower(t), "error") || strings.Contains(t, "FAIL")) {
			return shorten.Clip(t, 300)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if t := strings.TrimSpace(lines[i]); t != "" {
			return shorten.Clip(t, 300)
		}
	}
	return ""
}

// badCounts names a complete report whose totals contradict its entries (an incomplete report's
// totals are expected to be off; report_truncated handles it).
func badCounts(f *Facts) string {
	for _, r := range f.Reports {
		if ok, why := r.CountsAgree(); !ok && r.Complete {
			return r.Source + ": " + why
		}
	}
	return ""
}

func totalRan(f *Facts) int {
	n := 0
	for _, r := range f.Reports {
		n += r.Observed.Total - r.Observed.Skipped
	}
	return n
}

func missingText(f *Facts) string {
	if len(f.Missing) > 0 {
		return strings.Join(f.Missing, "; ")
	}
	return "the done check produced no test report"
}

func incompleteText(f *Facts) string {
	var out []string
	for _, r := range f.Reports {
		if !r.Complete || r.Bailed {
			w := "incomplete"
			if len(r.Warnings) > 0 {
				w = r.Warnings[0]
			}
			out = append(out, r.Source+": "+w)
		}
	}
	return strings.Join(out, "; ")
}

func flakyAll(f *Facts) []string {
	var ids []string
	for _, r := range f.Reports {
		for _, t := range r.FlakyTests() {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

func flakyTouched(f *Facts) []string {
	if f.Diff == nil {
		return nil
	}
	var ids []string
	for _, r := range f.Reports {
		for _, t := range r.FlakyTests() {
			if f.Diff.Touches(t) {
				ids = append(ids, t.ID)
			}
		}
	}
	return ids
}

// wouldClose: flaky_unrelated, all_green or checks_passed would match (no_change comes first).
func wouldClose(f *Facts) bool {
	return allGreen(f) && (len(f.Reports) > 0 || (!f.ReportExpected && (len(f.Commands) > 0 || f.CI != nil)))
}

// allGreen: every piece of evidence present is green and nothing required is missing.
func allGreen(f *Facts) bool {
	if len(f.Missing) > 0 || f.InfraProblem != "" {
		return false
	}
	for _, c := range f.Commands {
		if !c.OK() {
			return false
		}
	}
	for _, r := range f.Reports {
		if !r.Green() {
			return false
		}
	}
	if f.Diff != nil && (len(f.Diff.Violations) > 0 || len(f.Diff.Secrets) > 0) {
		return false
	}
	if f.CI != nil && !f.CI.Green() {
		return false
	}
	return true
}

func listClip(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(" and %d more", len(ids)-n)
}
