package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestBuiltinLoopKindsDeclareWhatTheOldKindChecksDid: each built-in kind's traits say what the
// string comparisons in the handler (charge the provider unless script), the scheduler (steer
// only agent) and validate (script: loop.commands; exec: the agent's binary) used to decide.
func TestBuiltinLoopKindsDeclareWhatTheOldKindChecksDid(t *testing.T) {
	t.Parallel()
	builtin := config.BuiltinLoopKinds()
	if got, want := builtin.LoopKinds(), []workitems.LoopKind{workitems.LoopAgent, workitems.LoopExec, workitems.LoopScript}; !slices.Equal(got, want) {
		t.Fatalf("built-in kinds %v, want %v", got, want)
	}
	if got := workitems.LoopKinds(); !slices.Equal(got, builtin.LoopKinds()) {
		t.Errorf("LoopKinds() %v, want the built-in set's %v", got, builtin.LoopKinds())
	}
	for _, tc := range []struct {
		name       string
		loop       config.Loop
		steerable  bool
		callsModel bool
		programs   []config.LoopProgram
	}{
		{name: "AScriptCallsNoModelReadsNoSteerAndStartsItsCommands",
			loop: config.Loop{Kind: workitems.LoopScript, Commands: []string{"make fix", "./check.sh"}},
			programs: []config.LoopProgram{
				{Field: "loop.commands[0]", Command: "make fix"}, {Field: "loop.commands[1]", Command: "./check.sh"}}},
		{name: "AnAgentCallsItsProviderAndReadsSteer",
			loop:      config.Loop{Kind: workitems.LoopAgent, Provider: "p"},
			steerable: true, callsModel: true},
		{name: "AnExecAgentIsChargedToItsProviderAndStartsTheAgentsBinary",
			loop:       config.Loop{Kind: workitems.LoopExec, Agent: "codex"},
			callsModel: true,
			programs:   []config.LoopProgram{{Field: "loop.agent", Command: "codex", Exact: true}}},
		{name: "AnExecCommandStartsLoopCommand",
			loop:       config.Loop{Kind: workitems.LoopExec, Agent: "command", Command: "bin/agent"},
			callsModel: true,
			programs:   []config.LoopProgram{{Field: "loop.command", Command: "bin/agent", Exact: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, ok := builtin.LoopTraits(tc.loop.Kind)
			if !ok {
				t.Fatalf("%s is not built in", tc.loop.Kind)
			}
			if tr.Steerable != tc.steerable || tr.CallsModel != tc.callsModel {
				t.Errorf("%s: steerable %v calls model %v, want %v %v", tc.loop.Kind, tr.Steerable, tr.CallsModel, tc.steerable, tc.callsModel)
			}
			var got []config.LoopProgram
			if tr.Programs != nil {
				got = tr.Programs(&config.Template{Name: "t", Loop: tc.loop})
			}
			if !slices.Equal(got, tc.programs) {
				t.Errorf("%s: programs %+v, want %+v", tc.loop.Kind, got, tc.programs)
			}
		})
	}
}

// TestAKindNobodyRegisteredHasNoTraitsAndIsRefusedNamingLoopKind: the built-in set knows no
// other kind, and a config naming one is refused on loop.kind with the kinds there are.
func TestAKindNobodyRegisteredHasNoTraitsAndIsRefusedNamingLoopKind(t *testing.T) {
	t.Parallel()
	if tr, ok := config.BuiltinLoopKinds().LoopTraits("robot"); ok || tr.Steerable || tr.CallsModel || tr.Programs != nil {
		t.Errorf("robot: %+v %v, want no traits", tr, ok)
	}
	_, err := config.ParseConfig([]byte(`
defaults: {budget: {wall_time: 5m}}
templates:
  - {name: t, repo: ., goal: g, loop: {kind: robot}, done_check: {commands: ["true"]}}
`))
	var ce *config.ConfigError
	if !errors.As(err, &ce) || ce.Template != "t" || ce.Field != "loop.kind" ||
		!strings.Contains(err.Error(), `"robot"`) || !strings.Contains(err.Error(), "one of agent, exec, script") {
		t.Fatalf("a config naming robot: %v, want template t field loop.kind listing the kinds", err)
	}
}

// TestALoopKindSetKnowsOnlyWhatWasAdded: a set of one new kind reports its traits and runs its
// validator, whose error is named after the template.
func TestALoopKindSetKnowsOnlyWhatWasAdded(t *testing.T) {
	t.Parallel()
	set := config.NewLoopKindSet().Add("notes", config.LoopTraits{Steerable: true},
		func(_ *config.Config, t *config.Template) error {
			if t.Loop.Command == "" {
				return &config.ConfigError{Field: "loop.command", Err: errors.New("names the notes file")}
			}
			return nil
		})
	if tr, ok := set.LoopTraits("notes"); !ok || !tr.Steerable || tr.CallsModel {
		t.Errorf("notes: %+v %v", tr, ok)
	}
	if _, ok := set.LoopTraits(workitems.LoopAgent); ok {
		t.Error("a set without agent says it knows agent")
	}
	err := set.ValidateLoop(&config.Config{}, &config.Template{Name: "n", Loop: config.Loop{Kind: "notes"}})
	var ce *config.ConfigError
	if !errors.As(err, &ce) || ce.Template != "n" || ce.Field != "loop.command" {
		t.Errorf("bad notes settings: %v, want template n field loop.command", err)
	}
	if err := set.ValidateLoop(&config.Config{}, &config.Template{Name: "n", Loop: config.Loop{Kind: "notes", Command: "N.md"}}); err != nil {
		t.Errorf("good notes settings: %v", err)
	}
}
