package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"outerloop/workitems"
)

// LoopTraits is what code outside a loop's package needs to know about its kind: the worker's
// charging, the scheduler's steer and `outerloop validate`. A kind declares its traits when it
// is registered (BuiltinLoopKinds for the built-in ones; worker.LoopTraitsDeclarer for others).
type LoopTraits struct {
	// Steerable: the loop reads input queued with `outerloop steer` (worker.Attempt.Steer).
	// Steering an item of another kind is refused (ErrNotSteerable): nobody would read it.
	Steerable bool
	// CallsModel: the loop's spend is model use through the template's loop.provider, so it is
	// charged to that provider (its spend counters and daily cap) as well as to the template.
	CallsModel bool
	// Programs lists the programs a loop of t starts, for `outerloop validate` to check they
	// exist before a run (nil: none it could know).
	Programs func(t *Template) []LoopProgram
}

// LoopProgram is one program a template's loop starts, as its settings name it.
type LoopProgram struct {
	Field string // the setting naming it: loop.commands[0], loop.agent
	// Command is a shell command line whose first word is the program (validate skips a line
	// that starts with a shell word); with Exact it is the program itself, a name looked up on
	// PATH or a path.
	Command string
	Exact   bool
}

// LoopRegistry is what config validation and the steer and charge paths ask about inner loop
// kinds: which kinds exist, what each does, and whether a template's loop settings suit its
// kind. The registry of inner loops implements it (worker.Registry), so registering a new kind
// there needs no edit of a list here; the dependency points inward, from the worker to
// workitems.
type LoopRegistry interface {
	// LoopKinds lists the registered kinds, sorted.
	LoopKinds() []workitems.LoopKind
	// LoopTraits returns what kind does; false for a kind nobody registered.
	LoopTraits(kind workitems.LoopKind) (LoopTraits, bool)
	// ValidateLoop checks t.Loop against its kind. It returns a *ConfigError naming the field
	// (loop.kind for a kind nobody registered).
	ValidateLoop(c *Config, t *Template) error
}

// LoopValidator checks a template's loop settings for one kind. Errors name the field with a
// *ConfigError (its Template is filled in when empty), or are reported against "loop".
type LoopValidator func(c *Config, t *Template) error

// LoopKindSet is a LoopRegistry of kinds with their traits and validators.
type LoopKindSet struct {
	kinds map[workitems.LoopKind]loopKindEntry
}

type loopKindEntry struct {
	traits   LoopTraits
	validate LoopValidator
}

// NewLoopKindSet returns an empty set.
func NewLoopKindSet() *LoopKindSet {
	return &LoopKindSet{kinds: map[workitems.LoopKind]loopKindEntry{}}
}

// Add registers kind with its traits and validator (nil: any settings).
func (s *LoopKindSet) Add(kind workitems.LoopKind, traits LoopTraits, v LoopValidator) *LoopKindSet {
	s.kinds[kind] = loopKindEntry{traits: traits, validate: v}
	return s
}

// LoopKinds lists the kinds of s, sorted.
func (s *LoopKindSet) LoopKinds() []workitems.LoopKind {
	return slices.Sorted(maps.Keys(s.kinds))
}

// LoopTraits returns kind's traits; false when s lacks kind.
func (s *LoopKindSet) LoopTraits(kind workitems.LoopKind) (LoopTraits, bool) {
	e, ok := s.kinds[kind]
	return e.traits, ok
}

// ValidateLoop checks t.Loop with its kind's validator.
func (s *LoopKindSet) ValidateLoop(c *Config, t *Template) error {
	e, ok := s.kinds[t.Loop.Kind]
	if !ok {
		return UnknownLoopKind(t, s.LoopKinds())
	}
	if e.validate == nil {
		return nil
	}
	return LoopError(t, e.validate(c, t))
}

// UnknownLoopKind is the error for a template whose loop.kind is missing or not in kinds.
func UnknownLoopKind(t *Template, kinds []workitems.LoopKind) error {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	if t.Loop.Kind == "" {
		return &ConfigError{Template: t.Name, Field: "loop.kind", Err: fmt.Errorf("missing (one of %s)", strings.Join(names, ", "))}
	}
	return &ConfigError{Template: t.Name, Field: "loop.kind",
		Err: fmt.Errorf("unknown inner loop %q (one of %s)", t.Loop.Kind, strings.Join(names, ", "))}
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
// their traits and their settings' validation. ParseConfig uses it; the worker's registry reuses
// these traits and validators for its built-in kinds.
func BuiltinLoopKinds() *LoopKindSet {
	return NewLoopKindSet().
		// A script's commands choose their own tools (and models): nothing to charge to a
		// provider, no steer input read; its commands are programs validate can look for.
		Add(workitems.LoopScript, LoopTraits{Programs: scriptPrograms}, ValidateScriptLoop).
		Add(workitems.LoopAgent, LoopTraits{Steerable: true, CallsModel: true}, ValidateAgentLoop).
		// An external agent calls its model itself: charged to loop.provider when one is named;
		// it reads no steer input (its CLI takes the prompt once).
		Add(workitems.LoopExec, LoopTraits{CallsModel: true, Programs: execPrograms}, ValidateExecLoop)
}

// scriptPrograms: every command of a script loop.
func scriptPrograms(t *Template) []LoopProgram {
	out := make([]LoopProgram, 0, len(t.Loop.Commands))
	for i, c := range t.Loop.Commands {
		out = append(out, LoopProgram{Field: fmt.Sprintf("loop.commands[%d]", i), Command: c})
	}
	return out
}

// execPrograms: the agent's binary, loop.command or the binary named like the agent (codex,
// claude, aider).
func execPrograms(t *Template) []LoopProgram {
	if t.Loop.Command != "" {
		return []LoopProgram{{Field: "loop.command", Command: t.Loop.Command, Exact: true}}
	}
	return []LoopProgram{{Field: "loop.agent", Command: t.Loop.Agent, Exact: true}}
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
	if !slices.Contains(workitems.ExecAgents(), t.Loop.Agent) {
		return loopBad("loop.agent", "%q is not one of %s", t.Loop.Agent, strings.Join(workitems.ExecAgents(), ", "))
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
