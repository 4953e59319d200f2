// Package delivery owns turning an attempt's workspace into a delivered change: the commit, the
// patch, and — through a Publisher — the push, the pull request, CI on the pushed commit and the
// merge on a forge.
//
// The worker calls Deliver after the verifier decided (through an adapter in internal/app; the
// worker owns the interface it calls). For a close:
//
//   - rule no_change (the check passed, the diff is empty): the item closes as unchanged,
//     nothing is committed or pushed;
//   - otherwise the whole change becomes ONE commit on the attempt's base commit: the title is
//     deliver.title or the goal's first line, the body the evidence summary, and the trailers
//     `Outerloop-Item: <id>` and `Outerloop-Attempt: <n>`; author and committer are
//     deliver.author or `outerloop <outerloop@localhost>`. Files matching done_check.reports are
//     left out (they are evidence, not the change); when nothing else changed the item closes as
//     unchanged (rule no_change). A resumed attempt whose HEAD already is that commit, on the
//     base, with the same tree, reuses it: delivery is idempotent;
//   - mode patch: the patch (`git diff --binary <base> <commit>`) is kept with the item, bounded
//     by Options.MaxPatchBytes (default DefaultMaxPatchBytes, 1 MiB): past it the stored patch is
//     cut at a line end and ends with a marker line `# outerloop: patch truncated …`, and the
//     record says PatchTruncated. The store closes a second item of the template whose base tree
//     and tree equal the last delivered patch's as unchanged (rule already_delivered), linking
//     it;
//   - mode branch or pull_request: the commit goes to the Publisher, the seam where a forge
//     plugs in. Without one, NotConfigured refuses with ErrForgeNotConfigured (class
//     invalid_input) and the item is escalated at once with that cause.
//
// For a retry or an escalation nothing is committed; when the item already has a branch or pull
// request from an earlier attempt, the Publisher's Followup is told (the next attempt pushes to
// the same branch; an escalation labels and comments the pull request). A followup that fails
// is an event, never a different decision.
//
// Errors: Deliver returns an error only for transient trouble (a cancelled context, a network
// error the publisher classifies transient): the worker leaves the item verifying and the task is
// retried without costing an attempt. Every other failure — a configuration error, a local git
// failure — is a decision: escalate with rule delivery_failed, the cause in the summary and the
// error's class on the delivery record. Every step is an EventDelivery event.
package delivery
