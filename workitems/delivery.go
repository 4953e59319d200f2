package workitems

import (
	"fmt"
	"time"
)

// DeliveryOutcome is what became of an attempt's change.
type DeliveryOutcome string

// The delivery outcomes.
const (
	// DeliveryUnchanged: nothing to deliver — the diff was empty (rule no_change), or the result
	// equals one already delivered (rule already_delivered, with SameAs).
	DeliveryUnchanged DeliveryOutcome = "unchanged"
	// DeliveryPatched: the commit's patch is kept with the item (mode patch).
	DeliveryPatched DeliveryOutcome = "patch"
	// DeliveryPushed: the commit was pushed to the branch (mode branch).
	DeliveryPushed DeliveryOutcome = "pushed"
	// DeliveryPROpened and DeliveryPRUpdated: a pull request was opened, or the open one updated.
	DeliveryPROpened  DeliveryOutcome = "pr_opened"
	DeliveryPRUpdated DeliveryOutcome = "pr_updated"
	// DeliveryMerged: the pull request was merged (automerge); MergeCommit says where.
	DeliveryMerged DeliveryOutcome = "merged"
	// DeliveryDeclined: a person closed an earlier pull request with the same tree unmerged.
	DeliveryDeclined DeliveryOutcome = "declined"
	// DeliveryFailed: delivery could not be done (Error says why); the item is escalated.
	DeliveryFailed DeliveryOutcome = "failed"
	// DeliveryHeld: someone else committed to the branch since outerloop's last push and
	// deliver.on_foreign_commits is stop: nothing was pushed (Held says who and what).
	DeliveryHeld DeliveryOutcome = "held"
	// DeliveryObsolete: the change is no longer needed (the attempt found nothing to change, or
	// the base already has it): the branch's open pull request was closed with a comment, or
	// only commented when a person holds it (PR says which).
	DeliveryObsolete DeliveryOutcome = "obsolete"
)

// AllDeliveryOutcomes lists every delivery outcome.
func AllDeliveryOutcomes() []DeliveryOutcome {
	return []DeliveryOutcome{DeliveryUnchanged, DeliveryPatched, DeliveryPushed, DeliveryPROpened,
		DeliveryPRUpdated, DeliveryMerged, DeliveryDeclined, DeliveryFailed, DeliveryHeld, DeliveryObsolete}
}

// PRState is a pull request's state on its forge.
type PRState string

// The pull request states.
const (
	PROpen   PRState = "open"
	PRClosed PRState = "closed" // closed without merging
	PRMerged PRState = "merged"
)

// AllPRStates lists every pull request state.
func AllPRStates() []PRState { return []PRState{PROpen, PRClosed, PRMerged} }

// CheckState is a CI check's state, normalised across forges (package forge reads each
// forge's check runs and commit statuses into it; verify.CIState is the same type).
type CheckState string

// The CI check states.
const (
	CheckPending        CheckState = "pending"
	CheckSuccess        CheckState = "success"
	CheckFailure        CheckState = "failure"
	CheckInfraError     CheckState = "infra_error" // the CI system itself failed
	CheckCancelled      CheckState = "cancelled"
	CheckNeutral        CheckState = "neutral" // counts as passing (skipped, neutral)
	CheckActionRequired CheckState = "action_required"
	CheckStale          CheckState = "stale"
	CheckUnknown        CheckState = "unknown"
)

// AllCheckStates lists every CI check state.
func AllCheckStates() []CheckState {
	return []CheckState{CheckPending, CheckSuccess, CheckFailure, CheckInfraError, CheckCancelled,
		CheckNeutral, CheckActionRequired, CheckStale, CheckUnknown}
}

// Final reports whether s is a result, not something still to wait for.
func (s CheckState) Final() bool {
	return s != CheckPending && s != CheckStale && s != CheckUnknown && s != ""
}

// LabelNeedsHuman is the label an escalated item's pull request gets.
const LabelNeedsHuman = "outerloop:needs-human"

