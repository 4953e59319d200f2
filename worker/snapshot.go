package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
)

// A workspace snapshot is the git tree id of the working tree (every file .gitignore does not
// exclude, taken through a private index so that the loop's own index and HEAD are untouched)
// and the binary diff from the base tree that recreates it. Every fenced checkpoint records one
// (written beside the checkpoint in the same Lua call, and only when the tree changed); a resume
// on a host without the workspace, or with a workspace whose tree is not the checkpoint's,
// recreates the base and applies the diff, and continues only when the tree id matches.
//
// What a snapshot does not hold: ignored files (build output, caches), empty directories, the
// workspace's own commits, index and stash, and nested repositories' contents. A restored
// workspace has the same files at the base commit, not the same git history.

// snapshotConfig makes a tree id depend on the workspace's files only, not on the host's git
// configuration: no global excludes file, no line-ending conversion.
var snapshotConfig = []string{"-c", "core.excludesFile=/dev/null", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false"}

// snapshotTimeout bounds the git commands of one snapshot. They run even when the attempt is
// being cancelled: a yield's last checkpoint needs its tree.
const snapshotTimeout = 5 * time.Minute

func (ws *Workspace) indexEnv() ([]string, error) {
	idx, err := filepath.Abs(ws.index)
	if err != nil {
		return nil, err
	}
	return []string{"GIT_INDEX_FILE=" + idx}, nil
}

// Tree returns the git tree id of the workspace's working tree.
func (ws *Workspace) Tree(ctx context.Context) (string, error) {
	env, err := ws.indexEnv()
	if err != nil {
		return "", err
	}
	g := ws.git(env)
	if _, err := os.Stat(ws.index); err != nil {
		if _, err := runGit(ctx, g, nil, "read-tree", ws.Base.Tree); err != nil {
			return "", err
		}
	}
	if _, err := runGit(ctx, g, nil, append(append([]string(nil), snapshotConfig...), "add", "--all", "--", ".")...); err != nil {
		return "", err
	}
	out, err := runGit(ctx, g, nil, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Diff returns the binary diff between two trees of the workspace, or only its size when it is
// larger than limit (streamed: a huge diff is counted, never held).
func (ws *Workspace) Diff(ctx context.Context, from, to string, limit int) (patch []byte, size int, tooLarge bool, err error) {
	cmd := ws.git(nil).Command(ctx,
		"diff-tree", "-r", "-p", "--binary", "--full-index", "--no-renames", "--no-ext-diff", "--no-textconv", from, to)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, false, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, false, fmt.Errorf("worker: git diff-tree: %w", err)
	}
	var buf bytes.Buffer
	n, rerr := io.Copy(&buf, io.LimitReader(out, int64(limit)+1))
	if n > int64(limit) {
		tooLarge = true
		rest, _ := io.Copy(io.Discard, out)
		n += rest
		buf = bytes.Buffer{}
	}
	werr := cmd.Wait()
	if rerr != nil || werr != nil {
		return nil, 0, false, fmt.Errorf("worker: git diff-tree %.12s %.12s: %w: %s", from, to, firstErr(rerr, werr), shorten.Clip(proc.Redact(stderr.String()), 300))
	}
	if tooLarge {
		return nil, int(n), true, nil
	}
	return buf.Bytes(), int(n), false, nil
}

// Apply applies a diff made by Diff to the working tree (not the index).
func (ws *Workspace) Apply(ctx context.Context, patch []byte) error {
	if len(patch) == 0 {
		return nil
	}
	_, err := runGit(ctx, ws.git(nil), patch, "apply", "--binary", "--whitespace=nowarn", "-")
	return err
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// snapshotter takes a workspace's snapshots for the checkpointer and remembers the one the store
// holds, so that an unchanged tree writes no diff.
type snapshotter struct {
	mu    sync.Mutex
	ws    *Workspace
	limit int
	last  workitems.WorkspaceSnapshot // what the stored checkpoint and diff describe
}

func newSnapshotter(ws *Workspace, limit int, stored workitems.WorkspaceSnapshot) *snapshotter {
	return &snapshotter{ws: ws, limit: limit, last: stored}
}

// take returns the workspace's snapshot now and, when it differs from the stored one, the
// write that replaces it (nil: keep the stored diff).
func (s *snapshotter) take(ctx context.Context) (workitems.WorkspaceSnapshot, *workitems.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
	defer cancel()
	tree, err := s.ws.Tree(ctx)
	if err != nil {
		meta := workitems.WorkspaceSnapshot{Error: err.Error()}
		return meta, &workitems.Snapshot{WorkspaceSnapshot: meta}
	}
	if tree == s.last.Tree && s.last.Error == "" {
		return s.last, nil
	}
	meta := workitems.WorkspaceSnapshot{Tree: tree}
	if tree == s.ws.Base.Tree {
		return meta, &workitems.Snapshot{WorkspaceSnapshot: meta}
	}
	patch, n, tooLarge, err := s.ws.Diff(ctx, s.ws.Base.Tree, tree, s.limit)
	switch {
	case err != nil:
		meta = workitems.WorkspaceSnapshot{Error: err.Error()}
	default:
		meta.Bytes, meta.TooLarge = n, tooLarge
	}
	return meta, &workitems.Snapshot{WorkspaceSnapshot: meta, Patch: patch}
}

// stored records that the store now holds meta.
func (s *snapshotter) stored(meta workitems.WorkspaceSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = meta
}

// exitRecord is the workspace part of RecordExit: the snapshot at the exit, written in the same
// transaction unless the stored diff already is of this tree.
func (s *snapshotter) exitRecord(ctx context.Context) (*workitems.Snapshot, bool) {
	meta, write := s.take(ctx)
	if write == nil {
		return &workitems.Snapshot{WorkspaceSnapshot: meta}, true
	}
	return write, false
}
