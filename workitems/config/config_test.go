package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
)

func TestParseConfigFullExample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("the example from the spec must load: %v", err)
	}
	pf, ok := cfg.Template("payment-fix")
	if !ok {
		t.Fatal("payment-fix missing")
	}
	if pf.Budget.CostUSD != 3 || pf.Budget.ModelCalls != 50 || pf.Budget.WallTime.D().Minutes() != 30 {
		t.Errorf("template budget should override cost and inherit the rest: %+v", pf.Budget)
	}
	if pf.ItemBudget.CostUSD != 15 || pf.MaxAttempts != 3 || pf.CatchUp != "last" {
		t.Errorf("defaults not applied: %+v", pf)
	}
	if pf.DoneCheck.CI == nil || pf.DoneCheck.CI.Wait.D().Minutes() != 30 || pf.DoneCheck.Diff.MaxLines != 400 {
		t.Errorf("done check: %+v", pf.DoneCheck)
	}
	nd, _ := cfg.Template("nightly-deps")
	if nd.CatchUp != "none" || nd.DoneCheck.Format != "auto" || nd.Retry.SameFailureLimit != 2 {
		t.Errorf("template defaults: %+v", nd)
	}
	if d := pf.Deliver; d.Forge != "github" || d.Repo != "acme/payments" || d.Mode != workitems.DeliverPullRequest ||
		d.MergeMethod != workitems.MergeSquash || d.Title != "Make the payment tests pass without changing their assertions." ||
		pf.DoneCheck.CI.Forge != "github" || pf.DoneCheck.CI.Repo != "acme/payments" {
		t.Errorf("deliver: %+v, ci: %+v", d, pf.DoneCheck.CI)
	}
	if g := cfg.Forges["gitea"]; g.Kind != workitems.ForgeGitea || g.TokenEnv != "GITEA_TOKEN" {
		t.Errorf("forges: %+v", cfg.Forges)
	}
	if nd.Deliver.Mode != workitems.DeliverPatch || nd.Deliver.Branch != DefaultBranchPattern {
		t.Errorf("deliver defaults without a forge: %+v", nd.Deliver)
	}
	if cfg.Providers["openai"].Prices.OutputPerMTok != 10 {
		t.Errorf("prices: %+v", cfg.Providers["openai"].Prices)
	}
}