// DeliveryStep names one step of the delivery flow in an EventDelivery event (Data["step"]).
type DeliveryStep string

// The delivery steps.
const (
	StepUnchanged DeliveryStep = "unchanged" // nothing to commit
	StepCommitted DeliveryStep = "committed" // the attempt's change is one commit on its base
	StepReused    DeliveryStep = "reused"    // a resumed attempt found its commit already made
	StepPublish   DeliveryStep = "publish"   // handed to the forge (push, pull request, CI)
	StepFollowup  DeliveryStep = "followup"  // the forge was told about a retry or an escalation
	StepRetrying  DeliveryStep = "retrying"  // a transient error: the task is retried, no attempt is spent
	StepFailed    DeliveryStep = "failed"    // a delivery error a person must look at
	StepRecorded  DeliveryStep = "recorded"  // the delivery record (and patch) stored with the decision

	// The forge publisher's steps (package publish).
	StepDedupe     DeliveryStep = "dedupe"      // an open or declined pull request already holds this tree
	StepBaseMoved  DeliveryStep = "base_moved"  // the base branch moved: re-made on it, or retried
	StepPushed     DeliveryStep = "pushed"      // the commit is on the branch (--force-with-lease)
	StepPROpened   DeliveryStep = "pr_opened"   // a pull request was opened
	StepPRUpdated  DeliveryStep = "pr_updated"  // the open pull request now has the new commit
	StepCI         DeliveryStep = "ci"          // a wake read the required CI checks on the pushed commit: the decision
	StepMerged     DeliveryStep = "merged"      // automerge merged the pull request
	StepNeedsHuman DeliveryStep = "needs_human" // the pull request was labelled and commented for a person

	// What outerloop did because the branch and its pull request are people's too (the
	// outerloop_pull_request_actions_total metric counts them by these names).
	StepHeld          DeliveryStep = "held"             // someone else committed to the branch: nothing pushed
	StepBuiltOn       DeliveryStep = "built_on"         // the change became a new commit on top of a person's
	StepHandedBack    DeliveryStep = "handed_back"      // a person handed a held branch back (/outerloop rebase)
	StepObsolete      DeliveryStep = "obsolete"         // the open pull request was closed (or commented) as no longer needed
	StepBranchDeleted DeliveryStep = "branch_deleted"   // a merged or closed pull request's branch was deleted
	StepBranchKept    DeliveryStep = "branch_kept"      // ... or kept: a person committed to it, or deliver.keep_branch
	StepReady         DeliveryStep = "ready_for_review" // a draft pull request was marked ready (deliver.draft_until)
)

// AllPullRequestActions lists the steps the pull request actions metric counts.
func AllPullRequestActions() []DeliveryStep {
	return []DeliveryStep{StepHeld, StepBuiltOn, StepHandedBack, StepObsolete, StepBranchDeleted, StepBranchKept, StepReady}
}

// AllDeliverySteps lists every delivery step.
func AllDeliverySteps() []DeliveryStep {
	return []DeliveryStep{StepUnchanged, StepCommitted, StepReused, StepPublish, StepFollowup,
		StepRetrying, StepFailed, StepRecorded, StepDedupe, StepBaseMoved, StepPushed, StepPROpened,
		StepPRUpdated, StepCI, StepMerged, StepNeedsHuman, StepHeld, StepBuiltOn, StepHandedBack, StepObsolete,
		StepBranchDeleted, StepBranchKept, StepReady}
}

