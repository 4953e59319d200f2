// Package publish owns taking a delivered commit to a forge: it is the delivery.Publisher of a
// deployment with forges. For one closed attempt (delivery has made the change one commit on
// the attempt's base) Publish, in this order, each step an EventDelivery event (Data["step"]):
//
//  1. finds the forge (deliver.forge; an unknown key is a configuration error: escalate at
//     once), the repository and its base branch (deliver.base or the default branch), and
//     reads the token (a missing variable: escalate at once);
//  2. dedupes (step dedupe): every pull request it opens or updates carries a hidden marker in
//     its body with the change's tree. When the open pull request of the branch already holds
//     this tree (made by another item: a later tick with the same result), nothing is pushed
//     and the item closes as unchanged (rule already_delivered) linking that pull request.
//     When there is none open and the branch's last pull request was closed unmerged by a
//     person with this tree, nothing is pushed and no pull request is opened (rule declined);
//  3. checks the base (step base_moved): when the base branch moved since the attempt
//     started, the commit is re-made on the new base with a three-way merge (git merge-tree);
//     when that conflicts the item is retried (rule base_moved) and the next attempt starts
//     from the new base;
//     then, when the branch's pull request is open and another item's, deliver.rebase
//     (delivery.CheckRebase) may hold the push (step dedupe, Data["reason"]): the same change
//     is pushed only when the policy says the pull request needs it; a held record is unchanged
//     with SameAs naming the pull request and its head (rule already_delivered);
//  4. pushes the commit to the branch (deliver.branch, {template} and {item} expanded) with
//     --force-with-lease against the branch's commit as just read (step pushed). A lost
//     lease is transient (the delivery is tried again, re-reading the branch); a protected
//     branch escalates;
//  5. mode pull_request: opens the pull request (title, body, labels, draft) or updates the
//     one open for the branch (steps pr_opened / pr_updated); mode branch stops here.
//
// Publish returns facts only (the record's outcome: pushed, pr_opened, pr_updated; unchanged or
// declined with SameAs; failed with class conflict when the base moved under a conflicting
// change); the worker's pipeline has the policy decide on them, and CI and review are waited for
// without a worker (package waits). Merge merges a decided close's pull request (automerge,
// merge_method, refused unless the head is still the pushed SHA: a *delivery.MergeRefusedError),
// recording the merge commit (step merged); Followup labels an escalated item's pull request
// outerloop:needs-human and comments the reason.
//
// Errors: transient forge trouble (5xx, network, rate limits, a lost lease) is returned
// transient, and the worker tries the delivery again without costing an attempt; every other
// error is returned with its class and delivery escalates the item with it as the cause. The
// token is only ever in the forge client and in git's environment (forge.GitAuth).
package publish
