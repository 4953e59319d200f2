package evals

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/workitems/config"
)

const exampleSuite = `
name: calc-fixes
tasks:
  - id: add-overflow            # unique in the suite
    template: fix-calc          # loop, done check, budgets and sandbox come from this template
    repo: https://gitea.example.com/acme/calc.git   # default: the template's repo
    ref: 3f2a9c1                # commit or branch; default: the repo's default branch
    input: "TestAdd fails for large values"          # optional
  - id: div-zero
    template: bump
`

// testConfig is a deployment with a native (agent) template delivering to a forge, a script
// template and a template without a repo.
const testConfig = `
defaults:
  budget: {wall_time: 10m, cost_usd: 2, model_calls: 20}
sandbox: {network: registries, allow: [goproxy.example.com], limits: {memory: 2GiB}}
forges:
  gitea: {kind: gitea, base_url: https://gitea.example.com}
providers:
  small: {kind: openai-chat, base_url: http://127.0.0.1:1/v1, model: small-1}
  big: {kind: openai-chat, base_url: http://127.0.0.1:1/v1, model: big-1}
templates:
  - name: fix-calc
    repo: https://gitea.example.com/acme/calc.git
    goal: Make the calc tests pass.
    loop: {kind: agent, provider: small}
    done_check:
      commands: ["go test -json ./..."]
      ci: {forge: gitea, required: [test], wait: 10m}
    deliver: {forge: gitea, mode: pull_request, labels: [outerloop], automerge: true}
    schedule: "0 3 * * *"
  - name: bump
    repo: https://gitea.example.com/acme/calc.git
    goal: Bump the dependencies.
    loop: {kind: script, commands: ["go get -u ./...", "go mod tidy"]}
    done_check: {commands: ["go build ./..."]}
    sandbox: {allow: [proxy.example.com]}
    budget: {steps: 40}
  - name: norepo
    goal: Write something.
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

func parseConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseSuiteExample(t *testing.T) {
	t.Parallel()
	s, err := ParseSuite([]byte(exampleSuite))
	if err != nil {
		t.Fatal(err)
	}
	want := Task{ID: "add-overflow", Template: "fix-calc", Repo: "https://gitea.example.com/acme/calc.git",
		Ref: "3f2a9c1", Input: "TestAdd fails for large values"}
	if s.Name != "calc-fixes" || len(s.Tasks) != 2 || s.Tasks[0] != want || s.Tasks[1] != (Task{ID: "div-zero", Template: "bump"}) {
		t.Errorf("got %+v", s)
	}
	if err := s.Check(parseConfig(t)); err != nil {
		t.Errorf("check: %v", err)
	}
}

func TestParseSuiteRefusesBadInputNamingIt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"duplicate id", exampleSuite + "  - {id: add-overflow, template: bump}\n",
			[]string{`task #3`, `"add-overflow"`, "duplicate of task #1"}},
		{"unknown task key", strings.Replace(exampleSuite, "ref: 3f2a9c1", "rev: 3f2a9c1", 1),
			[]string{"task #1", "line 7", `unknown key "rev"`}},
		{"unknown top-level key", "owner: me\n" + exampleSuite, []string{"line 1", `unknown key "owner"`}},
		{"missing template", exampleSuite + "  - {id: three}\n", []string{"task #3 (three)", "template: missing"}},
		{"missing id", exampleSuite + "  - {template: bump}\n", []string{"task #3", "id: missing"}},
		{"bad id characters", exampleSuite + "  - {id: \"a:b c\", template: bump}\n", []string{"task #3", `id "a:b c"`, "letters, digits"}},
		{"missing name", strings.Replace(exampleSuite, "name: calc-fixes", "", 1), []string{"name: missing"}},
		{"no tasks", "name: x\n", []string{"tasks: missing"}},
		{"malformed", "name: [", []string{"malformed YAML"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSuite([]byte(c.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseSuiteReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := ParseSuite([]byte("name: s\ntasks:\n  - {id: a}\n  - {id: a, template: x}\n"))
	if err == nil || !strings.Contains(err.Error(), "template: missing") || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("want both problems, got %v", err)
	}
}

func TestSuiteCheck(t *testing.T) {
	t.Parallel()
	s, err := ParseSuite([]byte(`
name: s
tasks:
  - {id: ok, template: bump}
  - {id: ghost, template: nope}
  - {id: lost, template: norepo}
  - {id: given, template: norepo, repo: ./here}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check(parseConfig(t))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, w := range []string{`task ghost: template "nope" is not in the config`, `task lost: no repo, and template "norepo" has none`} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not say %q", msg, w)
		}
	}
	if strings.Contains(msg, "task ok") || strings.Contains(msg, "task given") {
		t.Errorf("good tasks refused: %q", msg)
	}
}

func TestLoadSuiteNamesTheFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte("name: s\ntasks: [{id: a, template: bump, colour: red}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSuite(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "colour") {
		t.Errorf("got %v", err)
	}
	if err := os.WriteFile(p, []byte(exampleSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := LoadSuite(p); err != nil || s.Name != "calc-fixes" {
		t.Errorf("got %v, %v", s, err)
	}
}
