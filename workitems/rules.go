package workitems

import "strings"

// RuleName names the rule that made a decision (Decision.Rule): a row or a retry guard of
// verify's policy table (verify.Rules, verify.Guards), a row of its person table that read a
// person's resolution from the forge (Resolution.Rule, verify.PersonRules), or one of the few
// decided outside them (RulesOutsideThePolicy). The names are stored with items and are the rule label of the
// decision metrics, so a name never changes once used.
//
// A decision the store turns into an escalation keeps the rule it overrode in its name:
// "max_attempts (after tests_failed)" (Base is "max_attempts").
type RuleName string

// The rule names, in the order of verify's policy table (verify/POLICY.md says when each fires).
const (
	// The configuration cannot work (verify/config_error.go).
	RuleConfigError RuleName = "config_error"

	// Problems found before any evidence (verify.Precondition): the worker's resume or a
	// config reload.
	RuleTemplateRemoved      RuleName = "template_removed"
	RuleTemplateIncompatible RuleName = "template_incompatible"
	// RuleWorkspaceLost retries an attempt a resume in verifying cannot restore the tree of:
	// verifying any other tree would be verifying something else.
	RuleWorkspaceLost RuleName = "workspace_lost"

	// The attempt's exit reason.
	RuleExitBudgetExhausted RuleName = "exit_budget_exhausted"
	RuleExitNeedsInput      RuleName = "exit_needs_input"
	RuleExitNeedsApproval   RuleName = "exit_needs_approval"
	RuleExitFailed          RuleName = "exit_failed"
	RuleExitNoProgress      RuleName = "exit_no_progress"
	RuleExitAborted         RuleName = "exit_aborted"
	RuleExitTransientError  RuleName = "exit_transient_error"
	RuleExitUnknown         RuleName = "exit_unknown"

	// The delivery's facts and the pull request's state.

	// RuleBaseMoved retries an item whose change conflicts with where the base branch moved
	// since the attempt started: the next attempt starts from the new base.
	RuleBaseMoved RuleName = "base_moved"
	// RuleDeliveryFailed escalates an item whose change could not be delivered.
	RuleDeliveryFailed RuleName = "delivery_failed"
	// RuleDeclined closes an item whose result equals a pull request a person closed unmerged.
	RuleDeclined RuleName = "declined"
	// RuleAlreadyDelivered closes an item whose result equals the template's last delivered one.
	RuleAlreadyDelivered RuleName = "already_delivered"
	// RulePREndRefused escalates an item whose pull request was merged or closed by an account
	// without write access to the item's repository (or one the forge did not name): such an
	// end is not a person's decision the item can take.
	RulePREndRefused     RuleName = "pr_end_refused"
	RulePRMerged         RuleName = "pr_merged"
	RulePRClosed         RuleName = "pr_closed"
	RuleAutomergeRefused RuleName = "automerge_refused"
	// RuleHeldByPerson closes a scheduled tick whose branch someone else committed to
	// (deliver.on_foreign_commits stop): the next tick finds it held too until it is handed
	// back. RuleHeldByPersonEscalate hands any other item to a person.
	RuleHeldByPerson         RuleName = "held_by_person"
	RuleHeldByPersonEscalate RuleName = "held_by_person_escalate"
	// RuleObsolete closes an item that found nothing to change (or whose change the base
	// already has) and closed the branch's open pull request as no longer needed.
	RuleObsolete RuleName = "obsolete"

	// The evidence: the diff, CI, the test reports and the done-check commands.
	RuleInfraError       RuleName = "infra_error"
	RuleDiffSecret       RuleName = "diff_secret"
	RuleDiffOutOfScope   RuleName = "diff_out_of_scope"
	RuleCIActionRequired RuleName = "ci_action_required"
	RuleCIPending        RuleName = "ci_pending"
	// RuleCIRerun waits for CI checks that failed for infrastructure reasons and were just
	// asked to run again (retry.infra_retries).
	RuleCIRerun            RuleName = "ci_rerun"
	RuleCIMissing          RuleName = "ci_missing"
	RuleCountsDisagree     RuleName = "counts_disagree"
	RuleBuildFailed        RuleName = "build_failed"
	RuleTestsFailed        RuleName = "tests_failed"
	RuleReportMissing      RuleName = "report_missing"
	RuleCheckTimedOut      RuleName = "check_timed_out"
	RuleReportTruncated    RuleName = "report_truncated"
	RuleZeroTests          RuleName = "zero_tests"
	RuleCommandFailed      RuleName = "command_failed"
	RuleCIFailed           RuleName = "ci_failed"
	RuleExitStatusUnknown  RuleName = "exit_status_unknown"
	RuleFlakyInTouchedCode RuleName = "flaky_in_touched_code"

	// The pull request's review.
	RuleChangesRequestedEscalate RuleName = "changes_requested_escalate"
	RuleReviewRoundsExhausted    RuleName = "review_rounds_exhausted"
	RuleChangesRequested         RuleName = "changes_requested"
	RuleReviewPending            RuleName = "review_pending"
	RuleReviewMissing            RuleName = "review_missing"

	// The closes, and the last row.

	// RuleNoChange closes an item whose passing attempt changed nothing: nothing is committed.
	RuleNoChange       RuleName = "no_change"
	RuleFlakyUnrelated RuleName = "flaky_unrelated"
	RuleAllGreen       RuleName = "all_green"
	RuleChecksPassed   RuleName = "checks_passed"
	RuleNoEvidence     RuleName = "no_evidence"

	// The retry guards (verify.Guards).
	RuleItemBudgetExhausted   RuleName = "item_budget_exhausted"
	RuleMaxAttempts           RuleName = "max_attempts" // counts Item.AttemptsAllowed; the store refuses a retry past it
	RuleSameFailureRepeated   RuleName = "same_failure_repeated"
	RuleUnchangedRetryRefused RuleName = "unchanged_retry_refused"

	// Decided outside the table (RulesOutsideThePolicy). Items recorded by earlier versions
	// may hold "unchanged_retry" and "<guard> (after <rule>)": the store used to rewrite a
	// retry it refused; it now refuses it (ErrInvalidTransition) and only the guards decide.

	// A person's decision carried by the forge (verify.PersonRules): a resolution records the
	// row that made it (Resolution.Rule).
	RulePersonRetry  RuleName = "person_retry"
	RulePersonRebase RuleName = "person_rebase"
	RulePersonCancel RuleName = "person_cancel"
	RulePersonMerged RuleName = "person_merged"
	RulePersonClosed RuleName = "person_closed"

	// RulePerson is the rule a person's resolution is counted under in the decision metrics
	// (a person records a Resolution, not a Decision: it has no rule of its own).
	RulePerson RuleName = "person"
)

