// Package itemstore is the Redis store of work items: items with their indexes and
// per-item event logs, attempt leases (fencing epochs), checkpoints with their workspace
// snapshots and charged spend, the named state transitions (each checked against the state
// machine of package workitems before anything is written), waits, deliveries, re-runs and
// retention's deletions. It imports workitems for the item's types and vocabularies;
// workitems imports nothing of it.
package itemstore
