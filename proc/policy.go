package proc

import (
	"os"
	"path/filepath"

	"outerloop/workitems"
)

// Default networks per kind of child: the agent's tools, script steps, stop hooks and done
// checks reach the package registries through the worker's proxy; exec agents must reach
// their model.
const (
	DefaultToolNetwork  = NetworkRegistries
	DefaultAgentNetwork = NetworkHost
)

// PolicyFor returns the policy of a command under a template's (merged) sandbox in workspace
// ws; def is the network when the sandbox names none. With build_cache: workspace the
// workspace's build cache lives in its .git directory: writable, its own, removed with it and
// never part of a diff or snapshot; otherwise (shared) the runner's.
func PolicyFor(s workitems.Sandbox, ws string, def Network) Policy {
	p := Policy{Mode: Mode(s.Mode), Network: Network(s.Network), Workspace: ws}
	if p.Network == "" {
		p.Network = def
	}
	if p.Network == NetworkRegistries {
		p.Allow, p.Downloads = s.Allow, workspacePrivate(ws, "downloads")
	}
	// The config was validated at load: a limit that does not parse here keeps its default.
	if l, err := s.Limits.Resolve(); err == nil {
		p.Limits = l
	} else {
		p.Limits, _ = workitems.SandboxLimits{}.Resolve()
	}
	if s.BuildCache == "workspace" {
		if fi, err := os.Stat(filepath.Join(ws, ".git")); err == nil && fi.IsDir() {
			p.GoCache = filepath.Join(ws, ".git", "outerloop", "gocache")
		} else {
			p.GoCache = filepath.Join(filepath.Dir(ws), "."+filepath.Base(ws)+".gocache")
		}
	}
	return p
}
