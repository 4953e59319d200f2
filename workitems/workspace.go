package workitems

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// BaseKind says where an attempt's base commit came from.
type BaseKind string

// The base kinds.
const (
	// BaseGit is a commit of the template's git repository, checked out from the worker's bare
	// mirror of it.
	BaseGit BaseKind = "git"
	// BaseCopy is a copy of a plain directory committed with a fixed author, committer and date,
	// so that every host makes the same commit from the same files.
	BaseCopy BaseKind = "copy"
	// BaseEmpty is an empty commit (a template without repo, or a repository without commits),
	// made as deterministically as BaseCopy.
	BaseEmpty BaseKind = "empty"
)

// AllBaseKinds lists every base kind.
func AllBaseKinds() []BaseKind { return []BaseKind{BaseGit, BaseCopy, BaseEmpty} }

// WorkspaceBase is where an attempt's workspace started. It is recorded on the attempt when the
// workspace is first prepared, so that any worker, on any host, can make the same base again.
type WorkspaceBase struct {
	Kind   BaseKind  `json:"kind"`
	Commit string    `json:"commit"`           // the base commit
	Tree   string    `json:"tree"`             // its tree
	Branch string    `json:"branch,omitempty"` // the source's default branch it was taken from (git)
	Source string    `json:"source,omitempty"` // the repo as configured, without credentials
	Mirror string    `json:"mirror,omitempty"` // the mirror's name under <workdir>/mirrors (git)
	Host   string    `json:"host,omitempty"`   // the worker that prepared it
	At     time.Time `json:"at"`
}

// WorkspaceSnapshot is the state of an attempt's working tree at a checkpoint or at its exit:
// the git tree id of every file that is not ignored, and the size of the binary diff from the
// base tree that recreates it. The diff itself is stored beside the checkpoint (Snapshot).
type WorkspaceSnapshot struct {
	Tree     string `json:"tree,omitempty"`
	Bytes    int    `json:"bytes"`               // size of the diff from the base tree
	TooLarge bool   `json:"too_large,omitempty"` // the diff passed the limit and is not stored
	Error    string `json:"error,omitempty"`     // why no tree could be taken
}

// Usable reports whether the snapshot can recreate its tree on another host.
func (s *WorkspaceSnapshot) Usable() bool {
	return s != nil && s.Tree != "" && !s.TooLarge && s.Error == ""
}

// DefaultSnapshotLimit bounds a stored workspace diff (8 MiB). Past it the snapshot is marked
// too large and a resume on another host starts the attempt over.
const DefaultSnapshotLimit = 8 << 20

// Snapshot is a workspace snapshot with its diff, as written to the store.
type Snapshot struct {
	WorkspaceSnapshot
	Patch []byte // binary diff from the base tree (git diff-tree -p --binary); empty: the base itself
}

// encodeSnapshot stores the tree id on the first line, so that a reader can tell whether the
// diff it found belongs to the tree its checkpoint names.
func encodeSnapshot(s *Snapshot) []byte {
	b := make([]byte, 0, len(s.Tree)+1+len(s.Patch)+16)
	b = append(b, s.Tree...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(s.Bytes), 10)
	b = append(b, '\n')
	return append(b, s.Patch...)
}

func decodeSnapshot(b []byte) (*Snapshot, error) {
	head, patch, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("no header line")
	}
	tree, size, ok := bytes.Cut(head, []byte{' '})
	n, err := strconv.Atoi(string(size))
	if !ok || err != nil || len(tree) == 0 {
		return nil, fmt.Errorf("header %q is not \"tree bytes\"", truncateBytes(head, 80))
	}
	if n != len(patch) {
		return nil, fmt.Errorf("diff is %d bytes, header says %d", len(patch), n)
	}
	return &Snapshot{WorkspaceSnapshot: WorkspaceSnapshot{Tree: string(tree), Bytes: n}, Patch: patch}, nil
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// snapshotOp is what a write does to the stored diff.
func snapshotOp(s *Snapshot) (op string, val []byte) {
	switch {
	case s == nil:
		return "", nil // keep: the tree did not change since the last write
	case s.Tree == "" || s.TooLarge || s.Error != "":
		return "del", nil // nothing usable: a stale diff must not outlive its tree
	default:
		return "set", encodeSnapshot(s)
	}
}

// LoadSnapshot returns the stored workspace diff of an attempt (nil when none).
func (s *Store) LoadSnapshot(ctx context.Context, item string, n int) (*Snapshot, error) {
	b, err := s.rdb.Get(ctx, s.k.snap(item, n)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("workitems: snapshot %s attempt %d: %w", item, n, err)
	}
	snap, err := decodeSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("workitems: snapshot %s attempt %d: %w", item, n, err)
	}
	return snap, nil
}

// DeleteSnapshots drops the stored workspace diffs of an item's attempts (its workspaces are
// gone, nothing can resume them).
func (s *Store) DeleteSnapshots(ctx context.Context, item string, attempts ...int) error {
	if len(attempts) == 0 {
		return nil
	}
	ks := make([]string, len(attempts))
	for i, n := range attempts {
		ks[i] = s.k.snap(item, n)
	}
	if err := s.rdb.Del(ctx, ks...).Err(); err != nil {
		return fmt.Errorf("workitems: delete snapshots of %s: %w", item, err)
	}
	return nil
}

// RecordWorkspace records the base of an attempt's workspace under the fence, with an event
// saying where it came from and why it was (re)made.
func (s *Store) RecordWorkspace(ctx context.Context, f *Fence, base WorkspaceBase, why string) (*Item, error) {
	if base.Commit == "" || base.Tree == "" {
		return nil, fmt.Errorf("workitems: workspace of %s attempt %d: base without commit or tree", f.Item, f.Attempt)
	}
	return s.Update(ctx, f.Item, f, func(it *Item) ([]Event, error) {
		if err := guard(OpRecordWorkspace, it, f.Attempt); err != nil {
			return nil, err
		}
		a := it.Current()
		data := map[string]string{"commit": base.Commit, "kind": string(base.Kind), "host": base.Host}
		if base.Mirror != "" {
			data["mirror"] = base.Mirror
		}
		if base.Branch != "" {
			data["branch"] = base.Branch
		}
		if a.Base != nil && a.Base.Commit != base.Commit {
			data["previous_commit"] = a.Base.Commit
		}
		a.Base = &base
		msg := fmt.Sprintf("workspace prepared at %.12s (%s)", base.Commit, base.Kind)
		if why != "" {
			msg += ": " + why
		}
		return []Event{{Type: EventWorkspacePrepared, Attempt: a.N, Actor: base.Host, Message: msg, Data: data}}, nil
	})
}

// GetMany returns the items with these ids that exist, by id, in batches of one MGET each.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*Item, error) {
	out := make(map[string]*Item, len(ids))
	const batch = 500
	for len(ids) > 0 {
		n := min(batch, len(ids))
		items, err := s.getMany(ctx, ids[:n])
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			out[it.ID] = it
		}
		ids = ids[n:]
	}
	return out, nil
}
