package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

const fleetBase = `
defaults: {budget: {wall_time: 10m}}
forges:
  tea: {kind: gitea, base_url: https://gitea.example.com, token_env: TEA_TOKEN}
templates:
  - name: deps
    goal: bump
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
%s`

func parseFleet(t *testing.T, extra string) (*config.Config, error) {
	t.Helper()
	return config.ParseConfig(fmt.Appendf(nil, fleetBase, extra))
}

func TestFleetTemplatesAreCheckedAndBadOnesRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct{ name, yaml, field string }{
		{"repo and repos", "    repo: https://gitea.example.com/acme/a.git\n    repos: [https://gitea.example.com/acme/b.git]\n", "repo"},
		{"repos and repos_from", "    repos: [https://gitea.example.com/acme/b.git]\n    repos_from: {forge: tea, owner: acme}\n", "repos_from"},
		{"deliver.repo on a fleet", "    repos: [https://gitea.example.com/acme/b.git]\n    deliver: {forge: tea, repo: acme/b}\n", "deliver.repo"},
		{"a repository twice", "    repos: [https://gitea.example.com/acme/b.git, https://gitea.example.com/ACME/b]\n", "repos[1]"},
		{"a local path delivered through a forge", "    repos: [./b]\n    deliver: {forge: tea}\n", "repos[0]"},
		{"an empty repository", "    repos: [\"\"]\n", "repos[0]"},
		{"repos_from an unknown forge", "    repos_from: {forge: hub, owner: acme}\n", "repos_from.forge"},
		{"repos_from without owner", "    repos_from: {forge: tea}\n", "repos_from.owner"},
		{"an exclude that is no owner/name", "    repos_from: {forge: tea, owner: acme, exclude: [legacy]}\n", "repos_from.exclude[0]"},
		{"an unknown key", "    repos_from: {forge: tea, owner: acme, topics: [go]}\n", "repos_from.topics"},
		{"fleet limits on one repository", "    repo: https://gitea.example.com/acme/a.git\n    fleet: {concurrency: 2}\n", "fleet"},
		{"a negative limit", "    repos: [https://gitea.example.com/acme/b.git]\n    fleet: {concurrency: -1}\n", "fleet"},
		{"pull request limits without pull requests", "    repos: [https://gitea.example.com/acme/b.git]\n    fleet: {max_open_prs: 2}\n", "fleet"},
		{"a breaker with nothing to pause", "    repos: [https://gitea.example.com/acme/b.git]\n    fleet: {pause_after_failures: 3}\n", "fleet.pause_after_failures"},
		{"an unknown rebase policy", "    repos: [https://gitea.example.com/acme/b.git]\n    deliver: {forge: tea, rebase: always}\n", "deliver.rebase"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFleet(t, tc.yaml)
			if err == nil {
				t.Fatal("accepted")
			}
			var ce *config.ConfigError
			if errors.As(err, &ce) {
				if ce.Field != tc.field || ce.Template != "deps" {
					t.Fatalf("error names %s.%s, want deps.%s: %v", ce.Template, ce.Field, tc.field, err)
				}
			} else if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v does not name %s", err, tc.field)
			}
		})
	}
}

func TestEveryRebasePolicyIsAccepted(t *testing.T) {
	for _, p := range workitems.AllRebasePolicies() {
		cfg, err := parseFleet(t, fmt.Sprintf("    repos: [https://gitea.example.com/acme/b.git]\n    deliver: {forge: tea, rebase: %s}\n", p))
		if err != nil {
			t.Fatalf("rebase %s: %v", p, err)
		}
		tm, _ := cfg.Template("deps")
		if tm.Deliver.RebasePolicy() != p {
			t.Fatalf("rebase %s read as %s", p, tm.Deliver.RebasePolicy())
		}
	}
	cfg, err := parseFleet(t, "    repos: [https://gitea.example.com/acme/b.git]\n    deliver: {forge: tea}\n")
	if err != nil {
		t.Fatal(err)
	}
	if tm, _ := cfg.Template("deps"); tm.Deliver.RebasePolicy() != workitems.RebaseConflicted {
		t.Fatalf("default rebase %s, want conflicted", tm.Deliver.RebasePolicy())
	}
}

func TestAFleetItemRunsAsItsRepository(t *testing.T) {
	cfg, err := parseFleet(t, `    schedule: "0 3 * * *"
    repos_from: {forge: tea, owner: acme, topic: go, exclude: [acme/legacy]}
    fleet: {max_open_prs: 10, prs_per_hour: 5, concurrency: 4, pause_after_failures: 3}
    deliver: {forge: tea, mode: pull_request, branch: "outerloop/{template}"}
`)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := cfg.Template("deps")
	if !base.IsFleet() || !base.Fleet.Limited() || base.Deliver.Repo != "" {
		t.Fatalf("fleet template %+v", base)
	}
	it := &workitems.Item{Template: "deps", Repo: "https://gitea.example.com/acme/payments.git"}
	tm, ok := cfg.ItemTemplate(it)
	if !ok || tm.Repo != it.Repo || tm.Deliver.Repo != "acme/payments" {
		t.Fatalf("item template: repo %q deliver.repo %q", tm.Repo, tm.Deliver.Repo)
	}
	// CI is read from each repository's own checks.
	base.DoneCheck.CI = &config.CICheck{Forge: "tea", Required: []string{"test"}}
	if tm := base.ForRepo(it.Repo); tm.DoneCheck.CI.Repo != "acme/payments" || base.DoneCheck.CI.Repo != "" {
		t.Fatalf("ci.repo %q; the configured template's %q", tm.DoneCheck.CI.Repo, base.DoneCheck.CI.Repo)
	}
	if tm.Deliver.BranchFor(tm.Name, "x") != "outerloop/deps" {
		t.Fatal("the branch pattern applies per repository")
	}
	// Ids: deterministic per tick and repository, distinct across repositories of one name.
	tick := time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC)
	a := workitems.FleetItemID("deps", tick, "https://gitea.example.com/acme/payments.git")
	b := workitems.FleetItemID("deps", tick, "https://gitea.example.com/other/payments.git")
	if a == b || a != workitems.FleetItemID("deps", tick, "https://gitea.example.com/acme/payments") ||
		!strings.HasPrefix(a, "deps@20261203T030000Z-payments-") {
		t.Fatalf("ids %s %s", a, b)
	}
}
