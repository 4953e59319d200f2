package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"outerloop/internal/benchmark"
	"outerloop/lib/redistest"
	"outerloop/proc"
)

func benchCmd(g *globals) *cobra.Command {
	var rounds, sandboxRounds int
	var skipWorkspaces, skipSandbox, skipModDownload, coldCache bool
	var scale, cliTemplates, cliRuns, waitItems, fleetRepos int
	var cli bool
	var cliCompare string
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure outerloop's overhead against raw Redis and raw asynq, and workspace preparation against git worktree add, in the same run, on --redis",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.redisURL(nil, false)
			if err != nil {
				return err
			}
			opt, err := redis.ParseURL(url)
			if err != nil {
				return fmt.Errorf("redis URL: %w", err)
			}
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			ctx := cmd.Context()
			if err := rdb.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("redis at %s: %w", opt.Addr, err)
			}
			id := fmt.Sprintf("%d", clock.Now().UnixNano())
			e := benchmark.Env{Redis: rdb, Asynq: asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password},
				Prefix: "olbench:" + id + ":", Queue: "olbench-" + id}
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				redistest.DeleteMatching(cctx, rdb, e.Prefix+"*")
				for _, q := range []string{e.Queue + "-raw", e.Queue + "-ol", e.Queue + "-ol-urgent", e.Queue + "-waits", e.Queue + "-waits-urgent"} {
					redistest.DeleteMatching(cctx, rdb, "asynq:{"+q+"}*")
					rdb.SRem(cctx, "asynq:queues", q)
				}
			}()
			fmt.Fprintf(g.out, "outerloop bench on %s (keys under %s, removed afterwards)\n", opt.Addr, e.Prefix)
			if scale > 0 {
				return benchScale(ctx, g, e, url, scale, cliTemplates)
			}
			if cli {
				return benchCLI(ctx, g, e, url, cliTemplates, cliRuns, cliCompare)
			}
			results := benchmark.Run(e, g.out)
			fmt.Fprintf(g.out, "\n%-30s %14s   %-16s %14s   %s\n", "ours", "per op", "baseline", "per op", "ratio")
			for _, r := range results {
				fmt.Fprintf(g.out, "%-30s %14s   %-16s %14s   %.2fx\n", r.Name, time.Duration(r.NsPerOp),
					r.Baseline, time.Duration(r.BaselineNsPerOp), r.Ratio())
			}
			if waitItems > 0 {
				wf, err := benchmark.Waits(ctx, e, waitItems, g.out)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "\n%d items waiting for CI, next to an idle worker (concurrency 4)\n", wf.Items)
				fmt.Fprintf(g.out, "%-44s %12d   idle worker %d\n", "goroutines", wf.GoroutinesParked, wf.GoroutinesIdle)
				fmt.Fprintf(g.out, "%-44s %12s   idle worker %s\n", "heap in use", mib(int64(wf.HeapParked)), mib(int64(wf.HeapIdle)))
				fmt.Fprintf(g.out, "%-44s %12d\n", "Redis commands, poll round with none due", wf.IdleRoundCommands)
				fmt.Fprintf(g.out, "%-44s %12.1f   (%d due, %d commands, %s)\n", "Redis commands per due item, poll round",
					float64(wf.DueRoundCommands)/float64(max(wf.DueRoundItems, 1)), wf.DueRoundItems, wf.DueRoundCommands, wf.DueRound.Round(time.Millisecond))
			}
			if fleetRepos > 0 {
				figs, err := benchmark.FleetTick(ctx, e, []int{1, fleetRepos}, 5, g.out)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "\nfleet tick (an item per repository, held in the fleet's line; median of %d)\n", figs[0].Rounds)
				fmt.Fprintf(g.out, "%-44s %12s %16s\n", "repositories", "per tick", "per 100 repos")
				for _, f := range figs {
					fmt.Fprintf(g.out, "%-44d %12s %16s\n", f.Repos, f.Tick.Round(10*time.Microsecond), f.Per100().Round(10*time.Microsecond))
				}
			}
			if !skipSandbox {
				if err := benchSandbox(ctx, g, sandboxRounds, coldCache, !skipModDownload); err != nil {
					return err
				}
			}
			if skipWorkspaces {
				return nil
			}
			return benchWorkspaces(ctx, g, e, rounds)
		},
	}
	c.Flags().IntVar(&waitItems, "wait-items", 1000, "items parked in waiting to measure what waiting costs (0: skip)")
	c.Flags().IntVar(&fleetRepos, "fleet-repos", 400, "repositories of the fleet tick measured against a tick over one (0: skip)")
	c.Flags().IntVar(&rounds, "workspace-rounds", 5, "workspaces made each way (the median is reported)")
	c.Flags().IntVar(&scale, "scale", 0, "instead: fill a store with this many items and measure every list against GET /api/items")
	c.Flags().IntVar(&cliTemplates, "cli-templates", 10000, "with --scale or --cli: time CLI commands against a config of this many templates (0: skip)")
	c.Flags().BoolVar(&cli, "cli", false, "instead: only time CLI commands (a read, store commands, version) against a config of --cli-templates templates")
	c.Flags().IntVar(&cliRuns, "cli-runs", 7, "with --cli: runs of each command (the median is reported)")
	c.Flags().StringVar(&cliCompare, "cli-compare", "", "with --cli: also time this outerloop binary (another build), taking turns with this one")
	c.Flags().BoolVar(&skipWorkspaces, "skip-workspaces", false, "do not measure workspaces")
	c.Flags().BoolVar(&skipSandbox, "skip-sandbox", false, "do not measure the sandbox")
	c.Flags().IntVar(&sandboxRounds, "sandbox-rounds", 5, "runs of each sandbox command each way (the median is reported)")
	c.Flags().BoolVar(&skipModDownload, "skip-mod-download", false, "do not measure go mod download through the registries proxy (needs proxy.golang.org)")
	c.Flags().BoolVar(&coldCache, "sandbox-cold-cache", false, "also time one sandboxed go test with a cold per-workspace build cache (slow)")
	return c
}

