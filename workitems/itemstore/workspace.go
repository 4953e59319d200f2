package itemstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// encodeSnapshot stores the tree id on the first line, so that a reader can tell whether the
// diff it found belongs to the tree its checkpoint names.
func encodeSnapshot(s *workitems.Snapshot) []byte {
	b := make([]byte, 0, len(s.Tree)+1+len(s.Patch)+16)
	b = append(b, s.Tree...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(s.Bytes), 10)
	b = append(b, '\n')
	return append(b, s.Patch...)
}

func decodeSnapshot(b []byte) (*workitems.Snapshot, error) {
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
	return &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: string(tree), Bytes: n}, Patch: patch}, nil
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// snapshotOp is what a write does to the stored diff.
func snapshotOp(s *workitems.Snapshot) (op string, val []byte) {
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
func (s *Store) LoadSnapshot(ctx context.Context, item string, n int) (*workitems.Snapshot, error) {
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
func (s *Store) RecordWorkspace(ctx context.Context, f *Fence, base workitems.WorkspaceBase, why string) (*workitems.Item, error) {
	if base.Commit == "" || base.Tree == "" {
		return nil, fmt.Errorf("workitems: workspace of %s attempt %d: base without commit or tree", f.Item, f.Attempt)
	}
	return s.Update(ctx, f.Item, f, func(it *workitems.Item) ([]workitems.Event, error) {
		if err := guard(workitems.OpRecordWorkspace, it, f.Attempt); err != nil {
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
		return []workitems.Event{{Type: workitems.EventWorkspacePrepared, Attempt: a.N, Actor: base.Host, Message: msg, Data: data}}, nil
	})
}

// GetMany returns the items with these ids that exist, by id, in batches of one MGET each.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*workitems.Item, error) {
	out := make(map[string]*workitems.Item, len(ids))
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
