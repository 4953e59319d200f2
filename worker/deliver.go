package worker

import (
	"context"

	"outerloop/workitems"
)

// Deliverer makes a locally closed attempt a delivered change and acts on decisions at the
// forge (delivery.Deliverer, through an adapter in internal/app). It returns facts; the policy
// decides (Verifier.AfterPush, Evidence.Judge).
type Deliverer interface {
	// Deliver commits the change and, through a forge, pushes it and opens or updates the pull
	// request. A failure a person must act on is a record with outcome failed; an error means
	// transient trouble only: the item stays verifying and the task is retried, without costing
	// an attempt.
	Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error)
	// Merge merges a decided close's pull request (deliver.automerge). A refusal by the forge
	// is a *MergeRefusedError; any other error is transient.
	Merge(ctx context.Context, in MergeInput) (workitems.Delivery, error)
	// Followup tells the forge about an escalation of an item with a pull request (label and
	// comment). A failure is an event on the item, not an error.
	Followup(ctx context.Context, in FollowupInput)
}

// DeliverInput is an attempt the local evidence closed.
type DeliverInput struct {
	Template  *workitems.Template
	Item      *workitems.Item // before the decision is recorded
	Attempt   int
	Workspace string
	// GitDir is the worker's own git directory of the workspace (proc.WorkspaceGitDir): the
	// commit and the push use it, never the workspace's .git.
	GitDir     string
	BaseCommit string
	Decision   workitems.Decision
	Verdict    *workitems.Verdict
	Events     EventSink // the attempt's event log
	// NetworkRefused lists the connections the sandbox refused to the attempt's commands
	// ("host:port (reason)", each once), for the pull request's body.
	NetworkRefused []string
}

// DeliverResult is what the delivery did.
type DeliverResult struct {
	Delivery *workitems.Delivery // nil: nothing delivered
	Patch    []byte
}

// MergeInput is a close whose pull request is to be merged.
type MergeInput struct {
	Template *workitems.Template
	Item     *workitems.Item
	Attempt  int
	Delivery workitems.Delivery
	Events   EventSink
}

// MergeRefusedError is a merge the forge refused: the policy decides on it (automerge_refused).
type MergeRefusedError struct{ Reason string }

func (e *MergeRefusedError) Error() string { return "merge refused: " + e.Reason }

// FollowupInput is a decision to tell the forge about.
type FollowupInput struct {
	Template *workitems.Template
	Item     *workitems.Item
	Attempt  int
	Decision workitems.Decision
	Delivery workitems.Delivery // the item's latest delivery: branch, pull request
	Events   EventSink
}
