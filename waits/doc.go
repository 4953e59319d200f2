// Package waits owns what a waiting item waits for and what wakes it. After an item's change is
// pushed, the worker's pipeline may decide to wait (the policy's ci_pending and review_pending
// rules): the item enters the waiting state (workitems.Wait) and holds no worker slot, lease or
// goroutine. Three things end a wait, each recorded on the item's woken event:
//
//   - a forge event (a webhook: a commit status or check run on the pushed commit, a review, the
//     pull request merged or closed, a person's /outerloop command) — Sink;
//   - the Poller, one per scheduler process, sharing the due waits through the store's claim and
//     backing off with the wait's age, within each forge's rate limit and Retry-After;
//   - the wait's deadline, after which the policy decides on what is there (missing CI escalates).
//
// Forge events change an item only on the item's own pull request (the forge, repository and
// number its delivery recorded; a marker in a pull request's body only finds the candidate) and
// only by an account with write access to the item's repository: a /outerloop command or a
// merge or close of an escalated item's pull request (Sink), a merge or close found while it
// waits (Judge: pr_end_refused otherwise), a review (only writers' reviews count). The sink's
// refusals are audited, logged and recorded on the item (forge_refused).
//
// A wake is a short task on the queue (scheduler.Queue.EnqueueWake, deduplicated per wait): a
// worker reads the evidence once through Judge, which has verify's one table decide, acts
// (merge, label) and records (itemstore.Store.Wake). Nothing here waits on a forge.
package waits
