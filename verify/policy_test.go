package verify

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Report builders for policy cases.
func greenReport() *Report {
	return &Report{Source: "r", Format: FormatGoJSON, Complete: true, Declared: unknownCounts(),
		Observed: Counts{Total: 3, Passed: 3}, Listed: Counts{Total: 3, Passed: 3},
		Tests: []*TestCase{{ID: "m/p.TestA", Suite: "m/p", Name: "TestA", Runs: []TestRun{{Outcome: OutcomePass}}}}}
}

func failingReport() *Report {
	r := greenReport()
	r.Observed = Counts{Total: 3, Passed: 2, Failed: 1}
	r.Tests = append(r.Tests, &TestCase{ID: "m/p.TestB", Suite: "m/p", Name: "TestB",
		Runs: []TestRun{{Outcome: OutcomeFail, Message: "b_test.go:9: got 1 want 2"}}})
	r.FirstError = "TestB: b_test.go:9: got 1 want 2"
	return r
}

func flakyReport(suite string) *Report {
	r := greenReport()
	r.Tests = append(r.Tests, &TestCase{ID: suite + ".TestFlaky", Suite: suite, Name: "TestFlaky",
		Runs: []TestRun{{Outcome: OutcomeFail, Message: "race"}, {Outcome: OutcomePass, Rerun: 1}}})
	return r
}

func with(r *Report, f func(*Report)) *Report { f(r); return r }

// pushed makes f the facts after a delivery: the local check closed, no local reports.
func pushed(f *Facts, del *workitems.Delivery) {
	f.Commands, f.Reports = nil, nil
	f.Local = &workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Reasons: []string{"all green: 3 tests passed"}}
	f.Delivery = del
	f.CIDeadline = testNow.Add(30 * time.Minute)
}

func openPR() *workitems.Delivery {
	return &workitems.Delivery{Outcome: workitems.DeliveryPROpened, PushedSHA: "5ha", PR: &workitems.PullRequest{Number: 7, State: workitems.PROpen}}
}

func heldDelivery() *workitems.Delivery {
	return &workitems.Delivery{Outcome: workitems.DeliveryHeld, Branch: "outerloop/t", PR: &workitems.PullRequest{Number: 7, State: workitems.PROpen},
		Held: &workitems.BranchHold{User: "Pat Person", SHA: "0123456789abcdef0123456789abcdef01234567", Commits: 1}}
}

func pendingCI() *CIEvidence {
	return &CIEvidence{Required: []string{"ci/test"}, Missing: []string{"ci/test"}, SHA: "5ha"}
}

func greenCI() *CIEvidence {
	return &CIEvidence{Required: []string{"ci/test"}, SHA: "5ha", Checks: []CICheck{{Name: "ci/test", State: CISuccess, SHA: "5ha"}}}
}

func changesRequested(on workitems.OnChangesRequested, rounds int) *ReviewEvidence {
	return &ReviewEvidence{Required: 1, PR: 7, OnChanges: on, Rounds: rounds, MaxRounds: 3, Deadline: testNow.Add(time.Hour),
		ChangesRequested: []ReviewNote{{User: "bo", Body: "Please handle overflow.", Comments: []ReviewComment{
			{Path: "calc.go", Line: 12, Body: "this overflows"}, {Path: "calc_test.go", Line: 3, Body: "add a case"}}}}}
}

func okCmd() CommandResult { return CommandResult{Command: "go test -json ./...", ExitCode: 0} }

func baseFacts() *Facts {
	return &Facts{
		Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: 1, Now: testNow,
		Template: &config.Template{Name: "t", MaxAttempts: 3, Retry: config.Retry{SameFailureLimit: 2, InfraRetries: 2}},
		Item:     &workitems.Item{ID: "t@1", Attempt: 1, Attempts: []workitems.Attempt{{N: 1}}},
		Commands: []CommandResult{okCmd()},
		Reports:  []*Report{greenReport()},
	}
}

func TestPolicyRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		facts   func(f *Facts)
		rule    workitems.RuleName
		outcome workitems.Outcome
		check   func(t *testing.T, d workitems.Decision)
	}{
		{"budget exhaustion escalates", func(f *Facts) {
			f.Exit = workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetCostUSD}
		},
			"exit_budget_exhausted", workitems.OutcomeEscalate, nil},
		{"needs_input escalates", func(f *Facts) { f.Exit.Reason = workitems.ExitNeedsInput }, "exit_needs_input", workitems.OutcomeEscalate, nil},
		{"needs_approval escalates", func(f *Facts) { f.Exit.Reason = workitems.ExitNeedsApproval }, "exit_needs_approval", workitems.OutcomeEscalate, nil},
		{"a failed exit escalates", func(f *Facts) { f.Exit.Reason = workitems.ExitFailed }, "exit_failed", workitems.OutcomeEscalate, nil},
		{"no progress escalates", func(f *Facts) { f.Exit.Reason = workitems.ExitNoProgress }, "exit_no_progress", workitems.OutcomeEscalate, nil},
		{"an aborted attempt escalates", func(f *Facts) { f.Exit.Reason = workitems.ExitAborted }, "exit_aborted", workitems.OutcomeEscalate, nil},
		{"a transient error retries later", func(f *Facts) { f.Exit.Reason = workitems.ExitTransientError }, "exit_transient_error", workitems.OutcomeRetry,
			func(t *testing.T, d workitems.Decision) {
				if !d.Next.NotBefore.Equal(testNow.Add(30*time.Second)) || !slices.Equal(d.Next.Changes(workitems.Condition{}), []string{"not_before"}) {
					t.Errorf("next %+v", d.Next)
				}
			}},
		{"an unknown exit reason escalates", func(f *Facts) { f.Exit.Reason = "weird" }, "exit_unknown", workitems.OutcomeEscalate, nil},
		{"an infrastructure failure after the re-runs escalates", func(f *Facts) { f.InfraProblem = "runner lost"; f.InfraReruns = 2 },
			"infra_error", workitems.OutcomeEscalate, nil},
		{"a secret in the diff escalates", func(f *Facts) { f.Diff = &DiffEvidence{Secrets: []string{"a.go:3: GitHub token"}} },
			"diff_secret", workitems.OutcomeEscalate, nil},
		{"a diff out of scope escalates", func(f *Facts) { f.Diff = &DiffEvidence{Violations: []string{"12 files changed, max_files is 10"}} },
			"diff_out_of_scope", workitems.OutcomeEscalate, nil},
		{"action_required on CI escalates", func(f *Facts) {
			f.CI = &CIEvidence{Required: []string{"deploy"}, Checks: []CICheck{{Name: "deploy", State: CIActionRequired}}}
		}, "ci_action_required", workitems.OutcomeEscalate, nil},
		{"required CI checks missing after the wait escalate", func(f *Facts) {
			f.CI = &CIEvidence{Required: []string{"build"}, Missing: []string{"build"}}
		}, "ci_missing", workitems.OutcomeEscalate, nil},
		{"counts that disagree escalate", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Declared = Counts{Total: 9, Failed: 0, Errored: 0, Skipped: 0} })}
		}, "counts_disagree", workitems.OutcomeEscalate, nil},
		{"a build failure retries with the compiler error", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.BuildFailed, r.BuildErrors = true, []string{"x.go:1:1: syntax error"} })}
		}, "build_failed", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Next.Input, "x.go:1:1: syntax error") {
				t.Errorf("input %q", d.Next.Input)
			}
		}},
		{"a real failure retries with the first error and failing ids", func(f *Facts) { f.Reports = []*Report{failingReport()} },
			"tests_failed", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
				if !strings.Contains(d.Next.Input, "m/p.TestB") || !strings.Contains(d.Next.Input, "got 1 want 2") {
					t.Errorf("input %q", d.Next.Input)
				}
				if !slices.Contains(d.Next.Changes(workitems.Condition{}), "input") {
					t.Errorf("changes %v", d.Next.Changes(workitems.Condition{}))
				}
			}},
		{"a missing report never closes", func(f *Facts) { f.Reports = nil; f.Missing = []string{`report "out.xml": missing`} },
			"report_missing", workitems.OutcomeRetry, nil},
		{"an expected report that never came never closes", func(f *Facts) { f.Reports = nil; f.ReportExpected = true },
			"report_missing", workitems.OutcomeRetry, nil},
		{"a done check that timed out retries", func(f *Facts) {
			f.Reports = nil
			f.Commands = []CommandResult{{Command: "make test", ExitCode: -1, TimedOut: true, Elapsed: time.Minute}}
		}, "check_timed_out", workitems.OutcomeRetry, nil},
		{"a truncated report never closes", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Complete = false; r.Warnings = []string{"last line cut off"} })}
		}, "report_truncated", workitems.OutcomeRetry, nil},
		{"zero tests never close", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Observed, r.Tests = Counts{}, nil })}
		}, "zero_tests", workitems.OutcomeRetry, nil},
		{"all tests skipped never close", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) { r.Observed = Counts{Total: 2, Skipped: 2} })}
		}, "zero_tests", workitems.OutcomeRetry, nil},
		{"a done-check command that is not found escalates at once", func(f *Facts) {
			f.Commands = []CommandResult{{Command: "mkae test", ExitCode: 127}}
		}, workitems.RuleConfigError, workitems.OutcomeEscalate, nil},
		{"a non-zero exit code with a green report never closes", func(f *Facts) { f.Commands[0].ExitCode = 2 },
			"command_failed", workitems.OutcomeRetry, nil},
		{"a green rspec or cargo report without the test command's exit status escalates", func(f *Facts) {
			f.Commands = nil
			f.Reports = []*Report{with(greenReport(), func(r *Report) {
				r.ExitStatusNeeded = "rspec's JUnit formatter does not report errors outside examples"
			})}
		}, "exit_status_unknown", workitems.OutcomeEscalate, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "cannot tell") || !strings.Contains(d.Reasons[0], "--exit-code") {
				t.Errorf("reason %q does not say why or what to give", d.Reasons[0])
			}
		}},
		{"the same report closes with the exit status 0", func(f *Facts) {
			f.Reports = []*Report{with(greenReport(), func(r *Report) {
				r.ExitStatusNeeded = "rspec's JUnit formatter does not report errors outside examples"
			})}
		}, "all_green", workitems.OutcomeClose, nil},
		{"a failed CI check retries", func(f *Facts) {
			f.CI = &CIEvidence{Required: []string{"test"}, Checks: []CICheck{{Name: "test", State: CIFailure}}}
		}, "ci_failed", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Next.Input, "Failing CI checks: test") {
				t.Errorf("input %q", d.Next.Input)
			}
		}},
		{"a flaky test in touched code retries with the stabilise strategy", func(f *Facts) {
			f.Reports = []*Report{flakyReport("example.com/m/pay")}
			f.Diff = &DiffEvidence{Module: "example.com/m", Files: []DiffFile{{Path: "pay/pay.go"}}}
		}, "flaky_in_touched_code", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if d.Next.Strategy.PromptVariant != "stabilise" || !strings.Contains(d.Next.Input, "example.com/m/pay.TestFlaky") {
				t.Errorf("next %+v", d.Next)
			}
		}},
		{"a flaky test unrelated to the diff closes with a note", func(f *Facts) {
			f.Reports = []*Report{flakyReport("example.com/m/other")}
			f.Diff = &DiffEvidence{Module: "example.com/m", Files: []DiffFile{{Path: "pay/pay.go"}}}
		}, "flaky_unrelated", workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "flaky") || !strings.Contains(d.Reasons[0], "TestFlaky") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"all green closes", func(f *Facts) {}, "all_green", workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
			if d.Signature != "" || d.Next != nil {
				t.Errorf("a close has no signature or next: %+v", d)
			}
		}},
		{"all green with green CI closes", func(f *Facts) {
			f.CI = &CIEvidence{Required: []string{"test"}, Checks: []CICheck{{Name: "test", State: CISuccess}}}
		}, "all_green", workitems.OutcomeClose, nil},
		{"a passing check with an empty diff closes as unchanged", func(f *Facts) { f.Diff = &DiffEvidence{Base: "b"} },
			workitems.RuleNoChange, workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
				if d.Signature != "" || !strings.Contains(d.Reasons[0], "unchanged") {
					t.Errorf("decision %+v", d)
				}
			}},
		{"commands alone with an empty diff close as unchanged", func(f *Facts) { f.Reports, f.Diff = nil, &DiffEvidence{Base: "b"} },
			workitems.RuleNoChange, workitems.OutcomeClose, nil},
		{"an empty diff with failing tests still retries", func(f *Facts) { f.Reports, f.Diff = []*Report{failingReport()}, &DiffEvidence{Base: "b"} },
			"tests_failed", workitems.OutcomeRetry, nil},
		{"an empty diff without evidence is still no evidence", func(f *Facts) { f.Reports, f.Commands, f.Diff = nil, nil, &DiffEvidence{Base: "b"} },
			"no_evidence", workitems.OutcomeEscalate, nil},
		{"commands without a report close when no report was asked for", func(f *Facts) { f.Reports = nil },
			"checks_passed", workitems.OutcomeClose, nil},
		{"no commands, no reports and no CI is no evidence", func(f *Facts) { f.Reports, f.Commands = nil, nil },
			"no_evidence", workitems.OutcomeEscalate, nil},

		// Guards on retries.
		{"a retry when the item budget is spent escalates", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			f.Item.ItemBudget = workitems.Budget{CostUSD: 1}
			f.Item.Spend = workitems.Spend{CostUSD: 1.5}
		}, "item_budget_exhausted", workitems.OutcomeEscalate, nil},
		{"a retry after the last attempt escalates", func(f *Facts) { f.Reports = []*Report{failingReport()}; f.Attempt = 3 },
			"max_attempts", workitems.OutcomeEscalate, nil},
		{"a retry past the attempts the item was made with escalates, whatever the template says now", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			f.Template.MaxAttempts, f.Item.MaxAttempts, f.Attempt = 5, 2, 2
		}, "max_attempts", workitems.OutcomeEscalate, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(strings.Join(d.Reasons, "; "), "attempt 2 of 2 failed") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"the same failure signature twice in a row escalates", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			sig := signature(f, "tests_failed")
			f.Attempt = 2
			f.Item.Attempts = []workitems.Attempt{{N: 1, Decision: &workitems.Decision{Signature: sig}}, {N: 2}}
		}, "same_failure_repeated", workitems.OutcomeEscalate, nil},
		{"an unchanged retry is refused", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			f.Condition = workitems.Condition{Input: FailureSummary(f) + "\n\n" + againNote,
				Strategy: workitems.Strategy{PromptVariant: "another-approach"}}
		}, "unchanged_retry_refused", workitems.OutcomeEscalate, nil},
		{"an exact repeat below the same-failure limit asks for another approach", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			f.Template.Retry.SameFailureLimit = 3
			f.Attempt = 2
			f.Item.Attempts = []workitems.Attempt{{N: 1, Decision: &workitems.Decision{Signature: signature(f, "tests_failed")}}, {N: 2}}
			f.Condition = workitems.Condition{Input: FailureSummary(f)}
		}, "tests_failed", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if d.Next.Strategy.PromptVariant != "another-approach" || !strings.HasSuffix(d.Next.Input, againNote) {
				t.Errorf("next %+v", d.Next)
			}
		}},
		{"a person's input is kept ahead of the failure summary", func(f *Facts) {
			f.Reports = []*Report{failingReport()}
			f.Condition = workitems.Condition{Input: "Use the v2 client.\n\n" + failureMarker + "\nFirst error: old"}
		}, "tests_failed", workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if !strings.HasPrefix(d.Next.Input, "Use the v2 client.\n\n"+failureMarker) || strings.Contains(d.Next.Input, "old") {
				t.Errorf("input %q", d.Next.Input)
			}
		}},
		// After the push: the facts the pipeline and a wake hand over (no local reports).
		{"a removed template escalates", func(f *Facts) {
			f.Precondition = &Precondition{Rule: workitems.RuleTemplateRemoved, Summary: "template t is no longer in the config"}
		}, workitems.RuleTemplateRemoved, workitems.OutcomeEscalate, nil},
		{"an incompatible template escalates", func(f *Facts) {
			f.Precondition = &Precondition{Rule: workitems.RuleTemplateIncompatible, Summary: "loop kind changed"}
		}, workitems.RuleTemplateIncompatible, workitems.OutcomeEscalate, nil},
		{"a lost workspace retries from a clean checkout", func(f *Facts) {
			f.Precondition = &Precondition{Rule: workitems.RuleWorkspaceLost, Summary: "the workspace could not be restored"}
		}, workitems.RuleWorkspaceLost, workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if !d.Next.CleanCheckout {
				t.Errorf("next %+v", d.Next)
			}
		}},
		{"a base that moved under a conflicting change retries from it", func(f *Facts) {
			pushed(f, &workitems.Delivery{Outcome: workitems.DeliveryFailed, ErrorClass: workitems.ClassConflict, Error: "calc.go conflicts"})
		}, workitems.RuleBaseMoved, workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Next.Input, "calc.go conflicts") {
				t.Errorf("input %q", d.Next.Input)
			}
		}},
		{"a delivery that failed escalates", func(f *Facts) {
			pushed(f, &workitems.Delivery{Outcome: workitems.DeliveryFailed, ErrorClass: workitems.ClassPermission, Error: "protected branch"})
		}, workitems.RuleDeliveryFailed, workitems.OutcomeEscalate, nil},
		{"a tree a person declined before closes as declined", func(f *Facts) {
			pushed(f, &workitems.Delivery{Outcome: workitems.DeliveryDeclined, PR: &workitems.PullRequest{Number: 4, State: workitems.PRClosed}})
		}, workitems.RuleDeclined, workitems.OutcomeClose, nil},
		{"a tree the open pull request holds closes as already delivered", func(f *Facts) {
			pushed(f, &workitems.Delivery{Outcome: workitems.DeliveryUnchanged, SameAs: &workitems.DeliveryRef{Item: "t@0", PR: &workitems.PullRequest{Number: 3}}})
		}, workitems.RuleAlreadyDelivered, workitems.OutcomeClose, nil},
		{"a tick whose branch a person committed to closes as held, naming who", func(f *Facts) {
			pushed(f, heldDelivery())
			f.Item.Origin.Kind = workitems.OriginCron
		}, workitems.RuleHeldByPerson, workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "held: Pat Person pushed 0123456789ab") || !strings.Contains(d.Reasons[0], "/outerloop rebase` on #7") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"any other item whose branch a person committed to escalates", func(f *Facts) {
			pushed(f, heldDelivery())
			f.Item.Origin.Kind = workitems.OriginManual
		}, workitems.RuleHeldByPersonEscalate, workitems.OutcomeEscalate, nil},
		{"a held delivery without who held it is not held_by_person", func(f *Facts) {
			pushed(f, heldDelivery())
			f.Delivery.Held = nil
			f.Item.Origin.Kind = workitems.OriginCron
		}, workitems.RuleChecksPassed, workitems.OutcomeClose, nil},
		{"nothing to change with the branch's pull request closed is obsolete", func(f *Facts) {
			pushed(f, &workitems.Delivery{Outcome: workitems.DeliveryObsolete, PR: &workitems.PullRequest{Number: 9, State: workitems.PRClosed}})
		}, workitems.RuleObsolete, workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "#9 was closed as no longer needed") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"a pull request closed by an account without write access escalates instead of ending the item", func(f *Facts) {
			pushed(f, openPR())
			f.Delivery.PR.State = workitems.PRClosed
			f.PREndRefused = "rex, who closed it, has read access to acme/calc"
		}, workitems.RulePREndRefused, workitems.OutcomeEscalate, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "was closed, but rex, who closed it, has read access") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"a pull request merged by an account the forge did not name escalates", func(f *Facts) {
			pushed(f, openPR())
			f.Delivery.PR.State = workitems.PRMerged
			f.PREndRefused = "the forge did not say who merged it"
		}, workitems.RulePREndRefused, workitems.OutcomeEscalate, nil},
		{"a refusal of an open pull request's end is no end", func(f *Facts) {
			pushed(f, openPR())
			f.PREndRefused = "stale"
			f.CI = pendingCI()
		}, workitems.RuleCIPending, workitems.OutcomeWait, nil},
		{"a pull request a person merged closes", func(f *Facts) {
			pushed(f, openPR())
			f.Delivery.PR.State = workitems.PRMerged
			f.CI = pendingCI()
		}, workitems.RulePRMerged, workitems.OutcomeClose, nil},
		{"a pull request a person closed ends as declined", func(f *Facts) {
			pushed(f, openPR())
			f.Delivery.PR.State = workitems.PRClosed
			f.Review = &ReviewEvidence{Required: 1, Deadline: testNow.Add(time.Hour)}
		}, workitems.RulePRClosed, workitems.OutcomeClose, nil},
		{"a refused automerge escalates", func(f *Facts) {
			pushed(f, openPR())
			f.MergeRefused = "the head moved"
		}, workitems.RuleAutomergeRefused, workitems.OutcomeEscalate, nil},
		{"CI checks a wake asked to re-run for infrastructure reasons are waited for", func(f *Facts) {
			pushed(f, openPR())
			f.CI = &CIEvidence{SHA: strings.Repeat("a", 40), Required: []string{"test"}, Checks: []CICheck{{Name: "test", State: CIInfraError}}}
			f.Wait = &workitems.Wait{Kind: workitems.WaitCI, Deadline: testNow.Add(time.Hour), InfraReruns: 1}
			f.CIReruns = 2
		}, workitems.RuleCIRerun, workitems.OutcomeWait, func(t *testing.T, d workitems.Decision) {
			if d.Wait == nil || d.Wait.InfraReruns != 2 || !d.Wait.Deadline.Equal(testNow.Add(time.Hour)) {
				t.Errorf("wait %+v", d.Wait)
			}
		}},
		{"CI without a result before its deadline waits", func(f *Facts) {
			pushed(f, openPR())
			f.CI = pendingCI()
		}, workitems.RuleCIPending, workitems.OutcomeWait, func(t *testing.T, d workitems.Decision) {
			if d.Wait == nil || d.Wait.Kind != workitems.WaitCI || !d.Wait.Deadline.Equal(testNow.Add(30*time.Minute)) || d.Next != nil {
				t.Errorf("wait %+v", d.Wait)
			}
		}},
		{"CI without a result after its deadline escalates as missing", func(f *Facts) {
			pushed(f, openPR())
			f.CI = pendingCI()
			f.CIDeadline = testNow
		}, "ci_missing", workitems.OutcomeEscalate, nil},
		{"green CI on the pushed commit closes", func(f *Facts) {
			pushed(f, openPR())
			f.CI = greenCI()
		}, "checks_passed", workitems.OutcomeClose, nil},
		{"green CI and a review still to come waits for the review", func(f *Facts) {
			pushed(f, openPR())
			f.CI = greenCI()
			f.Review = &ReviewEvidence{Required: 1, Deadline: testNow.Add(72 * time.Hour), PR: 7}
		}, workitems.RuleReviewPending, workitems.OutcomeWait, func(t *testing.T, d workitems.Decision) {
			if d.Wait == nil || d.Wait.Kind != workitems.WaitReview {
				t.Errorf("wait %+v", d.Wait)
			}
		}},
		{"red CI is not waited on for a review", func(f *Facts) {
			pushed(f, openPR())
			f.CI = &CIEvidence{Required: []string{"ci/test"}, SHA: "5ha", Checks: []CICheck{{Name: "ci/test", State: CIFailure, SHA: "5ha"}}}
			f.Review = &ReviewEvidence{Required: 1, Deadline: testNow.Add(72 * time.Hour), PR: 7}
		}, "ci_failed", workitems.OutcomeRetry, nil},
		{"an approval closes", func(f *Facts) {
			pushed(f, openPR())
			f.CI = greenCI()
			f.Review = &ReviewEvidence{Required: 1, Approvals: []string{"ana"}, Deadline: testNow.Add(time.Hour), PR: 7}
		}, "checks_passed", workitems.OutcomeClose, func(t *testing.T, d workitems.Decision) {
			if !strings.Contains(d.Reasons[0], "approved by ana") {
				t.Errorf("reasons %q", d.Reasons)
			}
		}},
		{"no review by the deadline escalates", func(f *Facts) {
			pushed(f, openPR())
			f.Review = &ReviewEvidence{Required: 2, Approvals: []string{"ana"}, Deadline: testNow, PR: 7}
		}, workitems.RuleReviewMissing, workitems.OutcomeEscalate, nil},
		{"changes requested retry with the review's text and inline comments", func(f *Facts) {
			pushed(f, openPR())
			f.CI = greenCI()
			f.Condition = workitems.Condition{Input: "Keep the API stable."}
			f.Review = changesRequested(workitems.ChangesRetry, 0)
		}, workitems.RuleChangesRequested, workitems.OutcomeRetry, func(t *testing.T, d workitems.Decision) {
			in := d.Next.Input
			for _, want := range []string{"Keep the API stable.", reviewInputMarker + " #7", "Review by bo:", "Please handle overflow.", "- calc.go:12: this overflows", "- calc_test.go:3: add a case"} {
				if !strings.Contains(in, want) {
					t.Errorf("input lacks %q:\n%s", want, in)
				}
			}
		}},
		{"changes requested escalate when the template says so", func(f *Facts) {
			pushed(f, openPR())
			f.Review = changesRequested(workitems.ChangesEscalate, 0)
		}, workitems.RuleChangesRequestedEscalate, workitems.OutcomeEscalate, nil},
		{"changes requested past max_rounds escalate", func(f *Facts) {
			pushed(f, openPR())
			f.Review = changesRequested(workitems.ChangesRetry, 3)
		}, workitems.RuleReviewRoundsExhausted, workitems.OutcomeEscalate, nil},
	}
	covered := map[workitems.RuleName]bool{}
	for _, c := range cases {
		covered[c.rule] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := baseFacts()
			c.facts(f)
			d := decide(f)
			if d.Rule != c.rule || d.Outcome != c.outcome {
				t.Fatalf("got %s/%s (%q), want %s/%s", d.Outcome, d.Rule, d.Reasons, c.outcome, c.rule)
			}
			if d.Actor != "verifier" || len(d.Reasons) == 0 || d.Reasons[0] == "" {
				t.Fatalf("decision lacks actor or reasons: %+v", d)
			}
			if d.Outcome == workitems.OutcomeRetry {
				if d.Next == nil || len(d.Next.Changes(f.Condition)) == 0 {
					t.Fatalf("a retry must change its condition: %+v", d.Next)
				}
				if d.Signature == "" {
					t.Fatal("a retry needs a failure signature")
				}
			}
			if c.check != nil {
				c.check(t, d)
			}
		})
	}
	for _, r := range Rules() {
		if !covered[r.Name] {
			t.Errorf("rule %s has no test", r.Name)
		}
	}
	for _, g := range Guards() {
		if !covered[g.Name] {
			t.Errorf("guard %s has no test", g.Name)
		}
	}
}

