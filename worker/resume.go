package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// RestoreProblem says why a resumed attempt could not continue on the exact tree of its
// checkpoint. The attempt then starts over from its first step (running) or is retried
// (verifying); an event names the problem.
type RestoreProblem string

// The restore problems.
const (
	RestoreNoBase        RestoreProblem = "no_base"          // checkpoints exist, but no base was recorded
	RestoreNoSnapshot    RestoreProblem = "no_snapshot"      // the checkpoint has no workspace snapshot (or taking it failed)
	RestoreTooLarge      RestoreProblem = "too_large"        // the diff passed the limit and was not stored
	RestoreSnapshotGone  RestoreProblem = "snapshot_missing" // the stored diff is not of the checkpoint's tree
	RestoreBaseMissing   RestoreProblem = "base_unavailable" // the base commit cannot be made on this host
	RestoreApplyFailed   RestoreProblem = "apply_failed"     // the diff does not apply to the base
	RestoreTreeMismatch  RestoreProblem = "tree_mismatch"    // the restored tree is not the checkpoint's
	RestoreWorkspaceGone RestoreProblem = "workspace_gone"   // verifying: no workspace and nothing to restore it from
)

// RestoreError is a restore that could not be done.
type RestoreError struct {
	Problem RestoreProblem
	Err     error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("worker: restore: %s: %v", e.Problem, e.Err)
}
func (e *RestoreError) Unwrap() error { return e.Err }

// workspace gets the attempt's workspace ready for the loop and attaches the checkpointer's
// snapshots to it. A new attempt gets a new workspace (the mirror is fetched). A resumed one gets
// exactly the tree of its last checkpoint: the local workspace when its tree matches, else the
// recorded base recreated (here or on any host) with the stored diff applied, checked against
// the checkpoint's tree id. Where that cannot be, the attempt starts over from its first step on
// a new workspace: its checkpoint is discarded, its spend kept. It returns whether the loop
// resumes.
func (h *Handler) workspace(ctx context.Context, it *workitems.Item, tmpl *config.Template, fence *itemstore.Fence,
	cp *fencedCheckpointer, resumed bool, prior *envelope, log *slog.Logger) (*Workspace, bool, error) {
	a := it.Current()
	w := h.o.Workspaces
	if !resumed || (a.Base == nil && prior == nil) {
		ws, err := w.PrepareAt(ctx, it.ID, a.N, tmpl.Repo, it.Ref)
		if err != nil {
			return nil, false, err
		}
		if _, err := h.o.Store.RecordWorkspace(ctx, fence, ws.Base, prepareWhy(ws, "new attempt")); err != nil {
			return nil, false, fromStore(err)
		}
		cp.snap = newSnapshotter(ws, w.snapshotLimit(), workitems.WorkspaceSnapshot{Tree: ws.Base.Tree})
		return ws, resumed, nil
	}
	var target workitems.WorkspaceSnapshot
	switch {
	case a.Base == nil:
		return h.startOver(ctx, it, tmpl, fence, cp, &RestoreError{RestoreNoBase, errors.New("the attempt has checkpoints but no recorded base")}, log)
	case prior == nil:
		target = workitems.WorkspaceSnapshot{Tree: a.Base.Tree} // no checkpoint yet: the base itself
	case prior.Workspace == nil || prior.Workspace.Tree == "":
		why := "the checkpoint has no workspace snapshot"
		if prior.Workspace != nil && prior.Workspace.Error != "" {
			why += ": " + prior.Workspace.Error
		}
		return h.startOver(ctx, it, tmpl, fence, cp, &RestoreError{RestoreNoSnapshot, errors.New(why)}, log)
	default:
		target = *prior.Workspace
	}
	ws, how, err := h.restore(ctx, it.ID, a.N, tmpl.Repo, *a.Base, target)
	var re *RestoreError
	if errors.As(err, &re) {
		return h.startOver(ctx, it, tmpl, fence, cp, re, log)
	}
	if err != nil {
		return nil, false, err
	}
	h.restored(ctx, fence, it, a.N, ws, target, how, log)
	cp.snap = newSnapshotter(ws, w.snapshotLimit(), target)
	return ws, true, nil
}

func prepareWhy(ws *Workspace, why string) string {
	switch {
	case ws.MirrorCreated:
		why += ", mirror created"
	case ws.MirrorFetched:
		why += ", mirror fetched"
	}
	return why
}

