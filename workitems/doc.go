// Package workitems owns the work item: the template it comes from (outerloop.yaml), its state
// machine, its attempts and their conditions, budgets and spend, exit reasons, verifier
// decisions, and the Redis store that holds all of it together with the per-item event log,
// attempt leases (fencing epochs) and checkpoints, each checkpoint with the snapshot of the
// attempt's workspace (tree id and diff from the recorded base) written in the same fenced call.
//
// Every other package depends inward on this one; it depends on none of them.
//
// Item states:
//
//	          ┌────────────────────────── cancel / fail ─────────────────────────┐
//	          │                                                                   ▼
//	queued ─► running ─► verifying ─► closed                         cancelled | failed
//	  ▲                     │
//	  │                     ├─► retry_wait ─► queued
//	  │                     ▼
//	  └──── resolve ◄── escalated ─► closed | cancelled      (any open state ─► escalated)
//
// The edges are one labelled table (machine, ops.go): each names the store operation that takes
// it (Op: start, resume, exit, decide, mark_queued, resolve_close, resolve_retry, cancel, fail,
// escalate). Transition checks an edge; every named store transition takes its legal source
// states from the same table (Op.Sources) and refuses any other state with a *RefusedError
// before writing anything. The worker's step events are fenced like its other writes
// (EmitFenced).
package workitems
