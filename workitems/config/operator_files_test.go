package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLinePaths(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // word, with "!" for Program and "*" for Script
	}{
		{"sh /etc/outerloop/hooks/check.sh", []string{"sh!", "/etc/outerloop/hooks/check.sh*"}},
		{"bash -eu hooks/check.sh --fast", []string{"bash!", "hooks/check.sh*"}},
		{"python3 -u /srv/bump.py", []string{"python3!", "/srv/bump.py*"}},
		{"sh -c 'exit 0' /x/not-a-script", []string{"sh!", "/x/not-a-script"}},
		{"/opt/ci/run-tests --out=/srv/out.json 2>/dev/null", []string{"/opt/ci/run-tests!", "/srv/out.json", "/dev/null"}},
		{"FOO=1 ./check.sh && go test ./...", []string{"./check.sh!", "go!", "./..."}},
		{`"/opt/my tool/run"`, []string{`/opt/my!`, "tool/run"}}, // quoted blanks are not understood: both halves
		{"cat $HOME/x /etc/*.conf", []string{"cat!"}},
		{"sed -i 's/a - b/a + b/' calc.go", []string{"sed!", "s/a", "b/a", "b/"}},
		{"go test ./... ; sh /etc/h.sh", []string{"go!", "./...", "sh!", "/etc/h.sh*"}},
	} {
		var got []string
		for _, p := range linePaths("f", tc.line) {
			w := p.Word
			if p.Program {
				w += "!"
			}
			if p.Script {
				w += "*"
			}
			got = append(got, w)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.line, got, tc.want)
		}
	}
}

// The files found, and the problems validate reports, for a config directory holding hooks.
func TestOperatorFilesAndProblems(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "etc", "outerloop")
	repo := filepath.Join(dir, "repo")
	for _, f := range []string{filepath.Join(cfgDir, "hooks", "check.sh"), filepath.Join(cfgDir, "next.sh"),
		filepath.Join(repo, "both.sh"), filepath.Join(cfgDir, "both.sh"), filepath.Join(dir, "opt", "run")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tm := &Template{Name: "x", Loop: Loop{Kind: "agent", StopHooks: []string{
		"sh " + filepath.Join(cfgDir, "hooks", "check.sh"), // shown
		"sh " + filepath.Join(cfgDir, "hooks", "gone.sh"),  // missing
		"sh next.sh",                      // next to the config: refused
		"sh both.sh",                      // the repo has it: fine
		"ls " + filepath.Join(dir, "etc"), // holds the config dir: refused, not bound
	}}, DoneCheck: DoneCheck{Commands: []string{filepath.Join(dir, "opt", "run") + " --json", "go test ./... 2>/dev/null"}}}
	files := OperatorFiles(tm, cfgDir)
	want := []string{filepath.Join(cfgDir, "hooks", "check.sh"), filepath.Join(dir, "opt", "run")}
	if !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	probs := OperatorFileProblems(tm, cfgDir, repo)
	for _, w := range []string{
		`loop.stop_hooks[1]: "sh ` + filepath.Join(cfgDir, "hooks", "gone.sh") + `": ` + filepath.Join(cfgDir, "hooks", "gone.sh") + " does not exist on this host",
		`loop.stop_hooks[2]: "sh next.sh": "next.sh" is resolved in the workspace, where commands run, not next to the config: to run ` + filepath.Join(cfgDir, "next.sh") + ", write its absolute path",
		`loop.stop_hooks[4]: "ls ` + filepath.Join(dir, "etc") + `": ` + filepath.Join(dir, "etc") + " holds the config directory",
	} {
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.HasPrefix(p, w) }) {
			t.Errorf("no problem %q in\n%s", w, strings.Join(probs, "\n"))
		}
	}
	if len(probs) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(probs), strings.Join(probs, "\n"))
	}
	// With a remote repo, a script next to the config that the repo might have is refused too.
	if probs := OperatorFileProblems(tm, cfgDir, ""); len(probs) != 4 {
		t.Errorf("remote repo: %d problems, want 4:\n%s", len(probs), strings.Join(probs, "\n"))
	}
}

// LoadConfig finds each template's operator files once the config's directory is known.
func TestLoadConfigFindsOperatorFiles(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "hooks", "check.sh")
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	y := "defaults:\n  budget: {wall_time: 1m}\nproviders:\n  p: {kind: replay, file: x.jsonl}\ntemplates:\n  - name: a\n    goal: g\n    repo: .\n" +
		"    loop: {kind: agent, provider: p, stop_hooks: [\"sh " + hook + "\"]}\n    done_check: {commands: [\"go test ./...\"]}\n"
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Templates[0].OperatorFiles; !slices.Equal(got, []string{hook}) {
		t.Fatalf("operator files %q, want [%s]", got, hook)
	}
}
