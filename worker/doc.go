// Package worker owns running one attempt of an item: the asynq handler and server, the
// InnerLoop interface and its registry, the budget meter, the fenced checkpointer, and the
// attempt's workspace.
//
// # Attempt lifecycle
//
// An attempt goes lease → workspace → loop → exit → verify → decision:
//
//   - lease: AcquireLease takes attempt N with a new fencing epoch; StartAttempt moves the item
//     to running (or records a resume). A heartbeat renews the lease every third of its TTL and
//     cancels the attempt when renewal says the lease was lost.
//   - workspace: prepared from the host's mirror, or restored from the last checkpoint's
//     snapshot; when that is impossible the attempt starts over from its first step.
//   - loop: the registered InnerLoop runs with a Meter (budget caps and the wall-time
//     deadline, on the handler's one clock), a fenced Checkpointer (state, history, workspace
//     snapshot, the spend charge and the steer input it holds, in one Lua call), events and
//     steer input.
//   - exit: RecordExit stores the loop's explicit exit and spend and moves the item to
//     verifying; a completed claim past a cap becomes budget_exhausted.
//   - verify → decision: the verifier runs the done check in the workspace and
//     RecordDecision closes, retries with a changed condition, or escalates.
//
// Every store write is fenced by the epoch, so a worker whose lease was taken over writes no
// checkpoint, exit or decision; it may still append step events until its next fenced write
// fails (see README, Reliability).
//
// Workspaces (workspace.go, mirror.go, snapshot.go, resume.go, sweeper.go): each worker host
// keeps one bare mirror per repository under <workdir>/mirrors, fetched before each new attempt,
// and makes each attempt's workspace from it with `git clone --shared` (O(checkout); the
// workspace's .git/objects/info/alternates names the mirror's objects, which a sandbox must bind
// read-only). The base commit is recorded on the attempt. Every checkpoint carries a snapshot of
// the workspace — its git tree id and, when it changed, the binary diff from the base tree — so a
// resume on any host restores exactly the checkpointed tree or, where it cannot, starts the
// attempt over from its first step and says why. The handler removes a host's workspaces when
// their item closes or is cancelled; the Sweeper removes the rest once the item ended and the
// retention passed, and reports the disk used.
package worker