func TestSignatureIgnoresDurations(t *testing.T) {
	t.Parallel()
	a, b := baseFacts(), baseFacts()
	a.Reports = []*Report{with(failingReport(), func(r *Report) { r.FirstError = "TestB: timed out after 1.52s (0.01s)" })}
	b.Reports = []*Report{with(failingReport(), func(r *Report) { r.FirstError = "TestB: timed out after 2.9s (0.03s)" })}
	if signature(a, "tests_failed") != signature(b, "tests_failed") {
		t.Fatal("durations changed the signature")
	}
	c := baseFacts()
	c.Reports = []*Report{with(failingReport(), func(r *Report) { r.FirstError = "TestB: another message" })}
	if signature(a, "tests_failed") == signature(c, "tests_failed") {
		t.Fatal("a different error gave the same signature")
	}
}

func TestTransientBackoff(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 6: 10 * time.Minute, 50: 10 * time.Minute} {
		if got := TransientBackoff(n); got != want {
			t.Errorf("attempt %d: %v, want %v", n, got, want)
		}
	}
}

var updatePolicy = flag.Bool("update-policy", false, "rewrite POLICY.md from the rule table")

func TestPolicyDoc(t *testing.T) {
	t.Parallel()
	want := PolicyMarkdown()
	if *updatePolicy {
		if err := os.WriteFile("POLICY.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("POLICY.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("POLICY.md is out of date with the rule table: go test ./verify -run TestPolicyDoc -update-policy")
	}
}
