package config

import (
	"errors"
	"fmt"
	"slices"

	"outerloop/workitems"
)

// Sandbox says how the commands of a template (or, at the top level, of the whole deployment)
// are confined: `sandbox: {mode: bwrap|off, network: none|registries|host, allow: [host, …]}`.
// Empty fields inherit: a template's from the deployment's, the deployment's from the defaults
// (mode bwrap; network registries for the agent's tools, script steps, done checks and stop
// hooks, host for exec agents).
type Sandbox struct {
	Mode    workitems.SandboxMode    `yaml:"mode" json:"mode,omitempty"`       // SandboxModes
	Network workitems.SandboxNetwork `yaml:"network" json:"network,omitempty"` // SandboxNetworks
	// Allow names more hosts (host or host:port) the registries network reaches besides the
	// default registries; a template's list extends the deployment's (sandbox_allow.go).
	Allow []string `yaml:"allow" json:"allow,omitempty"`
	// BuildCache is whose Go build cache commands write (BuildCacheScopes): one per repository
	// (the default), one per workspace, or the worker's own shared by every repository.
	BuildCache workitems.BuildCacheScope `yaml:"build_cache" json:"build_cache,omitempty"`
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
	if s.Mode != "" && !slices.Contains(workitems.SandboxModes(), s.Mode) {
		return fmt.Errorf("mode %q is not one of %s", s.Mode, workitems.JoinKinds(workitems.SandboxModes()))
	}
	if s.Network != "" && !slices.Contains(workitems.SandboxNetworks(), s.Network) {
		return fmt.Errorf("network %q is not one of %s", s.Network, workitems.JoinKinds(workitems.SandboxNetworks()))
	}
	if s.BuildCache != "" && !slices.Contains(workitems.BuildCacheScopes(), s.BuildCache) {
		return fmt.Errorf("build_cache %q is not one of %s", s.BuildCache, workitems.JoinKinds(workitems.BuildCacheScopes()))
	}
	if err := s.Limits.validate(); err != nil {
		return err
	}
	if s.Mode == workitems.SandboxOff && s.Network == workitems.NetworkNone {
		return errors.New("network none needs the sandbox (mode off has the host's network)")
	}
	if err := s.validateAllow(); err != nil {
		return err
	}
	return nil
}
