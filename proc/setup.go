package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Setup is how a worker process builds its Runner.
type Setup struct {
	Mode    Mode     // the deployment's mode ("" → bwrap)
	Bwrap   string   // bubblewrap binary ("" → bwrap in PATH)
	Workdir string   // the worker's work dir: records under <Workdir>/.proc; hidden inside
	Hide    []string // more paths hidden inside (the config directory)
	Env     []string // the worker's environment, for the toolchain directories (default os.Environ)
	// NoGuard runs commands without the guard process (only for processes that cannot
	// re-execute themselves as one: their main does not call MaybeGuard).
	NoGuard bool
}

// NewRunner builds the Runner of a worker process: it probes bubblewrap (unless the mode is
// off), finds the toolchain directories, and arms the guard. A sandbox that cannot start is
// not an error here: the Runner then refuses every command whose mode is not off, and
// Unavailable says why.
func NewRunner(ctx context.Context, s Setup) (*Runner, error) {
	r := &Runner{Mode: s.Mode, Refusals: &Refusals{}}
	if r.Mode == "" {
		r.Mode = ModeBwrap
	}
	if !s.NoGuard {
		g, err := GuardArgv()
		if err != nil {
			return nil, err
		}
		r.Guard = g
		// A binary whose main does not call MaybeGuard would refuse the guard's flag: find out
		// now, not at the first item.
		if res := r.Run(ctx, Spec{Argv: []string{"/bin/true"}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
			Policy: Policy{Mode: ModeOff}}); res.Err != nil || res.ExitCode != 0 {
			return nil, fmt.Errorf("proc: the guard (%s %s) does not start: %v %s (does main call proc.MaybeGuard?)",
				g[0], GuardArg, res.Err, res.Tail)
		}
	}
	if s.Workdir != "" {
		abs, err := filepath.Abs(s.Workdir)
		if err != nil {
			return nil, fmt.Errorf("proc: work dir: %w", err)
		}
		r.Records = filepath.Join(abs, ".proc")
		r.GoCaches = filepath.Join(abs, "caches", "go-build")
		r.Hide = append(r.Hide, abs)
	}
	for _, h := range s.Hide {
		if abs, err := filepath.Abs(h); err == nil && abs != "/" {
			r.Hide = append(r.Hide, abs)
		}
	}
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	r.ReadOnly = ToolchainDirs(ctx, env)
	r.GoCache = goEnv(ctx, env, "GOCACHE")
	r.GoModCache = goEnv(ctx, env, "GOMODCACHE")
	// Probe even when the deployment's mode is off: a template may still ask for bwrap.
	r.Bwrap, r.Unavailable = Probe(ctx, s.Bwrap)
	r.Cgroups, r.CgroupsUnavailable = ProbeCgroups()
	return r, nil
}

// Describe says in one line which sandbox is in force, for the start-up log and validate.
func (r *Runner) Describe() string {
	switch {
	case r == nil:
		return "off (no runner: commands run unconfined)"
	case r.Mode == ModeOff:
		return "off (set by the deployment: commands run unconfined, guarded and with a scrubbed environment); limits: " + r.DescribeLimits()
	case r.Unavailable != nil:
		return "bwrap, unavailable: " + r.Unavailable.Error() + " — items whose sandbox is not mode off are refused; limits: " + r.DescribeLimits()
	}
	return fmt.Sprintf("bwrap (%s, commands as uid %d); limits: %s", r.Bwrap, SandboxUID, r.DescribeLimits())
}

// goEnv returns `go env k` under env ("" when go is missing).
func goEnv(ctx context.Context, env []string, k string) string {
	if v := getEnv(env, k); v != "" {
		return v
	}
	cmd := exec.CommandContext(ctx, "go", "env", k)
	cmd.Env = env
	b, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
