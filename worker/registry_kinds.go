package worker

import (
	"outerloop/workitems"
)

// LoopSettingsValidator is implemented by an InnerLoop that checks its template's loop
// settings. Config validation (workitems.Config.ValidateWith with this registry) calls it, so a
// new loop kind brings its own checks; a loop without it accepts any settings, and a built-in
// kind without it uses workitems.BuiltinLoopKinds' checks.
type LoopSettingsValidator interface {
	ValidateLoop(c *workitems.Config, t *workitems.Template) error
}

var _ workitems.LoopRegistry = (*Registry)(nil)

// LoopKinds lists the registered kinds, sorted (workitems.LoopRegistry).
func (r *Registry) LoopKinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kindsLocked()
}

// ValidateLoop checks t's loop settings with the loop registered for its kind
// (workitems.LoopRegistry): a kind nobody registered is refused naming loop.kind and the
// registered kinds.
func (r *Registry) ValidateLoop(c *workitems.Config, t *workitems.Template) error {
	r.mu.RLock()
	l, ok := r.loops[t.Loop.Kind]
	kinds := r.kindsLocked()
	r.mu.RUnlock()
	if !ok {
		return workitems.UnknownLoopKind(t, kinds)
	}
	if v, ok := l.(LoopSettingsValidator); ok {
		return workitems.LoopError(t, v.ValidateLoop(c, t))
	}
	builtin := workitems.BuiltinLoopKinds()
	for _, k := range builtin.LoopKinds() {
		if k == t.Loop.Kind {
			return builtin.ValidateLoop(c, t)
		}
	}
	return nil
}
