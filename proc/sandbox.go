package proc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"outerloop/egress"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Mode says whether commands run in the sandbox; workitems owns the vocabulary (the config
// accepts exactly what this package implements).
type Mode = workitems.SandboxMode

// Sandbox modes.
const (
	ModeBwrap = workitems.SandboxBwrap
	ModeOff   = workitems.SandboxOff
)

// Network says what network a sandboxed command has (egress.go bridges registries).
type Network = workitems.SandboxNetwork

// Networks.
const (
	NetworkNone       = workitems.NetworkNone
	NetworkRegistries = workitems.NetworkRegistries
	NetworkHost       = workitems.NetworkHost
)

// ErrSandboxUnavailable is returned when the sandbox is required but cannot start.
var ErrSandboxUnavailable = errors.New("sandbox unavailable")

// Policy is what one sandboxed command may reach beyond the system and toolchain directories.
type Policy struct {
	Mode      Mode     // "" → the Runner's mode
	Network   Network  // "" → none
	Workspace string   // bound read-write (and every path inside it)
	ReadOnly  []string // more directories bound read-only (a git mirror's objects)
	Writable  []string // more directories bound read-write
	// GoCache is a writable build cache of the command's own (GOCACHE); "" → by BuildCache.
	GoCache string
	// BuildCache says whose build cache the command writes when GoCache names none: one per
	// Repo under the runner's GoCaches (repository), the runner's own (shared, and ""), or
	// the workspace's (workspace; also repository when the runner keeps no caches).
	BuildCache workitems.BuildCacheScope
	Repo       string // the repository, as the template names it (build_cache: repository)
	// Allow and Downloads are for network registries: hosts reached besides egress.DefaultAllow,
	// and this workspace's writable directory for package downloads (Go modules, npm's cache).
	Allow     []string
	Downloads string
	// Home is a directory kept across commands and bound read-write as $HOME (SandboxHome)
	// inside (an exec agent's sessions must outlive its process to be resumed); "" → an empty
	// tmpfs.
	Home string
	// Limits bound the command and what it starts (limits.go); zero: none.
	Limits config.ResourceLimits
}

// SandboxHome is $HOME inside the sandbox when a Policy names a Home: outside any temporary
// directory, since Codex refuses to start its helper with its home under TMPDIR.
const SandboxHome = "/home/outerloop"

// Runner starts child processes. Its zero value (or nil) runs them unconfined and unguarded.
type Runner struct {
	// Mode is the deployment's sandbox mode ("" on a non-nil Runner means bwrap).
	Mode Mode
	// Bwrap is the bubblewrap binary; Unavailable says why it cannot start (from Probe).
	Bwrap       string
	Unavailable error
	// ReadOnly are toolchain directories bound read-only in every sandbox (GOROOT, the module
	// cache, PATH entries outside the system directories).
	ReadOnly []string
	// Hide are paths never visible inside, even where a bound directory holds them (the
	// config directory, the worker's work dir).
	Hide []string
	// Guard is the guard's argv prefix (the worker binary and GuardArg); nil: no guard.
	Guard []string
	// Records is the directory the process records are kept in ("" → none).
	Records string
	// GoCache is the worker's own build cache, bound read-write as GOCACHE for commands whose
	// policy names no cache of their own (build_cache: shared); "" → a private one under /tmp.
	GoCache string
	// GoCaches holds one build cache per repository (build_cache: repository), under the work
	// dir; "" → such commands get their workspace's own.
	GoCaches string
	// GoModCache is the worker's module cache, offered read-only to network registries
	// commands as their first GOPROXY (egress.go); "" → none.
	GoModCache string
	// Resolver resolves names for the egress proxy (nil: the system's); tests inject one.
	Resolver egress.Resolver
	// Refusals routes the proxy's refusals to whoever watches a command's Spec.Key
	// (WatchRefusals); nil: they are only logged. A pointer, so a copied Runner shares it.
	Refusals *Refusals
	// Cgroups is where commands get a cgroup for their memory and processes limits (cgroup.go);
	// nil → rlimits. CgroupsUnavailable says why there is none.
	Cgroups            *Cgroups
	CgroupsUnavailable error
	// Logger logs what no watcher takes (a refusal outside an execution); nil → slog.Default().
	Logger *slog.Logger
}

func (r *Runner) guarded() bool { return r != nil && len(r.Guard) > 0 }

// modeFor returns the mode a command runs under.
func (r *Runner) modeFor(p Policy) Mode {
	if r == nil {
		return ModeOff
	}
	if p.Mode != "" {
		return p.Mode
	}
	if r.Mode == "" {
		return ModeBwrap
	}
	return r.Mode
}

// ModeFor reports the mode a command with p would run under.
func (r *Runner) ModeFor(p Policy) Mode { return r.modeFor(p) }

// SandboxHint says what to do when the sandbox cannot start: the refusal of every item, the
// worker's start log, validate and the demo all say it the same way.
const SandboxHint = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; " +
	"Alpine: apk add bubblewrap) on a host or container that allows user namespaces (docs/containers.md), " +
	"or opt out with sandbox: {mode: off} in outerloop.yaml (commands then run unconfined)"

func (r *Runner) available() error {
	if r.Unavailable != nil {
		return fmt.Errorf("proc: %w: %v; %s", ErrSandboxUnavailable, r.Unavailable, SandboxHint)
	}
	if r.Bwrap == "" {
		return fmt.Errorf("proc: %w: no bubblewrap binary; %s", ErrSandboxUnavailable, SandboxHint)
	}
	return nil
}

// systemDirs are bound read-only in every sandbox.
func systemDirs() []string {
	return []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}
}

