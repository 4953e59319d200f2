package workitems

import (
	"errors"
	"fmt"
	"slices"
)

// Sandbox says how the commands of a template (or, at the top level, of the whole deployment)
// are confined: `sandbox: {mode: bwrap|off, network: none|registries|host, allow: [host, …]}`.
// Empty fields inherit: a template's from the deployment's, the deployment's from the defaults
// (mode bwrap; network registries for the agent's tools, script steps, done checks and stop
// hooks, host for exec agents).
type Sandbox struct {
	Mode    SandboxMode    `yaml:"mode" json:"mode,omitempty"`       // SandboxModes
	Network SandboxNetwork `yaml:"network" json:"network,omitempty"` // SandboxNetworks
	// Allow names more hosts (host or host:port) the registries network reaches besides the
	// default registries; a template's list extends the deployment's (sandbox_allow.go).
	Allow []string `yaml:"allow" json:"allow,omitempty"`
	// BuildCache is whose Go build cache commands write (BuildCacheScopes): one per repository
	// (the default), one per workspace, or the worker's own shared by every repository.
	BuildCache BuildCacheScope `yaml:"build_cache" json:"build_cache,omitempty"`
	// Limits bound each command's memory, processes, CPU time and file size (sandbox_limits.go).
	Limits SandboxLimits `yaml:"limits" json:"limits,omitzero"`
}

// Merge returns s with its empty fields taken from base.
func (s Sandbox) Merge(base Sandbox) Sandbox {
	if s.Mode == "" {
		s.Mode = base.Mode
	}
	if s.Network == "" {
		s.Network = base.Network
	}
	if s.BuildCache == "" {
		s.BuildCache = base.BuildCache
	}
	s.Allow = mergeAllow(base.Allow, s.Allow)
	s.Limits = s.Limits.Merge(base.Limits)
	return s
}

func (s Sandbox) validate() error {
	if s.Mode != "" && !slices.Contains(SandboxModes(), s.Mode) {
		return fmt.Errorf("mode %q is not one of %s", s.Mode, JoinKinds(SandboxModes()))
	}
	if s.Network != "" && !slices.Contains(SandboxNetworks(), s.Network) {
		return fmt.Errorf("network %q is not one of %s", s.Network, JoinKinds(SandboxNetworks()))
	}
	if s.BuildCache != "" && !slices.Contains(BuildCacheScopes(), s.BuildCache) {
		return fmt.Errorf("build_cache %q is not one of %s", s.BuildCache, JoinKinds(BuildCacheScopes()))
	}
	if err := s.Limits.validate(); err != nil {
		return err
	}
	if s.Mode == SandboxOff && s.Network == NetworkNone {
		return errors.New("network none needs the sandbox (mode off has the host's network)")
	}
	if err := s.validateAllow(); err != nil {
		return err
	}
	return nil
}
