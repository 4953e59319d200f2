package worker

import (
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// LoopSettingsValidator is implemented by an InnerLoop that checks its template's loop
// settings. Config validation (config.Config.ValidateWith with this registry) calls it, so a
// new loop kind brings its own checks; a loop without it accepts any settings, and a built-in
// kind without it uses config.BuiltinLoopKinds' checks.
type LoopSettingsValidator interface {
	ValidateLoop(c *config.Config, t *config.Template) error
}

// LoopTraitsDeclarer is implemented by an InnerLoop that says what its kind does: whether it
// reads steer input, whether its spend is charged to the template's provider, which programs
// validate should look for. A loop without it has the built-in traits of its kind
// (config.BuiltinLoopKinds), or none (not steerable, no provider charged, no programs) for
// a kind of its own.
type LoopTraitsDeclarer interface {
	Traits() config.LoopTraits
}

var _ config.LoopRegistry = (*Registry)(nil)

// LoopKinds lists the registered kinds, sorted (config.LoopRegistry).
func (r *Registry) LoopKinds() []workitems.LoopKind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kindsLocked()
}

// LoopTraits returns what the loop registered for kind does (config.LoopRegistry); false for
// a kind nobody registered.
func (r *Registry) LoopTraits(kind workitems.LoopKind) (config.LoopTraits, bool) {
	r.mu.RLock()
	l, ok := r.loops[kind]
	r.mu.RUnlock()
	if !ok {
		return config.LoopTraits{}, false
	}
	if d, ok := l.(LoopTraitsDeclarer); ok {
		return d.Traits(), true
	}
	tr, _ := config.BuiltinLoopKinds().LoopTraits(kind)
	return tr, true
}

// ValidateLoop checks t's loop settings with the loop registered for its kind
// (config.LoopRegistry): a kind nobody registered is refused naming loop.kind and the
// registered kinds.
func (r *Registry) ValidateLoop(c *config.Config, t *config.Template) error {
	r.mu.RLock()
	l, ok := r.loops[t.Loop.Kind]
	kinds := r.kindsLocked()
	r.mu.RUnlock()
	if !ok {
		return config.UnknownLoopKind(t, kinds)
	}
	if v, ok := l.(LoopSettingsValidator); ok {
		return config.LoopError(t, v.ValidateLoop(c, t))
	}
	builtin := config.BuiltinLoopKinds()
	if _, ok := builtin.LoopTraits(t.Loop.Kind); ok {
		return builtin.ValidateLoop(c, t)
	}
	return nil
}
