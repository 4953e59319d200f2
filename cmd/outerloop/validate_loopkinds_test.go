package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validateConfig writes cfg and runs validate on it.
func validateConfig(t *testing.T, cfg string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return runRoot(t, "--config", path, "validate")
}

// validate checks the programs each loop kind's traits list: an exec agent's binary (named by
// the field that names it), not an agent loop's settings.
func TestValidateChecksTheProgramsALoopKindStarts(t *testing.T) {
	out, err := validateConfig(t, `
defaults: {budget: {wall_time: 1m}}
sandbox: {mode: off}
providers:
  p: {kind: openai-chat, base_url: "http://127.0.0.1:1/v1", model: m}
templates:
  - {name: ext, goal: g, repo: ., loop: {kind: exec, agent: command, command: olvt-no-such-agent}, done_check: {commands: ["true"]}}
  - {name: own, goal: g, repo: ., loop: {kind: agent, provider: p, instructions: olvt-not-a-binary}, done_check: {commands: ["true"]}}
`)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("validate: %v, want exit 1\n%s", err, out)
	}
	if want := `problem: template "ext": loop.command: "olvt-no-such-agent": not found on PATH`; !strings.Contains(out, want) {
		t.Errorf("validate output lacks %q\n%s", want, out)
	}
	if strings.Contains(out, `template "own": loop`) {
		t.Errorf("validate checked a program of an agent loop, which starts none\n%s", out)
	}
}

// validate refuses a loop kind this binary did not register, naming loop.kind and the kinds
// it has.
func TestValidateRefusesAnUnregisteredLoopKind(t *testing.T) {
	out, err := validateConfig(t, `
defaults: {budget: {wall_time: 1m}}
sandbox: {mode: off}
templates:
  - {name: odd, goal: g, repo: ., loop: {kind: robot, commands: ["true"]}, done_check: {commands: ["true"]}}
`)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("validate: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{`problem: config: `, `template "odd"`, `loop.kind`, `unknown inner loop "robot" (one of agent, exec, script)`} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q\n%s", want, out)
		}
	}
}