// Delivery is what became of an attempt's change: the local commit and its patch, and — through
// a forge — the branch, the pushed commit, the pull request, its CI checks and the merge.
// Fields that do not apply are empty.
type Delivery struct {
	Attempt int             `json:"attempt"`
	Mode    DeliveryMode    `json:"mode"`
	Outcome DeliveryOutcome `json:"outcome"`
	Base    string          `json:"base,omitempty"`   // the commit the attempt started from
	Commit  string          `json:"commit,omitempty"` // the local commit on Base holding the change
	Tree    string          `json:"tree,omitempty"`   // Commit's tree id (equal trees are the same result)
	// BaseTree is Base's tree id: the same base tree and tree make the same patch, whatever
	// the commits' dates.
	BaseTree string        `json:"base_tree,omitempty"`
	Files    []ChangedFile `json:"files,omitempty"` // at most MaxDeliveryFiles; FileCount has them all
	// FileCount, Added and Deleted sum the whole change.
	FileCount int `json:"file_count,omitempty"`
	Added     int `json:"added,omitempty"`
	Deleted   int `json:"deleted,omitempty"`
	// PatchBytes is the size of the whole patch; PatchTruncated says the stored one is cut
	// (Store.Patch returns the stored one).
	PatchBytes     int64 `json:"patch_bytes,omitempty"`
	PatchTruncated bool  `json:"patch_truncated,omitempty"`
	// SameAs is the delivered result this one equals (outcome unchanged, rule already_delivered
	// or declined).
	SameAs *DeliveryRef `json:"same_as,omitempty"`

	// Filled by a forge publisher. Forge (the key of forges:) and Repo (owner/name) are where
	// Branch and PR are: a forge event acts on the item only there (Item.DeliveredPRs; a record
	// without them, written before they were kept, is the template's deliver:).
	Forge       string        `json:"forge,omitempty"`
	Repo        string        `json:"repo,omitempty"`
	Branch      string        `json:"branch,omitempty"`
	PushedSHA   string        `json:"pushed_sha,omitempty"`
	PR          *PullRequest  `json:"pr,omitempty"`
	Checks      []CheckResult `json:"checks,omitempty"`
	MergeCommit string        `json:"merge_commit,omitempty"`
	// Held says who holds the branch (outcome held; or, with a change built on top, whose
	// commit it was built on).
	Held *BranchHold `json:"held,omitempty"`

	// With outcome failed: why, and the error's class.
	Error      string     `json:"error,omitempty"`
	ErrorClass ErrorClass `json:"error_class,omitempty"`
	At         time.Time  `json:"at,omitzero"`
}

// MaxDeliveryFiles bounds Delivery.Files (the item record stays small; the patch has them all).
const MaxDeliveryFiles = 500

// ChangedFile is one file of a delivered change.
type ChangedFile struct {
	Path    string `json:"path"`
	From    string `json:"from,omitempty"` // a rename's old path
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// DeliveryRef points at another item's delivered result.
type DeliveryRef struct {
	Item    string       `json:"item,omitempty"`
	Attempt int          `json:"attempt,omitempty"`
	Commit  string       `json:"commit,omitempty"`
	PR      *PullRequest `json:"pr,omitempty"`
}

// PullRequest is a delivery's pull request on its forge.
type PullRequest struct {
	Number int     `json:"number"`
	URL    string  `json:"url"`
	State  PRState `json:"state"`
	Draft  bool    `json:"draft,omitempty"`
}

// BranchHold is a branch someone else committed to: outerloop never rewrites it until it is
// handed back (`/outerloop rebase` on its pull request, or the branch deleted).
type BranchHold struct {
	User    string    `json:"user"`    // the newest foreign commit's author, as git names them
	SHA     string    `json:"sha"`     // that commit
	Commits int       `json:"commits"` // how many commits outerloop did not push
	Since   time.Time `json:"since,omitzero"`
}

// String is "<user> pushed <sha>" (the item page and `outerloop items ID` show it).
func (h *BranchHold) String() string {
	sha := h.SHA
	if len(sha) > 12 {
		sha = sha[:12]
	}
	s := h.User + " pushed " + sha
	if h.Commits > 1 {
		s += fmt.Sprintf(" (%d commits outerloop did not push)", h.Commits)
	}
	return s
}

// CheckResult is one CI check on the pushed commit.
type CheckResult struct {
	Name    string     `json:"name"`
	State   CheckState `json:"state"`
	URL     string     `json:"url,omitempty"`
	Summary string     `json:"summary,omitempty"`
}
