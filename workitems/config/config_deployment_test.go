package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const deploymentYAML = `# a deployment
redis: redis://example:6379/2
defaults:
  budget: {wall_time: 10m}
retention: {closed: 48h}
templates:
- name: a
  goal: |
    fix it
    templates: not a key, indented
  loop: {kind: script, commands: ["true"]}
  done_check: {commands: ["true"]}
# a comment at column 0 between templates
- name: b
  goal: compact entries at column 0
  loop: {kind: script, commands: ["true"]}
  done_check: {commands: ["true"]}
waits: {poll_every: 2m}
`

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadDeploymentConfigLeavesTemplatesOut: the deployment's settings are the ones the
// whole file gives, and no template is parsed, validated or kept.
func TestLoadDeploymentConfigLeavesTemplatesOut(t *testing.T) {
	path := writeConfig(t, deploymentYAML)
	full, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Templates) != 2 {
		t.Fatalf("the fixture has %d templates, want 2", len(full.Templates))
	}
	dep, err := LoadDeploymentConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.Templates) != 0 {
		t.Errorf("LoadDeploymentConfig kept %d templates", len(dep.Templates))
	}
	deployment := func(c *Config) string {
		b, err := json.Marshal([]any{c.Redis, c.Defaults, c.Retention, c.Sandbox, c.Notify, c.Waits, c.Dir})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := deployment(dep), deployment(full); got != want {
		t.Errorf("deployment settings differ:\n got %s\nwant %s", got, want)
	}

	// A wrong template is not read; a wrong deployment setting is the error LoadConfig gives.
	bad := strings.Replace(deploymentYAML, "kind: script", "kind: nosuch", 1)
	if _, err := LoadConfig(writeConfig(t, bad)); err == nil {
		t.Fatal("the wrong template is not wrong")
	}
	if _, err := LoadDeploymentConfig(writeConfig(t, bad)); err != nil {
		t.Errorf("a wrong template failed LoadDeploymentConfig: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(deploymentYAML, "closed: 48h", "closed: -1h", 1),
		strings.Replace(deploymentYAML, "waits:", "waitz:", 1),
		strings.Replace(deploymentYAML, "redis:", "templates: []\nredis:", 1), // a repeated key
		deploymentYAML + "redis: [\n",
	} {
		path := writeConfig(t, bad)
		_, want := LoadConfig(path)
		_, got := LoadDeploymentConfig(path)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("LoadDeploymentConfig's error %v, want LoadConfig's %v", got, want)
		}
	}
}

// TestLoadDeploymentConfigFallsBackToTheWholeFile: a file whose top level is not plainly cut
// is parsed whole, so its settings are the ones the whole file gives.
func TestLoadDeploymentConfigFallsBackToTheWholeFile(t *testing.T) {
	tmpl := `{name: a, goal: g, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}`
	for name, body := range map[string]string{
		"flow":                  fmt.Sprintf("{defaults: {budget: {wall_time: 1m}}, retention: {closed: 48h}, templates: [%s]}\n", tmpl),
		"anchor in templates":   fmt.Sprintf("defaults: {budget: {wall_time: 1m}}\ntemplates:\n  - &t %s\nretention: {closed: 48h}\nextra_anchor_user: *t\n", tmpl),
		"quoted key":            fmt.Sprintf("defaults: {budget: {wall_time: 1m}}\n\"retention\": {closed: 48h}\ntemplates: [%s]\n", tmpl),
		"directive":             fmt.Sprintf("%%YAML 1.1\n---\ndefaults: {budget: {wall_time: 1m}}\nretention: {closed: 48h}\ntemplates: [%s]\n", tmpl),
		"leading document mark": fmt.Sprintf("---\ndefaults: {budget: {wall_time: 1m}}\nretention: {closed: 48h}\ntemplates: [%s]\n", tmpl),
	} {
		path := writeConfig(t, body)
		full, ferr := LoadConfig(path)
		dep, derr := LoadDeploymentConfig(path)
		if (ferr == nil) != (derr == nil) || ferr != nil && ferr.Error() != derr.Error() {
			t.Errorf("%s: LoadDeploymentConfig: %v, LoadConfig: %v", name, derr, ferr)
			continue
		}
		if ferr == nil && dep.Retention != full.Retention {
			t.Errorf("%s: retention %+v, the whole file's %+v", name, dep.Retention, full.Retention)
		}
	}
}

func TestWithoutTemplatesCutsOnlyAPlainBlockMapping(t *testing.T) {
	for _, c := range []struct {
		in, out string
		ok      bool
	}{
		{"a: 1\ntemplates:\n  - x\nb: 2\n", "a: 1\nb: 2\n", true},
		{"templates:\n- x\n- y\n", "", true},
		{"---\na: 1\ntemplates: [x]\n", "---\na: 1\n", true},
		{"a: 1\n---\ntemplates: []\n", "", false},
		{"- a\n", "", false},
		{"a: 1\n\ttemplates: []\n", "", false},
		{"a:b\n", "", false},
		{"a: 1\na: 2\n", "", false},
		{"? a\n: 1\n", "", false},
	} {
		out, ok := withoutTemplates([]byte(c.in))
		if ok != c.ok || ok && string(out) != c.out {
			t.Errorf("withoutTemplates(%q) = %q, %v; want %q, %v", c.in, out, ok, c.out, c.ok)
		}
	}
}

func TestSplitTemplatesGivesTheSectionAsItIs(t *testing.T) {
	in := "a: 1\ntemplates:\n  - name: x\n# c\nb: 2\n"
	rest, section, ok := splitTemplates([]byte(in))
	if !ok || string(rest) != "a: 1\nb: 2\n" || string(section) != "templates:\n  - name: x\n# c\n" {
		t.Errorf("splitTemplates(%q) = %q, %q, %v", in, rest, section, ok)
	}
	rest, section, ok = splitTemplates([]byte("a: 1\ntemplates:\n- y"))
	if !ok || string(rest) != "a: 1\n" || string(section) != "templates:\n- y" {
		t.Errorf("a section at the end: %q, %q, %v", rest, section, ok)
	}
}
