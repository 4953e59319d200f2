package config

import (
	"fmt"
	"maps"
	"slices"

	"outerloop/workitems"
)

// Kinds are the registries a process validates its config with: the loop kinds, notification
// sink kinds and forge kinds it registered. A nil field means the built-in kinds, so the zero
// Kinds is what ParseConfig uses; a process that registers more passes the same registries to
// ParseConfigWith or LoadConfigWith (at start and on every reload) as to the code that runs
// them, so a kind the code supports is a kind the config accepts.
type Kinds struct {
	Loops  LoopRegistry
	Sinks  SinkRegistry
	Forges ForgeRegistry
}

// ForgeRegistry is what config validation asks about forge kinds: which exist (package forge's
// Kinds implements it). The built-ins are AllForgeKinds.
type ForgeRegistry interface {
	// ForgeKinds lists the registered kinds, in the order an error lists them.
	ForgeKinds() []workitems.ForgeKind
}

// builtinForgeKinds is the ForgeRegistry of AllForgeKinds.
type builtinForgeKinds struct{}

func (builtinForgeKinds) ForgeKinds() []workitems.ForgeKind {
	return workitems.AllForgeKinds()
}

func (k Kinds) loops() LoopRegistry {
	if k.Loops == nil {
		return BuiltinLoopKinds()
	}
	return k.Loops
}

func (k Kinds) sinks() SinkRegistry {
	if k.Sinks == nil {
		return BuiltinSinkKinds()
	}
	return k.Sinks
}

func (k Kinds) forges() ForgeRegistry {
	if k.Forges == nil {
		return builtinForgeKinds{}
	}
	return k.Forges
}

// ValidateForgeKinds checks every forge's kind against forges alone (the rest of the config was
// validated when it was parsed), as ValidateLoops does for loops.
func (c *Config) ValidateForgeKinds(forges ForgeRegistry) error {
	kinds := forges.ForgeKinds()
	for _, name := range slices.Sorted(maps.Keys(c.Forges)) {
		if k := c.Forges[name].Kind; !slices.Contains(kinds, k) {
			return &ConfigError{Field: "forges." + name + ".kind", Err: fmt.Errorf("%q is not one of %s", k, workitems.JoinKinds(kinds))}
		}
	}
	return nil
}
