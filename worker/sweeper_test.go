package worker

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

func TestWorkspaceDueByItemState(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := config.Retention{Workspaces: workitems.Duration(72 * time.Hour)}
	at := func(state workitems.State, ago time.Duration) *workitems.Item {
		it := &workitems.Item{ID: "x@1", State: state, UpdatedAt: now.Add(-ago)}
		if state == workitems.StateEscalated {
			it.Escalation = &workitems.Escalation{At: now.Add(-ago)}
			it.UpdatedAt = now // a later write to the item does not restart the clock
		}
		return it
	}
	cases := []struct {
		name string
		it   *workitems.Item
		gone bool
		want bool
	}{
		{"gone from the store", nil, true, true},
		{"closed a second ago", at(workitems.StateClosed, time.Second), false, true},
		{"cancelled", at(workitems.StateCancelled, time.Second), false, true},
		{"failed within the retention", at(workitems.StateFailed, 71*time.Hour), false, false},
		{"failed past the retention", at(workitems.StateFailed, 72*time.Hour), false, true},
		{"escalated within the retention", at(workitems.StateEscalated, 71*time.Hour), false, false},
		{"escalated past the retention", at(workitems.StateEscalated, 73*time.Hour), false, true},
	}
	for _, s := range []workitems.State{workitems.StateQueued, workitems.StateRunning, workitems.StateVerifying, workitems.StateRetryWait} {
		cases = append(cases, struct {
			name string
			it   *workitems.Item
			gone bool
			want bool
		}{"open: " + string(s) + " for a year", at(s, 365*24*time.Hour), false, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, why := WorkspaceDue(c.it, !c.gone, now, r); got != c.want || (got && why == "") {
				t.Fatalf("due=%v (%q), want %v", got, why, c.want)
			}
		})
	}
}

type diskGauge struct {
	mu                  sync.Mutex
	workspaces, mirrors int64
	calls               int
}

func (d *diskGauge) WorkspaceDisk(w, m int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.workspaces, d.mirrors, d.calls = w, m, d.calls+1
}

func TestTheSweeperRemovesWhatIsDueAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := redistest.New(t)
	// Real time as the start: the sweeper compares leftovers' file times with its clock.
	clock := fakeclock.New(time.Now())
	st := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	src := sourceRepo(t, 3, 2)
	w := &Workspaces{Root: t.TempDir(), Deployment: env.Prefix}

	// One item per fate, each with a workspace (and a stored snapshot) on this host.
	mk := func(id string, end func(f *itemstore.Fence)) *Workspace {
		t.Helper()
		if err := st.Create(ctx, &workitems.Item{ID: id, Template: "t", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		f, err := st.AcquireLease(ctx, id, 1, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.StartAttempt(ctx, f, "w"); err != nil {
			t.Fatal(err)
		}
		ws, err := w.Prepare(ctx, id, 1, src)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: []byte("{}"),
			Snapshot: &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: "t1"}}}); err != nil {
			t.Fatal(err)
		}
		if end != nil {
			end(f)
		}
		return ws
	}
	decide := func(o workitems.Outcome) func(*itemstore.Fence) {
		return func(f *itemstore.Fence) {
			if _, err := st.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RecordDecision(ctx, f, workitems.Decision{Outcome: o, Rule: "test", Actor: "test"}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	closed := mk("closed@1", decide(workitems.OutcomeClose))
	escalated := mk("escalated@1", decide(workitems.OutcomeEscalate))
	failed := mk("failed@1", func(f *itemstore.Fence) { _, _ = st.Fail(ctx, f.Item, f, "broken") })
	open := mk("open@1", nil)
	gone := mk("gone@1", nil)
	if err := env.Client.Del(ctx, env.Prefix+"item:gone@1").Err(); err != nil { // deleted by item retention
		t.Fatal(err)
	}
	// A crashed preparation's leftover, and one under way (locked) that must survive.
	stale := filepath.Join(filepath.Dir(open.Dir), ".tmp-crashed")
	live := filepath.Join(filepath.Dir(open.Dir), ".tmp-live")
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(d, old, old)
	}
	lock, _ := os.Open(live)
	defer lock.Close()
	if err := flock(lock, syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	gauge := &diskGauge{}
	sw := NewSweeper(SweeperOptions{Workspaces: w, Store: st, Clock: clock, Disk: gauge, Logger: slog.New(slog.DiscardHandler)})
	r, err := sw.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(ws *Workspace) bool { _, err := os.Stat(ws.Dir); return err == nil }
	if exists(closed) || exists(gone) || !exists(escalated) || !exists(failed) || !exists(open) {
		t.Fatalf("after the first sweep: closed %v gone %v escalated %v failed %v open %v",
			exists(closed), exists(gone), exists(escalated), exists(failed), exists(open))
	}
	if r.Removed != 2 || r.Kept != 3 || r.Temporary != 1 || r.Freed <= 0 {
		t.Fatalf("report %+v", r)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("a crashed preparation's directory was left")
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatal("a preparation under way was removed")
	}
	mirror := w.mirrorDir(closed.Base.Mirror)
	if refs := run(t, mirror, "for-each-ref", "--format=%(refname)", "refs/outerloop/"); len(refs) == 0 ||
		strings.Contains(refs, "closed_at_1") || !strings.Contains(refs, "escalated_at_1") {
		t.Fatalf("base refs after the sweep:\n%s", refs)
	}
	if sn, _ := st.LoadSnapshot(ctx, "closed@1", 1); sn != nil {
		t.Fatal("the closed item's snapshot is still stored")
	}
	if sn, _ := st.LoadSnapshot(ctx, "escalated@1", 1); sn == nil {
		t.Fatal("the escalated item's snapshot went before its workspace")
	}
	evs, _ := st.Events(ctx, "closed@1", "", 100, 0)
	if e := evs[len(evs)-1]; e.Type != workitems.EventWorkspaceRemoved || e.Data["why"] != "item closed" {
		t.Fatalf("last event of the closed item: %+v", e)
	}
	if gauge.calls != 1 || gauge.workspaces <= 0 || gauge.mirrors <= 0 {
		t.Fatalf("disk gauge %+v", gauge)
	}
	before := gauge.workspaces

	// Three days later the escalated and failed items' workspaces go too; the open one stays.
	clock.Advance(72 * time.Hour)
	if r, err = sw.Sweep(ctx); err != nil || r.Removed != 2 || r.Kept != 1 {
		t.Fatalf("second sweep: %+v %v", r, err)
	}
	if exists(escalated) || exists(failed) || !exists(open) {
		t.Fatal("retention not applied")
	}
	if gauge.workspaces >= before {
		t.Fatalf("disk used did not drop: %d → %d", before, gauge.workspaces)
	}
}

func TestTheSweeperRunsUntilShutdown(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	clock := fakeclock.New(time.Now())
	gauge := &diskGauge{}
	sw := NewSweeper(SweeperOptions{Workspaces: &Workspaces{Root: t.TempDir()}, Store: itemstore.NewStore(env.Client, env.Prefix),
		Clock: clock, Every: time.Minute, Disk: gauge})
	sw.Start()
	clock.BlockUntil(1, nil) // the first sweep ran and waits for the next
	clock.Advance(time.Minute)
	clock.BlockUntil(1, nil)
	sw.Shutdown()
	gauge.mu.Lock()
	defer gauge.mu.Unlock()
	if gauge.calls < 2 {
		t.Fatalf("sweeps: %d", gauge.calls)
	}
}
