// Package delivery owns turning an attempt's workspace into a delivered change: the commit, the
// patch, and — through a Publisher — the push, the pull request and, when the policy asks for
// it, the merge on a forge. It returns facts; the decision policy (package verify's table, asked
// by the worker's pipeline) decides on them.
//
// The worker's pipeline calls Deliver for an attempt the local evidence closed, directly,
// through an interface the worker owns (worker.Deliverer) with this package's Request and Result:
//
//   - rule no_change (the check passed, the diff is empty): nothing is committed or pushed, the
//     record's outcome is unchanged;
//   - otherwise the whole change becomes ONE commit on the attempt's base commit: the title is
//     deliver.title or the goal's first line, the body the evidence summary, and the trailers
//     `Outerloop-Item: <id>` and `Outerloop-Attempt: <n>`; author and committer are
//     deliver.author or `outerloop <outerloop@localhost>`. Files matching done_check.reports are
//     left out (they are evidence, not the change); when nothing else changed the record says
//     unchanged (the policy closes it: no_change). A resumed attempt whose HEAD already is that
//     commit, on the base, with the same tree, reuses it: delivery is idempotent;
//   - mode patch: the patch (`git diff --binary <base> <commit>`) is kept with the item, bounded
//     by Options.MaxPatchBytes (default DefaultMaxPatchBytes, 1 MiB): past it the stored patch is
//     cut at a line end and ends with a marker line `# outerloop: patch truncated …`, and the
//     record says PatchTruncated. The store closes a second item of the template whose base tree
//     and tree equal the last delivered patch's as unchanged (the policy's already_delivered row,
//     applied in the store's transaction so that two items cannot both deliver it);
//   - mode branch or pull_request: the commit goes to the Publisher, the seam where a forge
//     plugs in; its facts (pushed SHA, pull request, declined, already there, base moved) come
//     back on the record. Without one, NotConfigured refuses with ErrForgeNotConfigured (class
//     invalid_input): a failed record with that cause, which the policy escalates.
//
// CheckRebase is deliver.rebase for the publisher: whether a first attempt's commit for a branch
// whose pull request another item opened is pushed (a different change, or the pull request
// needs a rebase by the policy) or held, with a typed RebaseReason either way.
//
// Merge merges a close's pull request (deliver.automerge); a refusal is a *MergeRefusedError,
// a fact for the policy. Followup tells the forge about a retry or an escalation of an item that
// has a branch or pull request (an escalation labels and comments it); a followup that fails is
// an event, never a different decision.
//
// Errors: Deliver returns an error only for transient trouble (a cancelled context, a network
// error the publisher classifies transient): the worker leaves the item verifying and the task is
// retried without costing an attempt. Every other failure — a configuration error, a local git
// failure — is a failed record with the cause and the error's class (the policy's
// delivery_failed row escalates it). Every step is an EventDelivery event.
package delivery
