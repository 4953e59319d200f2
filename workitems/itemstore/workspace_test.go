package itemstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func running(t *testing.T, s *itemstore.Store, id string) *itemstore.Fence {
	t.Helper()
	ctx := context.Background()
	if err := s.Create(ctx, newItem(id), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f := mustLease(t, s, id, 1)
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	return f
}

func snap(tree string, patch string) *workitems.Snapshot {
	return &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: tree, Bytes: len(patch)}, Patch: []byte(patch)}
}

func TestACheckpointAndItsWorkspaceSnapshotAreWrittenTogetherUnderTheFence(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	f := running(t, s, "w@1")
	load := func() (string, []string, *workitems.Snapshot) {
		t.Helper()
		st, hist, err := s.LoadCheckpoint(ctx, "w@1", 1)
		if err != nil {
			t.Fatal(err)
		}
		sn, err := s.LoadSnapshot(ctx, "w@1", 1)
		if err != nil {
			t.Fatal(err)
		}
		var h []string
		for _, e := range hist {
			h = append(h, string(e))
		}
		return string(st), h, sn
	}
	if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("s1"), History: [][]byte{[]byte("h1")},
		Snapshot: snap("tree1", "diff --git a/x b/x\n\x00binary\n")}); err != nil {
		t.Fatal(err)
	}
	st, hist, sn := load()
	if st != "s1" || !slices.Equal(hist, []string{"h1"}) || sn == nil || sn.Tree != "tree1" || string(sn.Patch) != "diff --git a/x b/x\n\x00binary\n" {
		t.Fatalf("after the first write: %q %q %+v", st, hist, sn)
	}
	// An unchanged tree writes no diff: the stored one stays.
	if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("s2"), History: [][]byte{[]byte("h2")}}); err != nil {
		t.Fatal(err)
	}
	if st, hist, sn = load(); st != "s2" || len(hist) != 2 || sn.Tree != "tree1" {
		t.Fatalf("keep: %q %q %+v", st, hist, sn)
	}
	// A diff too large to store removes the old one: it would recreate the wrong tree.
	big := &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: "tree2", Bytes: 9 << 20, TooLarge: true}}
	if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("s3"), Snapshot: big}); err != nil {
		t.Fatal(err)
	}
	if _, _, sn = load(); sn != nil {
		t.Fatalf("a too-large snapshot left %+v", sn)
	}
	// A restart drops the history and writes the new state and snapshot at once.
	if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("fresh"), Reset: true, Snapshot: snap("base", "")}); err != nil {
		t.Fatal(err)
	}
	if st, hist, sn = load(); st != "fresh" || len(hist) != 0 || sn.Tree != "base" || len(sn.Patch) != 0 {
		t.Fatalf("reset: %q %q %+v", st, hist, sn)
	}
	// A writer whose lease was taken over changes none of the three.
	_ = s.ReleaseLease(ctx, f)
	nw := mustLease(t, s, "w@1", 1)
	err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("stale"), History: [][]byte{[]byte("x")}, Reset: true, Snapshot: snap("stale", "x")})
	if !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("stale write: %v", err)
	}
	if st, hist, sn = load(); st != "fresh" || len(hist) != 0 || sn.Tree != "base" {
		t.Fatalf("a stale writer changed the checkpoint: %q %q %+v", st, hist, sn)
	}
	if err := s.DeleteSnapshots(ctx, "w@1", 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, sn = load(); sn != nil {
		t.Fatal("snapshot not deleted")
	}
	_ = nw
}

func TestACorruptStoredSnapshotIsAnErrorNotADiff(t *testing.T) {
	t.Parallel()
	s, env := newStore(t)
	ctx := context.Background()
	for _, bad := range []string{"no header", "tree notanumber\n", "tree 5\nabc"} {
		if err := env.Client.Set(ctx, env.Prefix+"snap:c@1:1", bad, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if sn, err := s.LoadSnapshot(ctx, "c@1", 1); err == nil {
			t.Errorf("%q read as %+v", bad, sn)
		}
	}
}

func TestRecordWorkspaceAndTheExitSnapshot(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	f := running(t, s, "r@1")
	base := workitems.WorkspaceBase{Kind: workitems.BaseGit, Commit: "c0ffee", Tree: "t0", Branch: "main", Mirror: "repo-abc", Host: "h1", At: time.Now()}
	if _, err := s.RecordWorkspace(ctx, f, workitems.WorkspaceBase{Kind: workitems.BaseGit}, ""); err == nil {
		t.Fatal("a base without commit was recorded")
	}
	it, err := s.RecordWorkspace(ctx, f, base, "new attempt")
	if err != nil || it.Current().Base == nil || it.Current().Base.Commit != "c0ffee" {
		t.Fatalf("record: %v %+v", err, it)
	}
	base2 := base
	base2.Commit = "beef"
	if _, err := s.RecordWorkspace(ctx, f, base2, "restarted"); err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events(ctx, "r@1", "", 100, 0)
	var prepared []workitems.Event
	for _, e := range evs {
		if e.Type == workitems.EventWorkspacePrepared {
			prepared = append(prepared, e)
		}
	}
	if len(prepared) != 2 || prepared[0].Data["commit"] != "c0ffee" || prepared[1].Data["previous_commit"] != "c0ffee" {
		t.Fatalf("events: %+v", prepared)
	}
	if err := s.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("s"), Snapshot: snap("t1", "d1")}); err != nil {
		t.Fatal(err)
	}
	// Kept: the stored diff already is the exit tree's.
	it, err = s.RecordExitWith(ctx, f, itemstore.ExitRecord{Exit: workitems.Exit{Reason: workitems.ExitCompleted},
		Snapshot: &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: "t1", Bytes: 2}}, Keep: true})
	if err != nil || it.Current().ExitSnapshot == nil || it.Current().ExitSnapshot.Tree != "t1" || it.State != workitems.StateVerifying {
		t.Fatalf("exit: %v %+v", err, it)
	}
	if sn, _ := s.LoadSnapshot(ctx, "r@1", 1); sn == nil || string(sn.Patch) != "d1" {
		t.Fatalf("kept snapshot: %+v", sn)
	}
	// Written: in the same transaction as the exit.
	f2 := running(t, s, "r@2")
	if _, err := s.RecordExitWith(ctx, f2, itemstore.ExitRecord{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Snapshot: snap("t9", "d9")}); err != nil {
		t.Fatal(err)
	}
	if sn, _ := s.LoadSnapshot(ctx, "r@2", 1); sn == nil || sn.Tree != "t9" || string(sn.Patch) != "d9" {
		t.Fatalf("exit snapshot: %+v", sn)
	}
	// RecordWorkspace belongs to a running attempt.
	if _, err := s.RecordWorkspace(ctx, f2, base, ""); !errors.Is(err, workitems.ErrStale) {
		t.Fatalf("workspace after the exit: %v", err)
	}
}

func TestGetManyReturnsThoseThatExist(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		id := "g@" + string(rune('a'+i))
		_ = s.Create(ctx, newItem(id), itemstore.CreateLimits{})
		ids = append(ids, id)
	}
	got, err := s.GetMany(ctx, append(ids, "missing"))
	if err != nil || len(got) != 3 || got["g@b"] == nil || got["missing"] != nil {
		t.Fatalf("%v %v", got, err)
	}
}