// benchSandbox measures the runner: `true` and `go test ./...` on the sample module, bare
// against guarded and sandboxed, in the same run.
func benchSandbox(ctx context.Context, g *globals, rounds int, cold, modDownload bool) error {
	dir, err := os.MkdirTemp("", "olbench-sandbox-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	r, err := proc.NewRunner(ctx, proc.Setup{Workdir: filepath.Join(dir, "work")})
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "\nsandbox (%s)\n", r.Describe())
	f, err := benchmark.Sandbox(ctx, r, dir, max(rounds, 1), cold, g.out)
	if err != nil {
		return err
	}
	ratio := func(a, b time.Duration) string {
		if b <= 0 || a <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fx", float64(a)/float64(b))
	}
	fmt.Fprintf(g.out, "%-44s %12s   %s\n", "command (median of "+fmt.Sprint(f.Rounds)+")", "per run", "vs bare")
	fmt.Fprintf(g.out, "%-44s %12s\n", "true, bare (no guard, no sandbox)", f.TrueBare.Round(10*time.Microsecond))
	fmt.Fprintf(g.out, "%-44s %12s   %s\n", "true, guarded (mode off)", f.TrueGuard.Round(10*time.Microsecond), ratio(f.TrueGuard, f.TrueBare))
	fmt.Fprintf(g.out, "%-44s %12s   %s\n", "true, guarded + bubblewrap", f.TrueSandbox.Round(10*time.Microsecond), ratio(f.TrueSandbox, f.TrueBare))
	fmt.Fprintf(g.out, "%-44s %12s\n", "go test ./... (sample), bare", f.GoTestBare.Round(time.Millisecond))
	fmt.Fprintf(g.out, "%-44s %12s   %s\n", "go test ./... (sample), sandboxed", f.GoTestSandbox.Round(time.Millisecond), ratio(f.GoTestSandbox, f.GoTestBare))
	if f.GoTestSandboxColdCache > 0 {
		fmt.Fprintf(g.out, "%-44s %12s   %s\n", "go test, sandboxed, cold workspace cache", f.GoTestSandboxColdCache.Round(time.Millisecond), ratio(f.GoTestSandboxColdCache, f.GoTestBare))
	}
	if r.Unavailable != nil || !modDownload {
		return nil
	}
	// network registries: the same module download through the egress proxy and without it.
	m, err := benchmark.ModDownload(ctx, r, dir, max(rounds/2, 1), g.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "go mod download of %s, fresh GOMODCACHE each (median of %d)\n", m.Requires, m.Rounds)
	fmt.Fprintf(g.out, "%-44s %12s\n", "unsandboxed, straight to the proxy", m.Bare.Round(time.Millisecond))
	fmt.Fprintf(g.out, "%-44s %12s   %s\n", "sandboxed, network registries", m.Sandboxed.Round(time.Millisecond), ratio(m.Sandboxed, m.Bare))
	if m.SandboxedWorkerCache > 0 {
		fmt.Fprintf(g.out, "%-44s %12s   %s\n", "sandboxed, worker's module cache offered", m.SandboxedWorkerCache.Round(time.Millisecond), ratio(m.SandboxedWorkerCache, m.Bare))
	}
	return nil
}

