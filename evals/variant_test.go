package evals

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

func apply(t *testing.T, cfg *config.Config, variant, template string, task Task) (*config.Template, error) {
	t.Helper()
	v, err := ParseVariant("B", []byte(variant))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	tmpl, ok := cfg.Template(template)
	if !ok {
		t.Fatalf("no template %s", template)
	}
	return v.Apply(cfg, tmpl, task)
}

func TestEmptyVariantLeavesTheTemplate(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	for _, empty := range []string{"", "# nothing\n", "---\n", "{}\n"} {
		got, err := apply(t, cfg, empty, "bump", Task{ID: "a", Template: "bump"})
		if err != nil {
			t.Fatalf("%q: %v", empty, err)
		}
		// bump delivers a patch, has no schedule, CI or triggers: nothing forced changes it,
		// except the notifications.
		want, _ := cfg.Template("bump")
		w := *want
		w.Notify.Events = &[]workitems.NotifyEvent{}
		if a, b := cfg.TemplateVersionOf(got), cfg.TemplateVersionOf(&w); a != b {
			t.Errorf("%q: version %s, want %s\n got %+v\nwant %+v", empty, a, b, got, w)
		}
	}
}

func TestVariantOverlaysFields(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	orig, _ := cfg.Template("fix-calc")
	before := cfg.TemplateVersion("fix-calc")

	got, err := apply(t, cfg, "loop: {provider: big, instructions: Be brief.}\nbudget: {cost_usd: 7}\n", "fix-calc", Task{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Loop.Provider != "big" || got.Loop.Kind != "agent" || got.Loop.Instructions != "Be brief." {
		t.Errorf("loop: %+v", got.Loop)
	}
	// Budgets merge field by field over the effective budget (defaults included).
	if got.Budget.CostUSD != 7 || got.Budget.ModelCalls != 20 || got.Budget.WallTime.D().Minutes() != 10 {
		t.Errorf("budget: %+v", got.Budget)
	}
	if got.DoneCheck.Commands[0] != "go test -json ./..." {
		t.Errorf("done check lost: %+v", got.DoneCheck)
	}

	// Another loop kind, with its commands; lists replace.
	got, err = apply(t, cfg, "loop: {kind: script, provider: \"\", commands: [make fix]}\ndone_check: {commands: [make test, make vet]}\n", "fix-calc", Task{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Loop.Kind != "script" || !slices.Equal(got.Loop.Commands, []string{"make fix"}) ||
		!slices.Equal(got.DoneCheck.Commands, []string{"make test", "make vet"}) {
		t.Errorf("loop %+v, done check %+v", got.Loop, got.DoneCheck)
	}

	// The config's template is untouched.
	if cfg.TemplateVersion("fix-calc") != before || orig.Loop.Provider != "small" || orig.DoneCheck.CI == nil {
		t.Errorf("Apply changed the config's template: %+v", orig)
	}
}

func TestVariantForcesPatchDelivery(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	orig, _ := cfg.Template("fix-calc")
	if orig.Deliver.Mode != workitems.DeliverPullRequest || orig.Deliver.Forge != "gitea" {
		t.Fatalf("fixture: %+v", orig.Deliver)
	}
	got, err := apply(t, cfg, "", "fix-calc", Task{Repo: "https://gitea.example.com/acme/calc-fork.git", Goal: "Fix TestAdd."})
	if err != nil {
		t.Fatal(err)
	}
	d := got.Deliver
	if d.Mode != workitems.DeliverPatch || d.Mode.NeedsForge() || d.Forge != "" || d.Repo != "" || d.Automerge ||
		d.Review != nil || len(d.Labels) != 0 {
		t.Errorf("deliver not forced to patch: %+v", d)
	}
	if got.DoneCheck.CI != nil || got.Schedule != "" || len(got.Triggers) != 0 {
		t.Errorf("ci %+v, schedule %q, triggers %v", got.DoneCheck.CI, got.Schedule, got.Triggers)
	}
	if got.Notify.Events == nil || len(*got.Notify.Events) != 0 {
		t.Errorf("notifications: %+v", got.Notify)
	}
	if got.Repo != "https://gitea.example.com/acme/calc-fork.git" || got.Goal != "Fix TestAdd." {
		t.Errorf("task not applied: repo %q goal %q", got.Repo, got.Goal)
	}

	// A variant may not ask for delivery (or anything else evals force).
	for _, y := range []string{"deliver: {mode: pull_request}\n", "done_check: {ci: {forge: gitea}}\n", "name: other\n", "repo: x\n"} {
		if _, err := ParseVariant("B", []byte(y)); err == nil || !strings.Contains(err.Error(), "cannot be set") {
			t.Errorf("%q: got %v", y, err)
		}
	}
}

func TestVariantRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	for y, field := range map[string]string{
		"loop: {modle: x}\n":                     "loop.modle",
		"colour: red\n":                          "colour",
		"budget:\n  wall_time: 1m\n  cents: 3\n": "budget.cents",
		"done_check: {diff: {max_file: 1}}\n":    "done_check.diff.max_file",
		"operator_files: [x]\n":                  "operator_files",
	} {
		_, err := ParseVariant("B", []byte(y))
		want := `variant B: line `
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `field "`+field+`" is not a template field`) {
			t.Errorf("%q: got %v", y, err)
		}
	}
	// Built in code rather than parsed: Apply checks too.
	cfg := parseConfig(t)
	tmpl, _ := cfg.Template("bump")
	v := Variant{Name: "C", Overlay: map[string]any{"loop": map[string]any{"modle": "x"}}}
	if _, err := v.Apply(cfg, tmpl, Task{}); err == nil || !strings.Contains(err.Error(), `variant C: field "loop.modle" is not a template field`) {
		t.Errorf("got %v", err)
	}
}

func TestVariantInvalidTemplateGetsTheConfigError(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	cases := []struct{ overlay, field string }{
		{"loop: {provider: nope}\n", "loop.provider"},
		{"loop: {kind: robot}\n", "loop.kind"},
		{"budget: {wall_time: 1m, verify_reserve: 2m}\n", "budget"},
		{"done_check: {commands: []}\n", "done_check"},
		{"sandbox: {network: moon}\n", "sandbox"},
	}
	for _, c := range cases {
		_, err := apply(t, cfg, c.overlay, "fix-calc", Task{})
		var ce *config.ConfigError
		if !errors.As(err, &ce) || ce.Template != "fix-calc" || ce.Field != c.field || !strings.Contains(err.Error(), "variant B: ") {
			t.Errorf("%q: got %v (%#v)", c.overlay, err, ce)
		}
	}
	// The same error the config file gives for that template.
	_, err := apply(t, cfg, "loop: {kind: robot}\n", "bump", Task{})
	_, cerr := config.ParseConfig([]byte(strings.Replace(testConfig, `{kind: script, commands: ["go get`, `{kind: robot, commands: ["go get`, 1)))
	if err == nil || cerr == nil || !strings.HasSuffix(err.Error(), cerr.Error()) {
		t.Errorf("variant: %v\nconfig: %v", err, cerr)
	}
	// A bad value type is the decoder's error, named.
	if _, err := apply(t, cfg, "budget: {wall_time: soon}\n", "bump", Task{}); err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Errorf("got %v", err)
	}
}

func TestVariantNamesAndLoad(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "a b", "a:b", strings.Repeat("x", 33), "é"} {
		if _, err := ParseVariant(bad, nil); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte("loop: {provider: big}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := LoadVariant("big_1=" + p)
	if err != nil || v.Name != "big_1" || v.Source != p || v.Overlay["loop"].(map[string]any)["provider"] != "big" {
		t.Errorf("got %+v, %v", v, err)
	}
	for _, spec := range []string{p, "=" + p, "x=", "x=" + p + ".missing"} {
		if _, err := LoadVariant(spec); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
}

// TestAVariantSetsTheModelAndPromptVariantWhereTheLoopTakesThem: the example of docs/evals.md
// (loop.model and loop.prompt_variant over an agent template) applies; a model over a script
// template is refused with the config's own error naming the field.
func TestAVariantSetsTheModelAndPromptVariantWhereTheLoopTakesThem(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t)
	eff, err := apply(t, cfg, "loop:\n  model: gpt-5-mini\n  prompt_variant: minimal-diff\nbudget: {cost_usd: 0.40}\n", "fix-calc", Task{})
	if err != nil {
		t.Fatal(err)
	}
	if eff.Loop.Model != "gpt-5-mini" || eff.Loop.PromptVariant != "minimal-diff" || eff.Loop.Provider != "small" || eff.FirstStrategy().Model != "gpt-5-mini" {
		t.Errorf("loop %+v, want the model and prompt variant over provider small", eff.Loop)
	}
	if _, err := apply(t, cfg, "loop: {model: gpt-5-mini}\n", "bump", Task{}); err == nil || !strings.Contains(err.Error(), "loop.model: a script loop calls no model") {
		t.Errorf("a model over a script template: %v, want it refused naming loop.model", err)
	}
}
