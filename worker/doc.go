// Package worker owns running one attempt of an item: the asynq handler and server, the
// InnerLoop interface and its registry, the budget meter, the fenced checkpointer, and the
// attempt's workspace.
//
// # Attempt lifecycle
//
// An attempt goes lease → workspace → loop → exit → verify → delivery and decision:
//
//   - lease: AcquireLease takes attempt N with a new fencing epoch; StartAttempt moves the item
//     to running (or records a resume). The Heartbeat (heartbeat.go, its own component with
//     Start/Stop) renews the lease every third of its TTL on the handler's clock and cancels the
//     attempt when renewal says the lease was lost or a person cancelled the item.
//   - workspace: prepared from the host's mirror, or restored from the last checkpoint's
//     snapshot; when that is impossible the attempt starts over from its first step.
//   - loop: the registered InnerLoop runs with a Meter (budget caps and the wall-time
//     deadline, on the handler's one clock), a fenced Checkpointer (state, history, workspace
//     snapshot, the spend charge and the steer input it holds, in one Lua call), events and
//     steer input.
//   - exit: RecordExit stores the loop's explicit exit and spend and moves the item to
//     verifying; a completed claim past a cap becomes budget_exhausted.
//   - verify → delivery and decision: the verifier runs the done check in the workspace and
//     decides; the attempt's change is delivered (one commit and its patch, or through a forge a
//     branch and pull request) and RecordDelivery stores the delivery with the decision in one
//     transaction: it closes, retries with a changed condition, escalates, or parks the item
//     waiting on its pull request's CI checks or review (a forge event or the poller wakes it).
//
// Every store write is fenced by the epoch, so a worker whose lease was taken over writes no
// checkpoint, exit, decision or step event (events go through Store.EmitFenced); what it can
// still write is listed in the README (Reliability).
//
// Extension points: an InnerLoop registered in a Registry under its kind (the Registry is the
// config.LoopRegistry that config validation, the scheduler's steer and the handler's
// charge ask, so a new kind's settings are checked by the loop itself, LoopSettingsValidator,
// and its traits come with it, LoopTraitsDeclarer; Example_loopKind), a model provider
// (worker/model.Provider; agentloop's Example_providerFactory) and an evidence format
// (verify.Format; Example_evidenceFormat); each has a runnable example (docs/extending.md).
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
