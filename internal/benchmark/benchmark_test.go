package benchmark

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"outerloop/lib/redistest"
	"outerloop/proc"
	"outerloop/proc/proctest"
)

func env(b *testing.B) Env {
	e := redistest.New(b)
	return Env{Redis: e.Client, Asynq: redistest.AsynqOpt(b), Prefix: e.Prefix, Queue: e.Queue}
}

// Run the pairs together: go test -bench . -run XXX ./internal/benchmark/
func BenchmarkRawRedisRoundTrip(b *testing.B) { RawRoundTrip(b, env(b)) }
func BenchmarkCheckpointWrite(b *testing.B)   { CheckpointWrite(b, env(b)) }
func BenchmarkRawAsynqTask(b *testing.B)      { RawAsynq(b, env(b)) }
func BenchmarkOuterloopItem(b *testing.B)     { Item(b, env(b)) }

// TestItemBenchmarkCompletes runs the end-to-end pair once as a test so that a broken benchmark
// fails CI instead of hanging the next person's `bench`.
func TestItemBenchmarkCompletes(t *testing.T) {
	e := redistest.New(t)
	en := Env{Redis: e.Client, Asynq: redistest.AsynqOpt(t), Prefix: e.Prefix, Queue: e.Queue}
	for _, f := range []func(*testing.B, Env){Item, RawAsynq} {
		r := testing.Benchmark(func(b *testing.B) { f(b, en) })
		if r.N < 1 {
			t.Fatal("benchmark did not run")
		}
	}
}

var (
	repoOnce sync.Once
	repoDir  string
	repoErr  error
)

// smallRepo generates SmallRepo once per test binary (removed by TestMain).
func smallRepo(tb testing.TB) string {
	tb.Helper()
	repoOnce.Do(func() {
		if repoDir, repoErr = os.MkdirTemp("", "olbench-repo-"); repoErr == nil {
			repoErr = GenerateRepo(context.Background(), filepath.Join(repoDir, "src"), SmallRepo)
		}
	})
	if repoErr != nil {
		tb.Fatal(repoErr)
	}
	return filepath.Join(repoDir, "src")
}

func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	code := m.Run()
	if repoDir != "" {
		os.RemoveAll(repoDir)
	}
	if err := goleak.Find(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

// Workspace preparation against `git worktree add` from the same mirror:
// go test -run XXX -bench 'Prepare|Worktree' ./internal/benchmark/
func BenchmarkPrepareWorkspace(b *testing.B) { PrepareWorkspace(b, smallRepo(b)) }
func BenchmarkWorktreeAdd(b *testing.B)      { WorktreeAdd(b, smallRepo(b)) }

// A checkpoint with a workspace snapshot against one without (BenchmarkCheckpointWrite):
// go test -run XXX -bench 'Checkpoint' ./internal/benchmark/
func BenchmarkCheckpointSnapshotChanged(b *testing.B) {
	CheckpointSnapshot(b, env(b), smallRepo(b), true)
}
func BenchmarkCheckpointSnapshotUnchanged(b *testing.B) {
	CheckpointSnapshot(b, env(b), smallRepo(b), false)
}

// TestWorkspaceBenchmarkReportsEveryWay runs the workspace comparison once, small, so that a
// broken benchmark fails CI, and checks the figures are what the design promises: a workspace
// costs a checkout, not a history.
func TestWorkspaceBenchmarkReportsEveryWay(t *testing.T) {
	t.Parallel()
	f, err := Workspaces(t.Context(), t.TempDir(), SmallRepo, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != 3 || f.Files == 0 || f.MirrorBytes <= 0 {
		t.Fatalf("figures %+v", f)
	}
	ours, worktree, clone := f.Results[0], f.Results[1], f.Results[2]
	if ours.Disk <= 0 || ours.Disk > f.CheckoutBytes*2 || clone.Disk < ours.Disk+f.MirrorBytes/2 {
		t.Fatalf("disk per attempt: ours %d, worktree %d, clone %d; checkout %d, mirror %d",
			ours.Disk, worktree.Disk, clone.Disk, f.CheckoutBytes, f.MirrorBytes)
	}
	for _, name := range []string{"Checkpoint snapshot changed", "unchanged"} {
		r := testing.Benchmark(func(b *testing.B) {
			CheckpointSnapshot(b, env(b), smallRepo(b), name != "unchanged")
		})
		if r.N < 1 {
			t.Fatalf("%s did not run", name)
		}
	}
}

// TestModDownloadBenchmarkRunsBothWays runs the go mod download comparison once (it needs the
// real module proxy and bubblewrap), so that a broken benchmark fails here.
func TestModDownloadBenchmarkRunsBothWays(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	r.GoModCache = goEnvOf(t, "GOMODCACHE")
	f, err := ModDownload(t.Context(), r, t.TempDir(), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("go mod download of %s: bare %s, sandboxed %s, sandboxed with the worker's cache %s", f.Requires, f.Bare, f.Sandboxed, f.SandboxedWorkerCache)
	if f.Bare <= 0 || f.Sandboxed <= 0 || f.SandboxedWorkerCache <= 0 {
		t.Fatalf("figures %+v", f)
	}
}

func goEnvOf(t *testing.T, k string) string {
	b, err := exec.Command("go", "env", k).Output()
	if err != nil {
		t.Skipf("go env %s: %v", k, err)
	}
	return strings.TrimSpace(string(b))
}

// Parking items in waiting starts no goroutine; an idle poll round is one Redis command, and a
// round over due items costs a few commands per item.
func TestWaitingItemsCostNoGoroutinesAndPollRoundsArePerDueItem(t *testing.T) {
	re := redistest.New(t)
	e := Env{Redis: re.Client, Asynq: redistest.AsynqOpt(t), Prefix: re.Prefix, Queue: re.Queue}
	f, err := Waits(context.Background(), e, 200, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", f)
	if f.GoroutinesParked != f.GoroutinesIdle {
		t.Errorf("goroutines %d with 200 waiting items, %d idle", f.GoroutinesParked, f.GoroutinesIdle)
	}
	if f.IdleRoundCommands != 1 {
		t.Errorf("an idle round sent %d commands, want 1", f.IdleRoundCommands)
	}
	if f.DueRoundItems != 200 || f.DueRoundCommands > 3*int64(f.DueRoundItems)+1 {
		t.Errorf("a due round over %d items sent %d commands", f.DueRoundItems, f.DueRoundCommands)
	}
}

// A fleet tick costs the same Redis commands per repository however many it has: linear, not
// worse (the time is reported by outerloop bench; commands are what can be asserted).
func TestAFleetTickCostsTheSameCommandsPerRepository(t *testing.T) {
	re := redistest.New(t)
	e := Env{Redis: re.Client, Asynq: redistest.AsynqOpt(t), Prefix: re.Prefix, Queue: re.Queue}
	figs, err := FleetTick(context.Background(), e, []int{1, 10, 100}, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", figs)
	per := figs[0].Commands
	for _, f := range figs {
		if f.Commands != per*int64(f.Repos) {
			t.Errorf("a tick over %d repositories sent %d commands, want %d (%d per repository)", f.Repos, f.Commands, per*int64(f.Repos), per)
		}
	}
}
