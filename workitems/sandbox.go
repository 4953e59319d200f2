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

// BuildCacheScope says who shares a Go build cache that sandboxed commands write. A build
// cache is code: an entry one command planted is linked into what another compiles, so a
// cache is shared only by commands that already trust each other.
type BuildCacheScope string

// The build cache scopes.
const (
	// BuildCacheRepository (the default): one cache per repository, kept by the worker across
	// that repository's items and attempts. Items of one repository run its code anyway.
	BuildCacheRepository BuildCacheScope = "repository"
	// BuildCacheWorkspace: each workspace its own, removed with it: no attempt can change what
	// another compiles, at the cost of a cold cache per attempt.
	BuildCacheWorkspace BuildCacheScope = "workspace"
	// BuildCacheShared: the worker's own GOCACHE, warm for every repository — and an item of
	// one repository can plant entries that another repository's build links. An explicit
	// opt-in for deployments whose repositories all trust each other.
	BuildCacheShared BuildCacheScope = "shared"
)

// BuildCacheScopes lists the build_cache settings.
func BuildCacheScopes() []BuildCacheScope {
	return []BuildCacheScope{BuildCacheRepository, BuildCacheWorkspace, BuildCacheShared}
}

// SandboxMode says whether commands run in the sandbox (proc implements each).
type SandboxMode string

// The sandbox modes.
const (
	SandboxBwrap SandboxMode = "bwrap" // bubblewrap; items are refused where it cannot start
	SandboxOff   SandboxMode = "off"   // unconfined (only the guard and the scrubbed environment)
)

// SandboxNetwork says what network a sandboxed command has.
type SandboxNetwork string

// The sandbox networks.
const (
	NetworkNone SandboxNetwork = "none" // own empty network namespace: no Redis, no loopback services
	// NetworkRegistries: no network of its own either, only the worker's allowlisting proxy
	// (package egress) through a bridge: the package registries and Sandbox.Allow.
	NetworkRegistries SandboxNetwork = "registries"
	NetworkHost       SandboxNetwork = "host" // the host's network (exec agents must reach their model)
)

// SandboxModes lists the sandbox modes.
func SandboxModes() []SandboxMode { return []SandboxMode{SandboxBwrap, SandboxOff} }

// SandboxNetworks lists the sandbox network settings.
func SandboxNetworks() []SandboxNetwork {
	return []SandboxNetwork{NetworkNone, NetworkRegistries, NetworkHost}
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