const validTemplate = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: t1
    goal: do it
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["go test -json ./..."]}
`

func TestParseConfigRejectsBadInputNamingTemplateAndField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"malformed YAML", "templates: [", []string{"malformed YAML"}},
		{"unknown key in a template", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    colour: red", 1),
			[]string{`template "t1"`, "colour", "unknown key"}},
		{"unknown key in the loop", strings.Replace(validTemplate, `kind: script,`, `kind: script, shell: zsh,`, 1),
			[]string{`template "t1"`, "loop.shell", "unknown key"}},
		{"unknown top-level key", "redis_url: x\n" + validTemplate, []string{"redis_url", "unknown key"}},
		{"bad cron spec", strings.Replace(validTemplate, "goal: do it", `goal: do it
    schedule: "*/5 * *"`, 1), []string{`template "t1"`, "schedule", "*/5 * *"}},
		{"unknown inner loop", strings.Replace(validTemplate, "kind: script", "kind: robot", 1),
			[]string{`template "t1"`, "loop.kind", `unknown inner loop "robot"`}},
		{"negative budget", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    budget: {cost_usd: -1}", 1),
			[]string{`template "t1"`, "budget", "cost_usd", "negative"}},
		{"missing wall time budget", strings.Replace(validTemplate, "budget: {wall_time: 10m}", "max_attempts: 2", 1),
			[]string{`template "t1"`, "budget.wall_time", "missing"}},
		{"bad duration", strings.Replace(validTemplate, "wall_time: 10m", "wall_time: ten", 1),
			[]string{"not a duration"}},
		{"duplicate names", validTemplate + `  - name: t1
    goal: again
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`, []string{`template "t1"`, "duplicate"}},
		{"empty done check", strings.Replace(validTemplate, `done_check: {commands: ["go test -json ./..."]}`, "done_check: {}", 1),
			[]string{`template "t1"`, "done_check", "empty"}},
		{"agent without provider", strings.Replace(validTemplate, `{kind: script, commands: ["true"]}`, `{kind: agent, provider: nope}`, 1),
			[]string{`template "t1"`, "loop.provider", "nope"}},
		{"exec with unknown agent", strings.Replace(validTemplate, `{kind: script, commands: ["true"]}`, `{kind: exec, agent: gpt}`, 1),
			[]string{`template "t1"`, "loop.agent", "gpt"}},
		{"bad catch_up", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    catch_up: all", 1),
			[]string{`template "t1"`, "catch_up"}},
		{"bad name", strings.Replace(validTemplate, "name: t1", "name: T 1", 1), []string{"name"}},
		{"script without commands", strings.Replace(validTemplate, `commands: ["true"]}`, `commands: []}`, 1),
			[]string{`template "t1"`, "loop.commands"}},
		{"bad done check format", strings.Replace(validTemplate, `{commands: ["go test -json ./..."]}`, `{commands: ["x"], format: xml}`, 1),
			[]string{`template "t1"`, "done_check.format", "xml"}},
		{"negative workspace retention", "retention: {workspaces: -1h}\n" + validTemplate, []string{"retention.workspaces", "negative"}},
		{"negative failed retention", "retention: {failed: -1h}\n" + validTemplate, []string{"retention.failed", "negative"}},
		{"negative escalated retention", "retention: {escalated: -2h}\n" + validTemplate, []string{"retention.escalated", "negative"}},
		{"unknown retention key", "retention: {workspace: 1h}\n" + validTemplate, []string{"retention.workspace", "unknown key"}},
		{"bad sandbox mode", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {mode: docker}", 1),
			[]string{`template "t1"`, "sandbox", `mode "docker"`}},
		{"bad sandbox network", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {network: lan}", 1),
			[]string{`template "t1"`, "sandbox", `network "lan"`}},
		{"bad build cache", "sandbox: {build_cache: tmp}\n" + validTemplate, []string{"sandbox", `build_cache "tmp"`}},
		{"unknown sandbox key", "sandbox: {mode: off, seccomp: true}\n" + validTemplate, []string{"sandbox.seccomp", "unknown key"}},
		{"bad deployment sandbox", "sandbox: {mode: none}\n" + validTemplate, []string{"sandbox", `mode "none"`}},
		{"network none without the sandbox", "sandbox: {mode: off, network: none}\n" + validTemplate, []string{"sandbox", "network none needs"}},
		{"network registries without the sandbox", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {mode: off, network: registries}", 1),
			[]string{`template "t1"`, "network registries needs"}},
		{"allow entry with a path", "sandbox: {allow: [goproxy.example.com/x]}\n" + validTemplate, []string{"sandbox", `allow entry "goproxy.example.com/x"`, `'/'`}},
		{"allow entry with a bad port", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {allow: [\"npm.example.com:99999\"]}", 1),
			[]string{`template "t1"`, `allow entry "npm.example.com:99999"`, "port"}},
		{"allow entry is an address", "sandbox: {allow: [\"10.0.0.5\"]}\n" + validTemplate, []string{"sandbox", `allow entry "10.0.0.5"`, "IP address"}},
		{"bad retention duration", "retention: {workspaces: 3d}\n" + validTemplate, []string{"not a duration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSandboxMergesTheDeploymentsIntoEachTemplate(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("sandbox: {mode: off}\n" + strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {network: host}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Templates[0].Sandbox; !reflect.DeepEqual(got, Sandbox{Mode: "off", Network: "host"}) {
		t.Fatalf("template sandbox %+v", got)
	}
	cfg, err = ParseConfig([]byte(validTemplate))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Templates[0].Sandbox; !reflect.DeepEqual(got, Sandbox{}) {
		t.Fatalf("default sandbox %+v, want empty (the runner's defaults apply)", got)
	}
	cfg, err = ParseConfig([]byte("sandbox: {allow: [Goproxy.Example.com, npm.example.com:8443]}\n" +
		strings.Replace(validTemplate, "goal: do it", "goal: do it\n    sandbox: {network: registries, allow: [pypi.example.com, goproxy.example.com]}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Templates[0].Sandbox.Allow, []string{"goproxy.example.com", "npm.example.com:8443", "pypi.example.com"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("template allow %q, want the deployment's extended by the template's: %q", got, want)
	}
}

func TestConfigErrorIsTyped(t *testing.T) {
	t.Parallel()
	_, err := ParseConfig([]byte(strings.Replace(validTemplate, "kind: script", "kind: robot", 1)))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Template != "t1" || ce.Field != "loop.kind" {
		t.Fatalf("want *ConfigError for t1 loop.kind, got %#v", err)
	}
}

func TestRetentionDefaultsAndOverrides(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(validTemplate))
	if err != nil || cfg.Retention.Workspaces.D() != DefaultWorkspaceRetention {
		t.Fatalf("default retention: %v %v", cfg.Retention, err)
	}
	if cfg.Retention.Closed.D() != DefaultClosedRetention || cfg.Retention.Failed.D() != DefaultFailedRetention || cfg.Retention.Escalated != 0 {
		t.Fatalf("default item retention: %+v", cfg.Retention)
	}
	if _, ok := cfg.Retention.ItemKeep(workitems.StateEscalated); ok {
		t.Fatal("escalated items are kept until resolved by default")
	}
	cfg, err = ParseConfig([]byte("retention:\n  workspaces: 6h\n  closed: 48h\n  failed: 240h\n  escalated: 720h\n" + validTemplate))
	if err != nil || cfg.Retention.Workspaces.D().Hours() != 6 {
		t.Fatalf("retention: %v %v", cfg.Retention, err)
	}
	for st, want := range map[workitems.State]time.Duration{workitems.StateClosed: 48 * time.Hour, workitems.StateCancelled: 48 * time.Hour,
		workitems.StateFailed: 240 * time.Hour, workitems.StateEscalated: 720 * time.Hour} {
		if got, ok := cfg.Retention.ItemKeep(st); !ok || got != want {
			t.Errorf("%s kept %v (%v), want %v", st, got, ok, want)
		}
	}
	for _, st := range []workitems.State{workitems.StateQueued, workitems.StateRunning, workitems.StateVerifying, workitems.StateRetryWait} {
		if _, ok := cfg.Retention.ItemKeep(st); ok {
			t.Errorf("open state %s has a retention", st)
		}
	}
}
