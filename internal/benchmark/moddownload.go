package benchmark

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"outerloop/proc"
)

// ModDownloadFigures are medians of `go mod download` of the same module, each run into a fresh
// module cache, interleaved in one run.
type ModDownloadFigures struct {
	Bare      time.Duration // unsandboxed, straight to the module proxy
	Sandboxed time.Duration // network registries: through the worker's egress proxy
	// SandboxedWorkerCache is sandboxed with the worker's module cache offered first (the
	// default); 0 when the worker has no module cache. Warm only for modules it holds.
	SandboxedWorkerCache time.Duration
	Rounds               int
	Requires             string
}

// modDownloadRequires is what the measured module requires: a few modules of some size.
const modDownloadRequires = "golang.org/x/text v0.14.0, golang.org/x/mod v0.14.0, golang.org/x/sync v0.5.0"

// ModDownload measures network registries' cost on a module download: `go mod download` of a
// module requiring modDownloadRequires, unsandboxed against sandboxed through the proxy (the
// worker's cache not offered, so both download the same bytes), each run with a fresh
// GOMODCACHE. r must be a guarded Runner whose sandbox starts.
func ModDownload(ctx context.Context, r *proc.Runner, dir string, rounds int, progress io.Writer) (ModDownloadFigures, error) {
	f := ModDownloadFigures{Rounds: rounds, Requires: modDownloadRequires}
	mod := filepath.Join(dir, "bump")
	if err := os.MkdirAll(filepath.Join(mod, ".git"), 0o755); err != nil {
		return f, err
	}
	goMod := "module bump\n\ngo 1.22\n\nrequire (\n\tgolang.org/x/text v0.14.0\n\tgolang.org/x/mod v0.14.0\n\tgolang.org/x/sync v0.5.0\n)\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(goMod), 0o644); err != nil {
		return f, err
	}
	noCache := *r
	noCache.GoModCache = ""
	bare := &proc.Runner{Mode: proc.ModeOff}
	n := 0
	run := func(rr *proc.Runner, p proc.Policy) (time.Duration, error) {
		n++
		cache := filepath.Join(dir, fmt.Sprintf("modcache-%d", n))
		env := proc.BaseEnv()
		p.Workspace = mod
		if p.Network == proc.NetworkRegistries {
			p.Downloads = cache
		} else {
			env = append(env, "GOMODCACHE="+cache, "GOFLAGS=-modcacherw")
		}
		start := wall.Now()
		res := rr.Run(ctx, proc.Spec{Command: "go mod download", Dir: mod, Env: env, Policy: p, Timeout: 5 * time.Minute})
		d := wall.Now().Sub(start)
		defer os.RemoveAll(cache)
		if res.Err != nil || res.ExitCode != 0 {
			return d, fmt.Errorf("bench go mod download (%s): exit %d %v: %s", p.Network, res.ExitCode, res.Err, res.Tail)
		}
		return d, nil
	}
	var bs, ss, ws []time.Duration
	for i := range rounds {
		fmt.Fprintf(progress, "  go mod download round %d/%d…\n", i+1, rounds)
		d, err := run(bare, proc.Policy{Mode: proc.ModeOff})
		if err != nil {
			return f, err
		}
		bs = append(bs, d)
		if d, err = run(&noCache, proc.Policy{Mode: proc.ModeBwrap, Network: proc.NetworkRegistries}); err != nil {
			return f, err
		}
		ss = append(ss, d)
		if r.GoModCache != "" {
			if d, err = run(r, proc.Policy{Mode: proc.ModeBwrap, Network: proc.NetworkRegistries}); err != nil {
				return f, err
			}
			ws = append(ws, d)
		}
	}
	f.Bare, f.Sandboxed, f.SandboxedWorkerCache = median(bs), median(ss), median(ws)
	return f, nil
}
