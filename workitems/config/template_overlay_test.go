package config

import (
	"errors"
	"strings"
	"testing"
)

func TestEffectiveTemplateMatchesParseConfig(t *testing.T) {
	t.Parallel()
	src := `
defaults:
  budget: {wall_time: 10m, cost_usd: 2}
forges:
  gh: {kind: github}
templates:
  - name: t1
    repo: https://github.com/acme/calc.git
    goal: do it
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["go test -json ./..."], ci: {forge: gh, required: [test]}}
    deliver: {forge: gh}
`
	cfg, err := ParseConfig([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	t1, _ := cfg.Template("t1")
	before := cfg.TemplateVersion("t1")

	// The written template (no defaults) comes out as ParseConfig made it.
	raw := Template{Name: "t1", Repo: t1.Repo, Goal: "do it", Loop: Loop{Kind: "script", Commands: []string{"true"}},
		DoneCheck: DoneCheck{Commands: []string{"go test -json ./..."}, CI: &CICheck{Forge: "gh", Required: []string{"test"}}},
		Deliver:   Deliver{Forge: "gh"}}
	got, err := cfg.EffectiveTemplate(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.TemplateVersionOf(got); a != before {
		t.Errorf("version %s, ParseConfig's %s\n got %+v\nwant %+v", a, before, got, t1)
	}
	if raw.DoneCheck.CI.Repo != "" || raw.Deliver.Mode != "" {
		t.Errorf("the argument was changed: %+v", raw)
	}
	// The effective template again is a fixed point.
	if again, err := cfg.EffectiveTemplate(*t1, nil); err != nil || cfg.TemplateVersionOf(again) != before {
		t.Errorf("effective again: %v", err)
	}
	if cfg.TemplateVersion("t1") != before {
		t.Error("the config changed")
	}

	bad := *t1
	bad.Loop.Kind = "robot"
	_, err = cfg.EffectiveTemplate(bad, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Template != "t1" || ce.Field != "loop.kind" || !strings.Contains(err.Error(), "robot") {
		t.Errorf("got %v", err)
	}
}
