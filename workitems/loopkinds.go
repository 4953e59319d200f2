package workitems

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// LoopRegistry is what config validation asks about inner loop kinds: which kinds exist and
// whether a template's loop settings suit its kind. The registry of inner loops implements it
// (worker.Registry), so registering a new kind there needs no edit of a list here; the
// dependency points inward, from the worker to workitems.
type LoopRegistry interface {
	// LoopKinds lists the registered kinds, sorted.
	LoopKinds() []string
	// ValidateLoop checks t.Loop against its kind. It returns a *ConfigError naming the field
	// (loop.kind for a kind nobody registered).
	ValidateLoop(c *Config, t *Template) error
}

// LoopValidator checks a template's loop settings for one kind. Errors name the field with a
// *ConfigError (its Template is filled in when empty), or are reported against "loop".
type LoopValidator func(c *Config, t *Template) error

// LoopKindSet is a LoopRegistry of kinds and their validators.
type LoopKindSet struct {
	v map[string]LoopValidator
}

// NewLoopKindSet returns an empty set.
func NewLoopKindSet() *LoopKindSet { return &LoopKindSet{v: map[string]LoopValidator{}} }

// Add registers kind with its validator (nil: any settings).
func (s *LoopKindSet) Add(kind string, v LoopValidator) *LoopKindSet {
	s.v[kind] = v
	return s
}

// LoopKinds lists the kinds of s, sorted.
func (s *LoopKindSet) LoopKinds() []string {
	out := make([]string, 0, len(s.v))
	for k := range s.v {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ValidateLoop checks t.Loop with its kind's validator.
func (s *LoopKindSet) ValidateLoop(c *Config, t *Template) error {
	v, ok := s.v[t.Loop.Kind]
	if !ok {
		return UnknownLoopKind(t, s.LoopKinds())
	}
	return LoopError(t, v(c, t))
}

// UnknownLoopKind is the error for a template whose loop.kind is missing or not in kinds.
func UnknownLoopKind(t *Template, kinds []string) error {
	if t.Loop.Kind == "" {
		return &ConfigError{Template: t.Name, Field: "loop.kind", Err: fmt.Errorf("missing (one of %s)", strings.Join(kinds, ", "))}
	}
	return &ConfigError{Template: t.Name, Field: "loop.kind",
		Err: fmt.Errorf("unknown inner loop %q (one of %s)", t.Loop.Kind, strings.Join(kinds, ", "))}
}

// LoopError names t in a validator's error: a *ConfigError gets t's name when it has none,
// any other error is reported against the field "loop".
func LoopError(t *Template, err error) error {
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if errors.As(err, &ce) {
		if ce.Template == "" {
			ce.Template = t.Name
		}
		return ce
	}
	return &ConfigError{Template: t.Name, Field: "loop", Err: err}
}

// BuiltinLoopKinds is the set of the loops every binary registers (agent, exec, script) with
// their settings' validation. ParseConfig uses it; the worker's registry reuses these
// validators for its built-in kinds.
func BuiltinLoopKinds() *LoopKindSet {
	return NewLoopKindSet().Add("script", ValidateScriptLoop).Add("agent", ValidateAgentLoop).Add("exec", ValidateExecLoop)
}

func loopBad(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ValidateScriptLoop checks a script loop's settings.
func ValidateScriptLoop(_ *Config, t *Template) error {
	if len(t.Loop.Commands) == 0 {
		return loopBad("loop.commands", "a script loop needs at least one command")
	}
	if t.Loop.Model != "" {
		return loopBad("loop.model", "a script loop calls no model (its commands choose their own)")
	}
	return nil
}

// maxPromptVariant bounds loop.prompt_variant: it is one line of the prompt.
const maxPromptVariant = 200

// validateStrategyFields checks loop.model and loop.prompt_variant whatever the kind: each is
// one line that goes into a command line or a prompt as it is.
func validateStrategyFields(l Loop) error {
	if l.Model != "" && (strings.TrimSpace(l.Model) != l.Model || strings.ContainsAny(l.Model, " \t\r\n")) {
		return loopBad("loop.model", "%q: want a model name without spaces", l.Model)
	}
	if strings.ContainsAny(l.PromptVariant, "\r\n") {
		return loopBad("loop.prompt_variant", "must be one line")
	}
	if len(l.PromptVariant) > maxPromptVariant {
		return loopBad("loop.prompt_variant", "%d bytes: at most %d", len(l.PromptVariant), maxPromptVariant)
	}
	return nil
}

// ValidateAgentLoop checks an agent loop's settings.
func ValidateAgentLoop(c *Config, t *Template) error {
	if t.Loop.Provider == "" {
		return loopBad("loop.provider", "an agent loop needs a provider")
	}
	if _, ok := c.Providers[t.Loop.Provider]; !ok {
		return loopBad("loop.provider", "%q is not in providers", t.Loop.Provider)
	}
	if t.Loop.ContextLimitTokens < 0 {
		return loopBad("loop.context_limit_tokens", "must not be negative")
	}
	return nil
}

// ValidateExecLoop checks an exec loop's settings.
func ValidateExecLoop(c *Config, t *Template) error {
	if !slices.Contains(ExecAgents(), t.Loop.Agent) {
		return loopBad("loop.agent", "%q is not one of %s", t.Loop.Agent, strings.Join(ExecAgents(), ", "))
	}
	if t.Loop.Agent == "command" && t.Loop.Command == "" {
		return loopBad("loop.command", "agent command needs a command to run")
	}
	if t.Loop.Agent == "command" && t.Loop.Model != "" {
		// codex, claude and aider take the model on their command line; a command is given
		// only the prompt and its arguments.
		return loopBad("loop.model", "agent command has no model flag outerloop could pass: put the model in loop.args")
	}
	if t.Loop.Provider != "" {
		if _, ok := c.Providers[t.Loop.Provider]; !ok {
			return loopBad("loop.provider", "%q is not in providers", t.Loop.Provider)
		}
	}
	return nil
}

// ValidateLoops checks every template's loop settings against loops alone (the rest of the
// config was validated when it was parsed): a process that registered more kinds than the
// built-in ones checks them here.
func (c *Config) ValidateLoops(loops LoopRegistry) error {
	for i := range c.Templates {
		if err := loops.ValidateLoop(c, &c.Templates[i]); err != nil {
			return err
		}
	}
	return nil
}