// restore makes attempt n's workspace hold exactly target: the local one when it does, else the
// base recreated with the stored diff applied. how is local, base or snapshot.
func (h *Handler) restore(ctx context.Context, itemID string, n int, repo string, base workitems.WorkspaceBase,
	target workitems.WorkspaceSnapshot) (ws *Workspace, how string, err error) {
	w := h.o.Workspaces
	if local, err := w.Open(itemID, n); err == nil && local.Base.Commit == base.Commit {
		if tree, err := local.Tree(ctx); err == nil && tree == target.Tree {
			return local, "local", nil
		}
		// A step that was interrupted left changes its checkpoint does not have: rebuild.
	}
	var patch []byte
	how = "base"
	if target.Tree != base.Tree {
		if target.TooLarge {
			return nil, "", &RestoreError{RestoreTooLarge, fmt.Errorf("the workspace diff was %d bytes, more than the %d a snapshot stores", target.Bytes, w.snapshotLimit())}
		}
		snap, err := h.o.Store.LoadSnapshot(ctx, itemID, n)
		if err != nil {
			return nil, "", workitems.Classify(workitems.ClassTransient, fromStore(err))
		}
		if snap == nil || snap.Tree != target.Tree {
			found := "none"
			if snap != nil {
				found = "tree " + snap.Tree
			}
			return nil, "", &RestoreError{RestoreSnapshotGone, fmt.Errorf("the checkpoint names tree %s, the stored diff is %s", target.Tree, found)}
		}
		patch, how = snap.Patch, "snapshot"
	}
	ws, err = w.Recreate(ctx, itemID, n, repo, base)
	if err != nil {
		return nil, "", &RestoreError{RestoreBaseMissing, err}
	}
	if err := ws.Apply(ctx, patch); err != nil {
		return nil, "", &RestoreError{RestoreApplyFailed, err}
	}
	tree, err := ws.Tree(ctx)
	if err != nil {
		return nil, "", &RestoreError{RestoreTreeMismatch, err}
	}
	if tree != target.Tree {
		return nil, "", &RestoreError{RestoreTreeMismatch, fmt.Errorf("the restored tree is %s, the checkpoint's %s", tree, target.Tree)}
	}
	return ws, how, nil
}

func (h *Handler) restored(ctx context.Context, fence *itemstore.Fence, it *workitems.Item, n int, ws *Workspace, target workitems.WorkspaceSnapshot, how string, log *slog.Logger) {
	log.Info("workspace restored", "from", how, "tree", target.Tree, "workspace", ws.Dir)
	h.emit(ctx, fence, workitems.Event{Item: it.ID, Attempt: n, Type: workitems.EventWorkspaceRestored, Actor: h.o.WorkerID,
		Message: fmt.Sprintf("workspace at the checkpoint's tree %.12s (from %s)", target.Tree, how),
		Data: map[string]string{"from": how, "tree": target.Tree, "bytes": strconv.Itoa(target.Bytes), "phase": string(it.State),
			"host": h.o.Workspaces.host()}})
}

// startOver gives a resumed attempt that cannot continue a new workspace and discards its loop
// checkpoint (the spend stays): the loop runs from its first step.
func (h *Handler) startOver(ctx context.Context, it *workitems.Item, tmpl *config.Template, fence *itemstore.Fence,
	cp *fencedCheckpointer, re *RestoreError, log *slog.Logger) (*Workspace, bool, error) {
	a := it.Current()
	log.Warn("resumed attempt starts over from its first step", "reason", re.Problem, "err", re.Err)
	h.emit(ctx, fence, workitems.Event{Item: it.ID, Attempt: a.N, Type: workitems.EventAttemptRestarted, Actor: h.o.WorkerID,
		Message: "the checkpointed workspace cannot be restored; the attempt starts over from its first step: " + re.Err.Error(),
		Data:    map[string]string{"reason": string(re.Problem), "host": h.o.Workspaces.host()}})
	ws, err := h.o.Workspaces.PrepareAt(ctx, it.ID, a.N, tmpl.Repo, it.Ref)
	if err != nil {
		return nil, false, err
	}
	if _, err := h.o.Store.RecordWorkspace(ctx, fence, ws.Base, prepareWhy(ws, "restarted ("+string(re.Problem)+")")); err != nil {
		return nil, false, fromStore(err)
	}
	cp.snap = newSnapshotter(ws, h.o.Workspaces.snapshotLimit(), workitems.WorkspaceSnapshot{})
	if err := cp.restart(ctx, cp.meter.Spent(), workitems.WorkspaceSnapshot{Tree: ws.Base.Tree}); err != nil {
		return nil, false, fromStore(err)
	}
	return ws, false, nil
}

