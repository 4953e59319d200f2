package config

import (
	"strings"
	"testing"

	"outerloop/workitems"
)

const versionYAML = `
defaults:
  budget: {wall_time: 10m}
providers:
  p: {kind: openai-chat, api_key_env: K, model: m1}
templates:
  - name: a
    goal: do a
    loop: {kind: agent, provider: p}
    done_check: {commands: ["true"]}
  - name: b
    goal: do b
    repo: r
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

func mustParse(t *testing.T, y string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The config version is a hash of the normalised config: comments, key order and spelled-out
// defaults leave it; a change of a setting moves it, and moves only the versions of the
// templates that use the setting.
func TestConfigVersionIsStableAndSelective(t *testing.T) {
	base := mustParse(t, versionYAML)
	v := base.Version()
	if len(v) != versionLen || base.TemplateVersion("a") == "" || base.TemplateVersion("zz") != "" {
		t.Fatalf("version %q, template versions %q %q", v, base.TemplateVersion("a"), base.TemplateVersion("zz"))
	}
	same := mustParse(t, "# a comment\n"+strings.Replace(versionYAML, "defaults:\n  budget: {wall_time: 10m}",
		"defaults:\n  max_attempts: 3\n  budget: {wall_time: 600s}", 1))
	if same.Version() != v {
		t.Fatalf("a comment and spelled-out defaults changed the version: %s → %s", v, same.Version())
	}
	model := mustParse(t, strings.Replace(versionYAML, "model: m1", "model: m2", 1))
	if model.Version() == v {
		t.Fatal("a changed model left the config version")
	}
	if model.TemplateVersion("a") == base.TemplateVersion("a") {
		t.Fatal("a changed model of a's provider left a's template version")
	}
	if model.TemplateVersion("b") != base.TemplateVersion("b") {
		t.Fatal("a provider b does not use changed b's template version")
	}
}

// A config that does not use a setting added later keeps its version across the upgrade: a
// moved version makes every item in flight re-read its config and re-check its pin. These are
// the versions of versionYAML before loop.model and loop.prompt_variant existed.
func TestANewSettingLeftUnsetKeepsTheVersions(t *testing.T) {
	c := mustParse(t, versionYAML)
	if got := []string{c.Version(), c.TemplateVersion("a"), c.TemplateVersion("b")}; got[0] != "de45c95cdb2f" ||
		got[1] != "74ac479629e2" || got[2] != "082d17ac1bd9" {
		t.Fatalf("versions %v moved: a new field needs json omitempty (or a reason to move every version)", got)
	}
}

// Incompatible names loop kind, repo and delivery changes; other changes are compatible.
func TestPinIncompatible(t *testing.T) {
	base := mustParse(t, versionYAML)
	tb, _ := base.Template("b")
	pin := base.PinFor(tb)
	if why := Incompatible(pin, tb); len(why) != 0 {
		t.Fatalf("the same template is incompatible: %v", why)
	}
	goal := mustParse(t, strings.Replace(versionYAML, "goal: do b", "goal: do b better", 1))
	tg, _ := goal.Template("b")
	if why := Incompatible(pin, tg); len(why) != 0 {
		t.Fatalf("a changed goal is incompatible: %v", why)
	}
	moved := mustParse(t, strings.Replace(strings.Replace(versionYAML, "repo: r", "repo: r2", 1),
		`loop: {kind: script, commands: ["true"]}`, `loop: {kind: exec, agent: command, command: x}`, 1))
	tm, _ := moved.Template("b")
	why := strings.Join(Incompatible(pin, tm), "; ")
	if !strings.Contains(why, "loop.kind script → exec") || !strings.Contains(why, `repo "r" → "r2"`) {
		t.Fatalf("incompatible = %q, want the loop kind and repo changes", why)
	}
	var none *workitems.ConfigPin
	if why := Incompatible(none, tm); len(why) != 0 {
		t.Fatalf("an item without a pin is incompatible: %v", why)
	}
}
