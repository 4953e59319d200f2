package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// runRoot runs the CLI in this process (the commands here open no app).
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	root := newRoot(&out, &errw)
	root.SetArgs(args)
	err := root.Execute()
	return out.String() + errw.String(), err
}

// validate names every problem that can be found before a run, one line each, and exits 1;
// token variables appear by name only.
func TestValidateNamesEveryProblem(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "repo", "check.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OLVT_SET_KEY", "sk-secret-value-1234")
	t.Setenv("OLVT_UNSET_KEY", "")
	t.Setenv("OLVT_FORGE_TOKEN", "")
	cfg := `
defaults:
  budget: {wall_time: 10m}
sandbox: {mode: off}
providers:
  good: {kind: openai-chat, api_key_env: OLVT_SET_KEY, model: m}
  bad: {kind: openai-chat, api_key_env: OLVT_UNSET_KEY, model: m}
forges:
  gh: {kind: github, token_env: OLVT_FORGE_TOKEN, webhook_secret_env: OLVT_UNSET_HOOK_SECRET}
templates:
  - name: local
    goal: g
    repo: repo
    schedule: "30 2 * * 1"
    loop: {kind: script, commands: ["olvt-no-such-binary --x", "./missing.sh", "FOO=1 true", "cd sub && make"]}
    done_check: {commands: ["./check.sh", "olvt-no-such-check"]}
  - name: gone
    goal: g
    repo: no-such-dir
    loop: {kind: agent, provider: bad}
    done_check: {commands: ["sh -c true"]}
  - name: remote
    goal: g
    repo: "file://` + dir + `/no-such-remote.git"
    loop: {kind: agent, provider: good}
    done_check: {commands: ["sh -c true"]}
    triggers:
      - api: {secret_env: OLVT_UNSET_TRIGGER_SECRET}
`
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "--config", path, "validate")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("validate: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{
		`problem: template "gone": repo "no-such-dir": ` + filepath.Join(dir, "no-such-dir") + ` does not exist`,
		`problem: template "remote": repo "file://` + dir + `/no-such-remote.git": remote does not answer git ls-remote`,
		`problem: template "local": loop.commands[0]: "olvt-no-such-binary --x": not found on PATH`,
		`problem: template "local": loop.commands[1]: "./missing.sh": ` + filepath.Join(dir, "repo", "missing.sh") + ` does not exist`,
		`problem: template "local": done_check.commands[1]: "olvt-no-such-check": not found on PATH`,
		`problem: providers.bad.api_key_env: OLVT_UNSET_KEY is not set (used by template "gone")`,
		`problem: forges.gh.token_env: OLVT_FORGE_TOKEN is not set`,
		`problem: forges.gh.webhook_secret_env: OLVT_UNSET_HOOK_SECRET is not set: every webhook delivery to /hooks/gh is refused`,
		`problem: template "remote": triggers api: the environment variable OLVT_UNSET_TRIGGER_SECRET is empty or unset: POST /api/templates/remote/trigger answers 503`,
		`providers.good: OLVT_SET_KEY is set`,
		`repo "repo": ` + filepath.Join(dir, "repo") + ` exists`,
		`template "local": schedule "30 2 * * 1": next `,
		"9 problem(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q", want)
		}
	}
	if strings.Contains(out, "sk-secret-value") {
		t.Error("validate printed a token's value")
	}
	for _, ok := range []string{"check.sh", "FOO=1", "cd sub"} {
		if strings.Contains(out, "problem: ") && strings.Contains(out, ok+"\": ") {
			t.Errorf("validate reported a problem with %q, which starts", ok)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	// The three next runs of the schedule, in order.
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `template "local": schedule`) {
			if n := strings.Count(l, "T02:30:00Z"); n != 3 {
				t.Errorf("schedule line %q: want 3 next runs at 02:30", l)
			}
		}
	}
}

// A clean config validates with exit 0.
func TestValidateCleanConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte("defaults:\n  budget: {wall_time: 1m}\nsandbox: {mode: off}\ntemplates:\n  - name: a\n    goal: g\n    repo: .\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"sh -c true\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "--config", path, "validate")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("validate of a clean config: %v\n%s", err, out)
	}
	// How the limits are enforced here, and each template's limits with the defaults.
	for _, want := range []string{"; limits: ", "file_size as RLIMIT_FSIZE", `template "a": sandbox off`,
		"limits memory 4GiB, processes 1024, cpu_time 1h, file_size 4GiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}
}

// version prints the module and, with a config, its version (the hash items pin).
func TestVersionPrintsBuildAndConfigVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte("defaults:\n  budget: {wall_time: 1m}\ntemplates:\n  - name: a\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "--config", path, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "outerloop: outerloop ") || !strings.Contains(out, "config: "+path+" version "+cfg.Version()+" (1 templates)") {
		t.Fatalf("version output:\n%s\nwant the module and config version %s", out, cfg.Version())
	}
	out, err = runRoot(t, "--config", filepath.Join(dir, "none.yaml"), "version")
	if err != nil || !strings.Contains(out, "config: none loaded from") {
		t.Fatalf("version without a config: %v\n%s", err, out)
	}
}

// validate says whether the sandbox works where it runs (in a container image, on a host): with
// a bubblewrap that fails as it does in a container without user namespaces it names each
// template whose items a worker would refuse, why, and what to do; with the real one it says
// which sandbox is in force.
func TestValidateSaysWhetherTheSandboxWorksHere(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte("defaults:\n  budget: {wall_time: 1m}\ntemplates:\n  - name: a\n    goal: g\n    repo: .\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"sh -c true\"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "bwrap")
	msg := "bwrap: No permissions to create a new namespace, likely because the kernel does not allow non-privileged user namespaces."
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho '"+msg+"' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTERLOOP_BWRAP", fake)
	out, err := runRoot(t, "--config", path, "validate")
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("validate: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{`problem: template "a": sandbox mode bwrap cannot start here`, msg,
		"its items are refused: install bubblewrap", "docs/containers.md", "sandbox: {mode: off}"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}

	t.Setenv("OUTERLOOP_BWRAP", "")
	out, err = runRoot(t, "--config", path, "validate")
	if err != nil || !strings.Contains(out, "sandbox: bwrap (") {
		t.Fatalf("validate where bubblewrap works: %v\n%s", err, out)
	}
}

// `outerloop escalations` prints, below its table, each escalation's cause and the failing
// command's last lines.
func TestEscalationsPrintWhy(t *testing.T) {
	t.Parallel()
	items := []*workitems.Item{
		{ID: "bump@1", Escalation: &workitems.Escalation{Reason: "exit_failed", Cause: "the sandbox's network refused a connection",
			Output: "go: downloading x\ndial tcp: lookup proxy.golang.org"}},
		{ID: "plain@1", Escalation: &workitems.Escalation{Reason: "max_attempts"}},
	}
	var b bytes.Buffer
	printWhy(&b, items)
	want := "\nbump@1\n  sandbox: the sandbox's network refused a connection\n  | go: downloading x\n  | dial tcp: lookup proxy.golang.org\n"
	if b.String() != want {
		t.Fatalf("printWhy:\n%q\nwant\n%q", b.String(), want)
	}
}