// bwrapArgv wraps argv in bubblewrap for s and returns the argv and the environment to start
// bubblewrap with: the command's own, scrubbed, since bubblewrap's pid 1 inside keeps it
// readable at /proc/1/environ.
func (r *Runner) bwrapArgv(s Spec, argv, env []string) ([]string, []string, error) {
	ws := s.Policy.Workspace
	if ws == "" {
		ws = s.Dir
	}
	if ws == "" || !filepath.IsAbs(ws) {
		return nil, nil, fmt.Errorf("proc: sandbox needs an absolute workspace, got %q", ws)
	}
	dir := s.Dir
	if dir == "" {
		dir = ws
	}
	a := []string{r.Bwrap, "--die-with-parent", "--new-session",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "outerloop"}
	if s.Policy.Network != NetworkHost {
		a = append(a, "--unshare-net")
	}
	for _, d := range systemDirs() {
		a = append(a, "--ro-bind-try", d, d)
	}
	// limits: the command runs as an unprivileged uid in a user namespace of its own (limits.go).
	a = append(a, sandboxUserArgs()...)
	// end limits
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run")
	home := getEnv(env, "HOME")
	if home == "" || home == "/" || !filepath.IsAbs(home) || s.Policy.Home != "" {
		home = SandboxHome
	}
	a = append(a, "--tmpfs", home) // empty: no ~/.ssh, no credentials
	env = setEnv(env, "HOME", home)
	env = setEnv(env, "TMPDIR", "/tmp")
	for _, d := range r.ReadOnly {
		a = append(a, "--ro-bind-try", d, d)
	}
	for _, d := range r.Hide {
		a = append(a, hide(d)...)
	}
	a = append(a, "--bind", ws, ws)
	if h := s.Policy.Home; h != "" {
		d, err := ownDir(ws, h)
		if err != nil {
			return nil, nil, fmt.Errorf("proc: home: %w", err)
		}
		a = append(a, "--bind", d, SandboxHome)
	}
	// The objects the workspace's repository borrows (a worker's bare mirror), so git inside
	// works: read from the worker's own git directory of the workspace, never from the
	// workspace's .git, which a command may have pointed anywhere.
	for _, d := range append(gitAlternates(WorkspaceGitDir(ws)), s.Policy.ReadOnly...) {
		a = append(a, "--ro-bind-try", d, d)
	}
	for _, d := range s.Policy.Writable {
		a = append(a, "--bind-try", d, d)
	}
	cache, err := r.goCache(ws, s.Policy)
	if err != nil {
		return nil, nil, err
	}
	if cache != "" {
		a = append(a, "--bind", cache, cache)
		env = setEnv(env, "GOCACHE", cache)
	} else {
		env = setEnv(env, "GOCACHE", "/tmp/go-build")
	}
	// network registries: the proxy's socket, the bridge before the command, the registry
	// caches (egress.go).
	if s.egress != nil {
		var err error
		if a, argv, env, err = r.egressArgs(s, a, argv, env); err != nil {
			return nil, nil, err
		}
	}
	a = append(a, "--chdir", dir, "--")
	return append(a, argv...), env, nil
}

// hide returns the bubblewrap arguments masking p: an empty tmpfs over a directory, /dev/null
// over a file.
func hide(p string) []string {
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return []string{"--tmpfs", p}
	}
	return []string{"--ro-bind", "/dev/null", p}
}

