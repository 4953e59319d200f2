// Package worker owns running one attempt of an item: the asynq handler and server, the
// InnerLoop interface and its registry, the budget meter, the fenced checkpointer, and the
// attempt's workspace.
//
// The handler leases the attempt (a fencing epoch), prepares or restores its workspace, runs the
// inner loop with a checkpoint after every step, records the exit and asks the verifier. Every
// write is fenced, so a worker whose lease was taken over writes nothing.
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
