package worker

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"outerloop/lib/periodic"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// DiskObserver receives the disk a worker's work dir uses (metrics.WorkspaceDisk implements it).
type DiskObserver interface {
	WorkspaceDisk(workspaces, mirrors int64)
}

// SweeperOptions configures a Sweeper.
type SweeperOptions struct {
	Workspaces *Workspaces
	Store      *itemstore.Store
	Retention  config.Retention
	Every      time.Duration // default 10m
	Clock      workitems.Clock
	Logger     *slog.Logger
	Disk       DiskObserver
}

// Sweeper removes the workspaces this host holds once their items ended: those of closed and
// cancelled items at once (the handler also does it right after its decision), those of
// escalated and failed items once the retention passed, those of items the store no longer has,
// and the temporary directories of preparations that crashed. An item's workspaces can live on
// several hosts, so every worker runs one over its own work dir. After each sweep it reports the
// disk the workspaces and mirrors use.
type Sweeper struct {
	o    SweeperOptions
	loop *periodic.Loop
}

// NewSweeper returns a sweeper (not started).
func NewSweeper(o SweeperOptions) *Sweeper {
	if o.Every <= 0 {
		o.Every = 10 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Retention = o.Retention.WithDefaults()
	s := &Sweeper{o: o}
	s.loop = &periodic.Loop{Every: o.Every, Clock: o.Clock, Logger: o.Logger, What: "workspace sweep failed",
		Pass: func(ctx context.Context) error { _, err := s.Sweep(ctx); return err }}
	return s
}

// Start sweeps now and then every o.Every until Shutdown.
func (s *Sweeper) Start() {
	s.loop.Start()
}

// Shutdown stops the sweeper and waits for a pass under way.
func (s *Sweeper) Shutdown() { s.loop.Shutdown() }

// SweepReport is what one sweep did.
type SweepReport struct {
	Removed        int   // workspaces removed
	Freed          int64 // bytes they took
	Kept           int   // workspaces of items still open or within the retention
	Temporary      int   // leftovers of crashed preparations removed
	WorkspaceBytes int64 // disk used after the sweep
	MirrorBytes    int64
}

// tmpMinAge spares a temporary directory made this instant, before its maker could lock it.
const tmpMinAge = time.Minute

// Sweep runs one pass over this host's workspaces of the deployment.
func (s *Sweeper) Sweep(ctx context.Context) (SweepReport, error) {
	var r SweepReport
	w := s.o.Workspaces
	now := s.o.Clock.Now()
	items, err := os.ReadDir(w.deploymentDir())
	if err != nil && !os.IsNotExist(err) {
		return r, err
	}
	ids := map[string]bool{}
	for _, e := range items {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(w.deploymentDir(), e.Name())
		if strings.HasPrefix(e.Name(), ".tmp-") {
			r.Temporary += removeStaleTmp(dir, now)
			continue
		}
		ents, _ := os.ReadDir(dir)
		for _, f := range ents {
			name := f.Name()
			switch {
			case strings.HasPrefix(name, ".tmp-"):
				r.Temporary += removeStaleTmp(filepath.Join(dir, name), now)
			case strings.HasSuffix(name, ".json") && strings.HasPrefix(name, "attempt-"):
				if m, err := readMeta(filepath.Join(dir, name)); err == nil && m.Item != "" {
					ids[m.Item] = true
				}
			}
		}
	}
	r.Temporary += removeStaleTmpIn(w.mirrorsDir(), now)
	if len(ids) > 0 {
		list := make([]string, 0, len(ids))
		for id := range ids {
			list = append(list, id)
		}
		found, err := s.o.Store.GetMany(ctx, list)
		if err != nil {
			return r, err
		}
		for _, id := range list {
			it, ok := found[id]
			due, why := WorkspaceDue(it, ok, now, s.o.Retention)
			if !due {
				r.Kept += len(w.Attempts(id))
				continue
			}
			if !ok {
				it = &workitems.Item{ID: id} // gone from the store: nobody to tell
			}
			n, freed := removeWorkspaces(ctx, w, s.o.Store, it, why, s.o.Logger)
			r.Removed += n
			r.Freed += freed
			if n > 0 {
				s.o.Logger.Info("workspaces removed", "item", id, "count", n, "bytes", freed, "why", why)
			}
		}
	}
	r.WorkspaceBytes = diskUsage(filepath.Join(w.Root, "workspaces"))
	r.MirrorBytes = diskUsage(w.mirrorsDir())
	if s.o.Disk != nil {
		s.o.Disk.WorkspaceDisk(r.WorkspaceBytes, r.MirrorBytes)
	}
	return r, nil
}

// WorkspaceDue says whether an item's workspaces are to be removed now, and why: at once when it
// closed, was cancelled or no longer exists; after the retention when it escalated or failed;
// never while it is open (a resume or a person may still need them).
func WorkspaceDue(it *workitems.Item, exists bool, now time.Time, r config.Retention) (bool, string) {
	if !exists || it == nil {
		return true, "item no longer in the store"
	}
	keep := r.WithDefaults().Workspaces.D()
	switch it.State {
	case workitems.StateClosed, workitems.StateCancelled:
		return true, "item " + string(it.State)
	case workitems.StateFailed:
		return !now.Before(it.UpdatedAt.Add(keep)), "item failed " + keep.String() + " ago"
	case workitems.StateEscalated:
		at := it.UpdatedAt
		if it.Escalation != nil {
			at = it.Escalation.At
		}
		return !now.Before(at.Add(keep)), "item escalated " + keep.String() + " ago"
	}
	return false, ""
}

func removeStaleTmpIn(dir string, now time.Time) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".tmp-") {
			n += removeStaleTmp(filepath.Join(dir, e.Name()), now)
		}
	}
	return n
}

// removeStaleTmp removes a temporary directory whose maker is gone: older than tmpMinAge and
// not locked (a live preparation of a workspace or a mirror holds an flock on it; a crashed
// one's lock died with it).
func removeStaleTmp(dir string, now time.Time) int {
	fi, err := os.Stat(dir)
	if err != nil || now.Sub(fi.ModTime()) < tmpMinAge {
		return 0
	}
	f, err := os.Open(dir)
	if err != nil {
		return 0
	}
	defer f.Close()
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0 // in use
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0
	}
	return 1
}

// diskUsage is the disk a directory tree takes (allocated blocks; a hard-linked file once).
func diskUsage(root string) int64 {
	var total int64
	seen := map[[2]uint64]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			k := [2]uint64{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}