// goCache is the build cache a command of p binds read-write ("" → none: a private one
// under /tmp), created if need be: the policy's own, else by its scope (Policy.BuildCache).
func (r *Runner) goCache(ws string, p Policy) (string, error) {
	if p.GoCache == "" && p.BuildCache == workitems.BuildCacheRepository {
		if r.GoCaches != "" && p.Repo != "" {
			if err := os.MkdirAll(r.GoCaches, 0o755); err != nil {
				return "", fmt.Errorf("proc: build caches %s: %w", r.GoCaches, err)
			}
			d, err := underRoot(r.GoCaches, repositoryKey(p.Repo))
			if err != nil {
				return "", fmt.Errorf("proc: build cache: %w", err)
			}
			return d, nil
		}
		p.GoCache = filepath.Join(WorkspaceStateDir(ws), "gocache")
	}
	if c := p.GoCache; c != "" {
		d, err := ownDir(ws, c)
		if err != nil {
			return "", fmt.Errorf("proc: build cache: %w", err)
		}
		return d, nil
	}
	if c := r.GoCache; c != "" {
		if err := os.MkdirAll(c, 0o755); err != nil {
			return "", fmt.Errorf("proc: build cache %s: %w", c, err)
		}
		return c, nil
	}
	return "", nil
}

// ownDir makes d, a directory a policy names for ws's commands to write, and returns it: in
// ws's state directory through an os.Root (stateDir), elsewhere (a path the operator or a
// test gave) as it is.
func ownDir(ws, d string) (string, error) {
	state := WorkspaceStateDir(ws)
	if rel, err := filepath.Rel(state, d); err == nil && rel != "." && filepath.IsLocal(rel) {
		return stateDir(ws, rel)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", d, err)
	}
	return d, nil
}

// gitAlternates returns the object directories the repository whose git directory is gitDir
// borrows from (a worker's bare mirror), so git inside the sandbox can read them. Only the
// worker writes that file (WorkspaceGitDir); relative entries are not ours and are ignored.
func gitAlternates(gitDir string) []string {
	b, err := os.ReadFile(filepath.Join(gitDir, "objects", "info", "alternates"))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") && filepath.IsAbs(l) {
			out = append(out, filepath.Clean(l))
		}
	}
	return out
}

// ToolchainDirs returns the directories a toolchain lives in that the system directories do
// not cover: PATH entries (from env) outside them, GOROOT and the module cache (read-only:
// one item cannot poison another's modules).
func ToolchainDirs(ctx context.Context, env []string) []string {
	var out []string
	add := func(d string) {
		if d == "" || !filepath.IsAbs(d) || underAny(d, systemDirs()) || slices.Contains(out, d) {
			return
		}
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	for _, d := range filepath.SplitList(getEnv(env, "PATH")) {
		add(filepath.Clean(d))
		// Agent CLIs installed by npm are symlinks into their node_modules tree.
		if real, err := filepath.EvalSymlinks(d); err == nil {
			if i := strings.LastIndex(real, "/node_modules/"); i >= 0 {
				add(real[:i+len("/node_modules")])
			}
		}
	}
	for _, k := range []string{"GOROOT", "GOMODCACHE"} {
		if v := getEnv(env, k); v != "" {
			add(v)
			continue
		}
		cmd := exec.CommandContext(ctx, "go", "env", k)
		cmd.Env = env
		if b, err := cmd.Output(); err == nil {
			add(strings.TrimSpace(string(b)))
		}
	}
	return out
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Probe finds bubblewrap and checks that a sandbox starts here (user namespaces may be off,
// for example inside some containers). It returns the binary's path or why it cannot start.
func Probe(ctx context.Context, bwrap string) (string, error) {
	if bwrap == "" {
		bwrap = "bwrap"
	}
	path, err := exec.LookPath(bwrap)
	if err != nil {
		return "", fmt.Errorf("bubblewrap not found: %w", err)
	}
	dir, err := os.MkdirTemp("", "outerloop-probe-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	r := &Runner{Mode: ModeBwrap, Bwrap: path}
	res := r.Run(ctx, Spec{Argv: []string{"/bin/true"}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if res.Err != nil {
		return "", res.Err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("bubblewrap cannot start a sandbox here (exit %d): %s", res.ExitCode, strings.TrimSpace(res.Tail))
	}
	return path, nil
}

// BinaryDirs returns what a program at path needs bound read-only to run in the sandbox: its
// directory, the directory it links to, and for npm-installed CLIs their node_modules tree.
func BinaryDirs(path string) []string {
	var out []string
	add := func(d string) {
		if d != "" && !underAny(d, systemDirs()) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	add(filepath.Dir(path))
	if i := strings.LastIndex(path, "/node_modules/"); i >= 0 {
		add(path[:i+len("/node_modules")]) // the path as written may run through a symlink
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		add(filepath.Dir(real))
		if i := strings.LastIndex(real, "/node_modules/"); i >= 0 {
			add(real[:i+len("/node_modules")])
		}
	}
	return out
}
