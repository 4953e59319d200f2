package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"go.yaml.in/yaml/v3"

	"outerloop/internal/benchmark"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// benchScale fills a store with n items through the store's code path and measures every
// list of the API and the console against GET /api/items's first page in the same run, then
// times CLI commands against a config of cliTemplates templates.
func benchScale(ctx context.Context, g *globals, e benchmark.Env, url string, n, cliTemplates int) error {
	const templates = 100
	st := itemstore.NewStore(e.Redis, e.Prefix)
	before := e.Redis.Info(ctx, "memory").Val()
	fmt.Fprintf(g.out, "\nscale: filling %d items over %d templates through Store.Create and Store.Update\n", n, templates)
	f, err := benchmark.Fill(ctx, st, n, templates, g.out)
	if err != nil {
		return fmt.Errorf("bench --scale: fill: %w", err)
	}
	after := e.Redis.Info(ctx, "memory").Val()
	fmt.Fprintf(g.out, "  filled in %s (%.0f items/s); Redis used_memory %s → %s\n", f.Took.Round(time.Second),
		float64(n)/f.Took.Seconds(), infoField(before, "used_memory_human"), infoField(after, "used_memory_human"))
	cfg := &config.Config{}
	for i := range templates {
		cfg.Templates = append(cfg.Templates, config.Template{Name: fmt.Sprintf("t%03d", i), Goal: "bench",
			Loop: config.Loop{Kind: workitems.LoopScript}})
	}
	client := asynq.NewClient(e.Asynq)
	defer client.Close()
	q := scheduler.NewQueue(st, client, nil, cfg, scheduler.QueueOptions{Queue: e.Queue})
	reads, err := benchmark.Scale(ctx, q, n, 15)
	if err != nil {
		return fmt.Errorf("bench --scale: %w", err)
	}
	fmt.Fprintf(g.out, "\n%-36s %-58s %10s %8s %10s\n", "read", "path", "median", "× first", "alloc/req")
	for _, r := range reads {
		fmt.Fprintf(g.out, "%-36s %-58s %10s %7.2fx %8.2f MB\n", r.Name, r.Path, r.Median.Round(10*time.Microsecond), r.Relative, r.AllocMB)
	}
	if cliTemplates <= 0 {
		return nil
	}
	return benchCLI(ctx, g, e, url, cliTemplates, 5, "")
}

// benchCLI times real CLI commands (this binary, and compare's when given, the two taking
// turns so a load spike hits them alike) against a config of n templates, on a deployment
// prefix of their own holding one item: the cost of opening the app for each command, against
// `version` (which parses the whole config and opens nothing) in the same run.
func benchCLI(ctx context.Context, g *globals, e benchmark.Env, url string, n, runs int, compare string) error {
	dir, err := os.MkdirTemp("", "olbench-cli-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var b strings.Builder
	b.WriteString("defaults:\n  budget: {wall_time: 10m}\ntemplates:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: t%05d\n    goal: do it\n    schedule: \"%d %d * * *\"\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n",
			i, i%60, (i/60)%24)
		if i == 0 { // a fleet, for templates status
			b.WriteString("    repos: [/nonexistent/a, /nonexistent/b]\n")
		}
	}
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	prefix := e.Prefix + "cli:"
	it := &workitems.Item{ID: "t00000@bench", Template: "t00000", Goal: "do it", MaxAttempts: 3,
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "bench"}}
	if err := itemstore.NewStore(e.Redis, prefix).Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		return fmt.Errorf("bench: the item of items ID: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bins := []string{self}
	if compare != "" {
		bins = append(bins, compare)
	}
	fmt.Fprintf(g.out, "\nCLI commands with %d templates (median of %d runs of each binary, taking turns; CPU = user + sys of the process and its children)\n", n, runs)
	// Baselines of the same run: the binary starting with no config (process start), and
	// parsing the config alone (version loads it and prints its hash); the commands add
	// opening the app and their reads.
	t0 := clock.Now()
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(b.String()), &node); err != nil {
		return err
	}
	fmt.Fprintf(g.out, "  %-40s %10s\n", "baseline: yaml.v3 decode to nodes", clock.Now().Sub(t0).Round(time.Millisecond))
	fmt.Fprintf(g.out, "  %-40s", "command")
	for i := range bins {
		fmt.Fprintf(g.out, " %10s %10s %12s", fmt.Sprintf("wall [%d]", i), fmt.Sprintf("CPU [%d]", i), fmt.Sprintf("− version [%d]", i))
	}
	fmt.Fprintln(g.out)
	for i, bin := range bins {
		fmt.Fprintf(g.out, "  [%d] %s\n", i, bin)
	}
	cmds := [][]string{{"version", "--config", filepath.Join(dir, "none.yaml")}, {"version"}, {"items", it.ID},
		{"items", "--limit", "1"}, {"escalations"}, {"gc", "--dry-run"}, {"templates", "history", "t00000"},
		{"templates", "status", "t00000"}, {"templates", "controls", "t00000"}}
	version := make([]time.Duration, len(bins))
	for _, args := range cmds {
		wall := make([][]time.Duration, len(bins))
		cpu := make([][]time.Duration, len(bins))
		for range runs {
			for i, bin := range bins {
				cmd := exec.CommandContext(ctx, bin, append([]string{"--config", path, "--redis", url, "--prefix", prefix, "--queue", e.Queue + "-cli"}, args...)...)
				t0 := clock.Now()
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("bench: %s %v: %w: %s", bin, args, err, out)
				}
				wall[i] = append(wall[i], clock.Now().Sub(t0))
				cpu[i] = append(cpu[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			}
		}
		label := "outerloop " + strings.Join(args, " ")
		if args[0] == "version" && len(args) > 1 {
			label = "outerloop version (no config: baseline)"
		}
		fmt.Fprintf(g.out, "  %-40s", label)
		for i := range bins {
			w, c := middle(wall[i]), middle(cpu[i])
			if len(args) == 1 && args[0] == "version" {
				version[i] = w
			}
			over := "-"
			if version[i] > 0 && args[0] != "version" {
				over = (w - version[i]).Round(time.Millisecond).String()
			}
			fmt.Fprintf(g.out, " %10s %10s %12s", w.Round(time.Millisecond), c.Round(time.Millisecond), over)
		}
		fmt.Fprintln(g.out)
	}
	return nil
}

// middle sorts ds and returns its median.
func middle(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return "?"
}
