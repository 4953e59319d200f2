package worker

import (
	"context"

	"outerloop/workitems"
)

// Deliverer acts on the verifier's decision before it is recorded: a close becomes a delivered
// change (a commit, its patch, a pull request through a forge — delivery.Deliverer, through an
// adapter in internal/app), a retry or escalation of an item with a pull request is reported to
// its forge.
type Deliverer interface {
	// Deliver returns the decision to record, with the delivery record and patch to store in the
	// same transaction. An error means transient trouble only: the item stays verifying and the
	// task is retried, without costing an attempt. Everything else is in the decision.
	Deliver(ctx context.Context, in DeliverInput) (DeliverResult, error)
}

// DeliverInput is a decided attempt.
type DeliverInput struct {
	Template   *workitems.Template
	Item       *workitems.Item // before the decision is recorded
	Attempt    int
	Workspace  string
	BaseCommit string
	Decision   workitems.Decision
	Verdict    *workitems.Verdict
	Events     EventSink // the attempt's event log
	// NetworkRefused lists the connections the sandbox refused to the attempt's commands
	// ("host:port (reason)", each once), for the pull request's body.
	NetworkRefused []string
}

// DeliverResult is what to record.
type DeliverResult struct {
	Decision workitems.Decision
	Delivery *workitems.Delivery // nil: nothing delivered
	Patch    []byte
}
