package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const manyTemplatesYAML = `defaults:
  budget: {wall_time: 10m}
templates:
  # the first template
  - name: a
    goal: |
      a goal whose text holds
      - name: b
      name: c
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  -   # keys on the lines below
    name: "b"   # quoted, with a comment
    goal: second
    loop:
      kind: script
      commands:
      - "true"   # name: not-a-template
    done_check: {commands: ["true"]}
  - goal: third, its name last
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    name: 'c'
retention: {closed: 48h}
`

// TestLoadTemplateConfigReadsTheTemplateTheWholeFileGives: each template, loaded alone, is the
// template LoadConfig gives (after defaults), with the same deployment settings.
func TestLoadTemplateConfigReadsTheTemplateTheWholeFileGives(t *testing.T) {
	path := writeConfig(t, manyTemplatesYAML)
	full, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, name := range []string{"a", "b", "c"} {
		one, err := LoadTemplateConfig(path, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(one.Templates) != 1 {
			t.Fatalf("%s: %d templates, want the one", name, len(one.Templates))
		}
		want, _ := full.Template(name)
		if got := js(one.Templates[0]); got != js(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, js(want))
		}
		if one.TemplateVersion(name) != full.TemplateVersion(name) {
			t.Errorf("%s: template version %s, the whole file's %s", name, one.TemplateVersion(name), full.TemplateVersion(name))
		}
		if js([]any{one.Defaults, one.Retention, one.Dir}) != js([]any{full.Defaults, full.Retention, full.Dir}) {
			t.Errorf("%s: deployment settings differ", name)
		}
	}
	// Another template that is wrong is not read.
	bad := strings.Replace(manyTemplatesYAML, "goal: second", "goal: second\n    nosuchkey: 1", 1)
	if _, err := LoadConfig(writeConfig(t, bad)); err == nil {
		t.Fatal("the wrong template is not wrong")
	}
	if one, err := LoadTemplateConfig(writeConfig(t, bad), "a"); err != nil || len(one.Templates) != 1 {
		t.Errorf("template a of a file whose template b is wrong: %v", err)
	}
	// The named template wrong: LoadConfig's error.
	path = writeConfig(t, bad)
	_, want := LoadConfig(path)
	if _, got := LoadTemplateConfig(path, "b"); got == nil || !strings.Contains(got.Error(), "nosuchkey") {
		t.Errorf("template b wrong: %v, want an error naming the key (LoadConfig's: %v)", got, want)
	}
}

// TestLoadTemplateConfigFallsBackToTheWholeFile: a name not found exactly once, or a file not
// plainly cut, is loaded whole: the same templates, or LoadConfig's error.
func TestLoadTemplateConfigFallsBackToTheWholeFile(t *testing.T) {
	tmpl := func(name string) string {
		return fmt.Sprintf(`{name: %s, goal: g, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}`, name)
	}
	block := func(name string) string {
		return fmt.Sprintf("  - name: %s\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n", name)
	}
	for _, c := range []struct {
		name, body, ask string
		templates       int // the whole file's, or 0 for its error
	}{
		{"flow section", fmt.Sprintf("defaults: {budget: {wall_time: 1m}}\ntemplates: [%s, %s]\n", tmpl("a"), tmpl("b")), "a", 2},
		{"flow entries", fmt.Sprintf("defaults: {budget: {wall_time: 1m}}\ntemplates:\n  - %s\n  - %s\n", tmpl("a"), tmpl("b")), "a", 2},
		{"an alias into another template", "defaults: {budget: {wall_time: 1m}}\ntemplates:\n" + strings.Replace(block("a"), "goal: g", "goal: &g shared", 1) + strings.Replace(block("b"), "goal: g", "goal: *g", 1), "b", 2},
		{"a name given twice", "defaults: {budget: {wall_time: 1m}}\ntemplates:\n" + block("a") + block("a"), "a", 0},
		{"no such template", "defaults: {budget: {wall_time: 1m}}\ntemplates:\n" + block("a"), "zz", 1},
	} {
		path := writeConfig(t, c.body)
		full, ferr := LoadConfig(path)
		one, err := LoadTemplateConfig(path, c.ask)
		switch {
		case c.templates == 0:
			if ferr == nil || err == nil || err.Error() != ferr.Error() {
				t.Errorf("%s: LoadTemplateConfig: %v, want LoadConfig's error %v", c.name, err, ferr)
			}
		case ferr != nil || err != nil:
			t.Errorf("%s: LoadConfig: %v, LoadTemplateConfig: %v", c.name, ferr, err)
		case len(full.Templates) != c.templates || len(one.Templates) != c.templates:
			t.Errorf("%s: %d templates whole, %d from LoadTemplateConfig; want %d (the whole file)", c.name, len(full.Templates), len(one.Templates), c.templates)
		}
	}
}

func TestTemplateEntriesReadTheirNamesOnlyAtTheirOwnLevel(t *testing.T) {
	for _, c := range []struct {
		body  string
		names []string
	}{
		{"- name: a\n  goal: x\n- name: b\n", []string{"a", "b"}},
		{"  - goal: x\n    name: a # why\n  - name: \"b\"\n", []string{"a", "b"}},
		{"- goal: |\n    name: x\n  loop:\n  - name: y\n", []string{""}},
		{"- name: a\n  name: b\n", []string{"\x00"}},
		{"- name: {x: 1}\n", []string{"\x00"}},
		{"-    name: a\n", []string{""}},
		{"# a comment\n\n- name: a\n", []string{"a"}},
	} {
		var got []string
		for _, e := range templateEntries([]byte(c.body)) {
			got = append(got, e.name)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.names) {
			t.Errorf("templateEntries(%q) names %q, want %q", c.body, got, c.names)
		}
	}
	if e := templateEntries([]byte("  name: a\n")); e != nil {
		t.Errorf("a body that is no sequence: %+v", e)
	}
}