// AllRuleNames lists every rule name, in the order of verify's policy table, then the guards,
// then the person table's rows, then those decided outside the tables.
func AllRuleNames() []RuleName {
	return []RuleName{
		RuleConfigError,
		RuleTemplateRemoved, RuleTemplateIncompatible, RuleWorkspaceLost,
		RuleExitBudgetExhausted, RuleExitNeedsInput, RuleExitNeedsApproval, RuleExitFailed,
		RuleExitNoProgress, RuleExitAborted, RuleExitTransientError, RuleExitUnknown,
		RuleBaseMoved, RuleDeliveryFailed, RuleDeclined, RuleAlreadyDelivered,
		RuleHeldByPerson, RuleHeldByPersonEscalate, RuleObsolete,
		RulePREndRefused, RulePRMerged, RulePRClosed, RuleAutomergeRefused,
		RuleInfraError, RuleDiffSecret, RuleDiffOutOfScope, RuleCIRerun, RuleCIActionRequired, RuleCIPending,
		RuleCIMissing, RuleCountsDisagree, RuleBuildFailed, RuleTestsFailed, RuleReportMissing,
		RuleCheckTimedOut, RuleReportTruncated, RuleZeroTests, RuleCommandFailed, RuleCIFailed,
		RuleExitStatusUnknown, RuleFlakyInTouchedCode,
		RuleChangesRequestedEscalate, RuleReviewRoundsExhausted, RuleChangesRequested,
		RuleReviewPending, RuleReviewMissing,
		RuleNoChange, RuleFlakyUnrelated, RuleAllGreen, RuleChecksPassed, RuleNoEvidence,
		RuleItemBudgetExhausted, RuleMaxAttempts, RuleSameFailureRepeated, RuleUnchangedRetryRefused,
		RulePersonRetry, RulePersonRebase, RulePersonCancel, RulePersonMerged, RulePersonClosed,
		RulePerson,
	}
}

// RulesOutsideThePolicy lists the rule names no row of verify's tables decides, and who does:
// the decision metrics for a person's resolution (RulePerson). A test in verify keeps
// AllRuleNames equal to the policy's rows and guards, the person table's rows and this list.
func RulesOutsideThePolicy() []RuleName {
	return []RuleName{RulePerson}
}

// Base is the rule that decided, without what an earlier version's store override added:
// "max_attempts" for "max_attempts (after tests_failed)".
func (r RuleName) Base() RuleName {
	if i := strings.IndexByte(string(r), ' '); i >= 0 {
		return r[:i]
	}
	return r
}

// Rule is the precondition rule that decides on an item the config change leaves behind:
// the reason and the rule share their name.
func (c ConfigChangeReason) Rule() RuleName { return RuleName(c) }

// The actors a Decision names: its makers are the system's (a person resolving records a
// Resolution, with the person's name, not a Decision).
const (
	// ActorVerifierName is the verifier's decisions' actor.
	ActorVerifierName = string(ActorVerifier)
	// ActorWorkerName is the actor of the worker's own decisions: a workspace lost at a resume,
	// a template removed or changed incompatibly under a waiting item.
	ActorWorkerName = "worker"
)

// Kind is who decided, by kind: the verifier's and the worker's decisions are both the
// system's (ActorVerifier); any other actor is a person.
func (d Decision) Kind() ActorKind {
	switch d.Actor {
	case ActorVerifierName, ActorWorkerName:
		return ActorVerifier
	}
	return ActorPerson
}
