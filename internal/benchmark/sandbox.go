package benchmark

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"outerloop/internal/sample"
	"outerloop/proc"
)

// SandboxFigures are medians of the same commands run each way, interleaved in one run.
type SandboxFigures struct {
	TrueBare, TrueGuard, TrueSandbox time.Duration // `true`: no guard, guard only, guard + bubblewrap
	GoTestBare, GoTestSandbox        time.Duration // `go test ./...` on the sample module (warm shared build cache)
	GoTestSandboxColdCache           time.Duration // sandboxed, build_cache: workspace (a cold cache), one run
	Rounds                           int
	SandboxUnavailable               error
}

// Sandbox measures the runner's cost: `true` and `go test ./...` on the sample module, bare
// (no guard, no sandbox) against guarded and sandboxed. r must be a guarded Runner of a binary
// that calls proc.MaybeGuard; cold adds one sandboxed go test with a cache of its own.
func Sandbox(ctx context.Context, r *proc.Runner, dir string, rounds int, cold bool, progress io.Writer) (SandboxFigures, error) {
	f := SandboxFigures{Rounds: rounds, SandboxUnavailable: r.Unavailable}
	mod := filepath.Join(dir, "sample")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return f, err
	}
	if err := sample.Write(mod); err != nil {
		return f, err
	}
	if err := sample.Fix(mod); err != nil {
		return f, err
	}
	env := proc.BaseEnv()
	bare := &proc.Runner{Mode: proc.ModeOff}
	guardOnly := *r
	guardOnly.Mode = proc.ModeOff
	run := func(rr *proc.Runner, mode proc.Mode, cmd string, p proc.Policy) (time.Duration, error) {
		p.Mode, p.Workspace = mode, mod
		start := wall.Now()
		res := rr.Run(ctx, proc.Spec{Command: cmd, Dir: mod, Env: env, Policy: p})
		d := wall.Now().Sub(start)
		if res.Err != nil || res.ExitCode != 0 {
			return d, fmt.Errorf("bench %q (%s): exit %d %v: %s", cmd, mode, res.ExitCode, res.Err, res.Tail)
		}
		return d, nil
	}
	var tb, tg, ts, gb, gs []time.Duration
	// One unmeasured go test each way warms the shared build cache for both.
	if _, err := run(bare, proc.ModeOff, "go test ./...", proc.Policy{}); err != nil {
		return f, err
	}
	for i := range rounds {
		fmt.Fprintf(progress, "  sandbox round %d/%d…\n", i+1, rounds)
		for _, m := range []struct {
			rr   *proc.Runner
			mode proc.Mode
			cmd  string
			out  *[]time.Duration
		}{
			{bare, proc.ModeOff, "true", &tb}, {&guardOnly, proc.ModeOff, "true", &tg}, {r, proc.ModeBwrap, "true", &ts},
			{bare, proc.ModeOff, "go test ./...", &gb}, {r, proc.ModeBwrap, "go test ./...", &gs},
		} {
			if m.mode == proc.ModeBwrap && r.Unavailable != nil {
				continue
			}
			d, err := run(m.rr, m.mode, m.cmd, proc.Policy{})
			if err != nil {
				return f, err
			}
			*m.out = append(*m.out, d)
		}
	}
	f.TrueBare, f.TrueGuard, f.TrueSandbox = median(tb), median(tg), median(ts)
	f.GoTestBare, f.GoTestSandbox = median(gb), median(gs)
	if cold && r.Unavailable == nil {
		fmt.Fprintln(progress, "  sandboxed go test with a cold, per-workspace build cache…")
		d, err := run(r, proc.ModeBwrap, "go test ./...", proc.Policy{GoCache: filepath.Join(dir, "gocache")})
		if err != nil {
			return f, err
		}
		f.GoTestSandboxColdCache = d
	}
	return f, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
