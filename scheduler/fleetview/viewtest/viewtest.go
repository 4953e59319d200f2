// Package viewtest makes a fleet for the fleet view's tests: a config with a fleet template of
// three repositories and a single-repository one, and items in a real Redis (redistest).
package viewtest

import (
	"context"
	"testing"

	"outerloop/scheduler"
	"outerloop/workitems"
)

// Repos are the fleet template's repositories, sorted as the view sorts them.
var Repos = []string{
	"https://gitea.example.com/acme/a.git",
	"https://gitea.example.com/acme/b.git",
	"https://gitea.example.com/acme/c.git",
}

// Config is the deployment config: the fleet template "sweep" (Repos, scheduled) and the
// single-repository template "single". Its "forges:" and "templates:" sections are top level,
// so it may be appended to a "defaults:" section.
const Config = `forges:
  tea: {kind: gitea, base_url: https://gitea.example.com, token_env: TEA_TOKEN}
templates:
  - name: sweep
    schedule: "0 3 * * *"
    repos: [https://gitea.example.com/acme/c.git, https://gitea.example.com/acme/a.git, https://gitea.example.com/acme/b.git]
    goal: bump
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: tea, mode: pull_request}
  - name: single
    repo: https://gitea.example.com/acme/one.git
    goal: one
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

// YAML is Config with defaults, ready to parse.
const YAML = "defaults:\n  budget: {wall_time: 10m}\n" + Config

// Seed makes one item per repository of sweep through q (whose QueueOptions.Fleet records
// them) and gives a's an open pull request #7 with CI 1 of 2 failing and $1.25 spent. It
// returns the items' ids by repository.
func Seed(t testing.TB, q *scheduler.Queue) map[string]string {
	t.Helper()
	ctx := context.Background()
	ids := map[string]string{}
	for _, r := range Repos {
		it, err := q.Submit(ctx, scheduler.Request{Template: "sweep", Repo: r, Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "tester"}})
		if err != nil {
			t.Fatalf("viewtest: submit %s: %v", r, err)
		}
		ids[r] = it.ID
	}
	_, err := q.Store().Update(ctx, ids[Repos[0]], nil, func(it *workitems.Item) ([]workitems.Event, error) {
		it.Spend.CostUSD = 1.25
		it.Delivery = &workitems.Delivery{Attempt: 1, Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened,
			PR:     &workitems.PullRequest{Number: 7, URL: "https://gitea.example.com/acme/a/pulls/7", State: workitems.PROpen},
			Checks: []workitems.CheckResult{{Name: "build", State: workitems.CheckSuccess}, {Name: "test", State: workitems.CheckFailure}}}
		return nil, nil
	})
	if err != nil {
		t.Fatalf("viewtest: deliver %s: %v", ids[Repos[0]], err)
	}
	return ids
}