// benchWorkspaces compares workspace preparation and disk per attempt with git worktree add
// from the same mirror, on a generated repository (GOROOT source and a long history), and a
// checkpoint with a workspace snapshot with one without.
func benchWorkspaces(ctx context.Context, g *globals, e benchmark.Env, rounds int) error {
	dir, err := os.MkdirTemp("", "olbench-ws-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(g.out, "\nworkspaces (in %s, removed afterwards)\n", dir)
	f, err := benchmark.Workspaces(ctx, dir, benchmark.DefaultRepo, max(rounds, 1), g.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.out, "repository: %d files, checkout %s, .git %s; mirror %s\n", f.Files, mib(f.CheckoutBytes), mib(f.RepoBytes), mib(f.MirrorBytes))
	var base benchmark.WorkspaceResult
	for _, r := range f.Results {
		if r.Baseline {
			base = r
		}
	}
	fmt.Fprintf(g.out, "\n%-52s %12s %8s %12s %8s\n", "per attempt", "time", "ratio", "disk", "ratio")
	for _, r := range f.Results {
		fmt.Fprintf(g.out, "%-52s %12s %7.2fx %12s %7.2fx\n", r.Name, r.PerOp.Round(time.Millisecond),
			float64(r.PerOp)/float64(base.PerOp), mib(r.Disk), float64(r.Disk)/float64(base.Disk))
	}
	fmt.Fprintln(g.out, "\n  measuring checkpoints with a workspace snapshot…")
	plain := testing.Benchmark(func(b *testing.B) { benchmark.CheckpointWrite(b, e) })
	same := testing.Benchmark(func(b *testing.B) { benchmark.CheckpointSnapshot(b, e, f.Source, false) })
	changed := testing.Benchmark(func(b *testing.B) { benchmark.CheckpointSnapshot(b, e, f.Source, true) })
	per := func(r testing.BenchmarkResult) time.Duration {
		return time.Duration(r.T.Nanoseconds() / int64(max(r.N, 1)))
	}
	fmt.Fprintf(g.out, "\n%-52s %12s %8s\n", "checkpoint write", "per op", "ratio")
	for _, row := range []struct {
		name string
		r    testing.BenchmarkResult
	}{{"without snapshot (baseline)", plain}, {"with snapshot, tree unchanged (no diff written)", same}, {"with snapshot, one file changed", changed}} {
		fmt.Fprintf(g.out, "%-52s %12s %7.1fx\n", row.name, per(row.r), float64(per(row.r))/float64(per(plain)))
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
