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
// Transition is the one function that says which edges exist.
package workitems