// verifyingWorkspace returns the workspace a resume in verifying verifies: exactly the tree the
// loop exited with, local or restored. A *RestoreError means it cannot be had.
func (h *Handler) verifyingWorkspace(ctx context.Context, it *workitems.Item, tmpl *config.Template, log *slog.Logger) (dir, base string, err error) {
	a := it.Current()
	if a.Base == nil { // no workspace was made (the loop failed before), or one from before bases were recorded
		if a.Workspace == "" {
			return "", "", nil
		}
		out, _ := runGit(ctx, workspaceGit(a.Workspace, nil), nil, "rev-parse", baseTag)
		return a.Workspace, strings.TrimSpace(string(out)), nil
	}
	if a.ExitSnapshot == nil || a.ExitSnapshot.Tree == "" {
		why := "the exit recorded no workspace snapshot"
		if a.ExitSnapshot != nil && a.ExitSnapshot.Error != "" {
			why += ": " + a.ExitSnapshot.Error
		}
		return "", "", &RestoreError{RestoreNoSnapshot, errors.New(why)}
	}
	ws, how, err := h.restore(ctx, it.ID, a.N, tmpl.Repo, *a.Base, *a.ExitSnapshot)
	if err != nil {
		return "", "", err
	}
	h.restored(ctx, nil, it, a.N, ws, *a.ExitSnapshot, how, log)
	return ws.Dir, a.Base.Commit, nil
}

// workspaceLost retries an attempt whose finished tree cannot be restored for verifying.
func (h *Handler) workspaceLost(ctx context.Context, it *workitems.Item, fence *itemstore.Fence, re *RestoreError, log *slog.Logger) error {
	a := it.Current()
	d := h.precondition(ctx, it, a.N, workitems.RuleWorkspaceLost,
		fmt.Sprintf("the finished attempt's workspace cannot be restored on this host, so it cannot be verified; run it again (%s: %v)", re.Problem, re.Err))
	d.Actor = workitems.ActorWorkerName
	it, err := h.o.Store.RecordDecision(ctx, fence, d, nil)
	if errors.Is(err, workitems.ErrLeaseLost) || errors.Is(err, workitems.ErrStale) {
		log.Warn("decision not recorded", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	last := it.Decisions[len(it.Decisions)-1]
	// The worker's own decision is counted with the verifier's: both are the system's, not a person's.
	h.o.Observer.Decision(it.Template, last.Kind(), last.Outcome, last.Rule, it.ID)
	log.Warn("workspace lost before verifying", "reason", re.Problem, "err", re.Err, "outcome", last.Outcome, "state", it.State)
	if it.State == workitems.StateRetryWait && h.o.Enqueuer != nil {
		if err := h.o.Enqueuer.EnqueueAttempt(ctx, it); err != nil {
			log.Warn("enqueue of the retry failed; reconcile will repair it", "err", err)
		}
	}
	return nil
}

// removeEnded removes this host's workspaces of an item that closed or was cancelled; those of
// escalated and failed items stay for the retention, and the sweeper removes them later.
func (h *Handler) removeEnded(ctx context.Context, id string, log *slog.Logger) {
	ctx = context.WithoutCancel(ctx)
	it, err := h.o.Store.Get(ctx, id)
	if err != nil || (it.State != workitems.StateClosed && it.State != workitems.StateCancelled) {
		return
	}
	removeWorkspaces(ctx, h.o.Workspaces, h.o.Store, it, "item "+string(it.State), log)
}

// emit records e, fenced when fence is not nil (see storeSink).
func (h *Handler) emit(ctx context.Context, fence *itemstore.Fence, e workitems.Event) {
	(&storeSink{store: h.o.Store, fence: fence, item: e.Item, attempt: e.Attempt, log: h.o.Logger}).Emit(ctx, e)
}

// removeWorkspaces removes every workspace of an item on this host and its stored snapshots
// (nothing can resume an ended item), with an event per workspace. it may be a stand-in holding
// only the id, for an item the store no longer has (then no event is written).
func removeWorkspaces(ctx context.Context, w *Workspaces, st *itemstore.Store, it *workitems.Item, why string, log *slog.Logger) (removed int, freed int64) {
	ctx = context.WithoutCancel(ctx)
	attempts := w.Attempts(it.ID)
	for _, n := range attempts {
		bytes, err := w.Remove(ctx, it.ID, n)
		if err != nil {
			log.Warn("workspace not removed", "item", it.ID, "attempt", n, "err", err)
			continue
		}
		removed++
		freed += bytes
		if it.Template != "" {
			_ = st.Emit(ctx, workitems.Event{Item: it.ID, Attempt: n, Type: workitems.EventWorkspaceRemoved, Actor: w.host(),
				Message: "workspace removed: " + why,
				Data:    map[string]string{"host": w.host(), "bytes": strconv.FormatInt(bytes, 10), "why": why}})
		}
	}
	all := attempts
	for _, a := range it.Attempts {
		all = append(all, a.N)
	}
	if len(all) > 0 {
		if err := st.DeleteSnapshots(ctx, it.ID, all...); err != nil {
			log.Warn("snapshots not deleted", "item", it.ID, "err", err)
		}
	}
	return removed, freed
}
