// Package workitems owns the work item: its state machine, its attempts and their conditions,
// budgets and spend, exit reasons, verifier decisions, waits and deliveries, the pin of the
// config it was made under, and the vocabularies that name them (the config file's among
// them). Two sub-packages import this one: itemstore, the Redis store that holds all of it
// together with the per-item event log, attempt leases (fencing epochs) and checkpoints; and
// config, the configuration file (outerloop.yaml) the items' templates come from.
//
// Every other package depends inward on this one; it depends on none of them, its
// sub-packages included.
//
// Item states, each edge with the store operation (Op) that takes it:
//
//	queued ─start─► running ─exit─► verifying ─decide─► closed | retry_wait | escalated | waiting
//	retry_wait ─mark_queued─► queued
//	waiting ─wake─► closed | retry_wait | escalated | waiting      (a pull request's CI, review)
//	waiting ─resolve_retry─► queued                                (/outerloop retry)
//	escalated ─resolve_close─► closed;  escalated ─resolve_retry─► queued
//	queued | running | retry_wait ─escalate─► escalated            (the template no longer fits)
//	any open state ─cancel─► cancelled;  queued | running | verifying | waiting ─fail─► failed
//
// A close is delivered before it is recorded (RecordDelivery: one commit and its patch, or a
// branch and pull request); a pull request to wait for parks the item waiting (decide or wake
// with outcome wait) until a forge event or the poller wakes it. resume and record_workspace
// keep the state.
//
// The edges are one labelled table (machine, ops.go), tested edge by edge. Transition checks an
// edge; every named store transition takes its legal source states from the same table
// (Op.Sources) and refuses any other state with a *RefusedError before writing anything. The
// worker's step events are fenced like its other writes (itemstore's Store.EmitFenced).
package workitems
