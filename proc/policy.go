package proc

import (
	"path/filepath"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Default networks per kind of child: the agent's tools, script steps, stop hooks and done
// checks reach the package registries through the worker's proxy; exec agents must reach
// their model.
const (
	DefaultToolNetwork  = NetworkRegistries
	DefaultAgentNetwork = NetworkHost
)

// PolicyFor returns the policy of a command of template t (its merged sandbox, its operator
// files, its repository) in workspace ws; def is the network when the sandbox names none.
// Every directory it names besides the workspace is the worker's own, beside the workspace
// (WorkspaceStateDir) or under the work dir, never a path read from the workspace.
func PolicyFor(t *config.Template, ws string, def Network) Policy {
	var s config.Sandbox
	var files []string
	var repo string
	if t != nil {
		s, files, repo = t.Sandbox, t.OperatorFiles, t.Repo
	}
	p := Policy{Mode: Mode(s.Mode), Network: Network(s.Network), Workspace: ws}
	if p.Network == "" {
		p.Network = def
	}
	if p.Network == NetworkRegistries {
		p.Allow = s.Allow
		if ws != "" {
			p.Downloads = filepath.Join(WorkspaceStateDir(ws), "downloads")
		}
	}
	// The config was validated at load: a limit that does not parse here keeps its default.
	if l, err := s.Limits.Resolve(); err == nil {
		p.Limits = l
	} else {
		p.Limits, _ = config.SandboxLimits{}.Resolve()
	}
	p.BuildCache, p.Repo = s.BuildCache, repo
	if p.BuildCache == "" {
		p.BuildCache = workitems.BuildCacheRepository
	}
	if p.BuildCache == workitems.BuildCacheWorkspace && ws != "" {
		p.GoCache = filepath.Join(WorkspaceStateDir(ws), "gocache")
	}
	return p.WithFiles(files)
}

// WithHome returns p with a home kept across its workspace's commands (an exec agent's
// sessions must outlive its process to be resumed), beside the workspace.
func (p Policy) WithHome() Policy {
	if p.Workspace != "" {
		p.Home = filepath.Join(WorkspaceStateDir(p.Workspace), "home")
	}
	return p
}
