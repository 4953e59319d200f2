package evals

import (
	"context"
	"strings"
	"testing"
	"time"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// fleetConfig has two fleet templates, one listing its repositories and one taking them from
// a forge, both with fleet limits that count pull requests.
const fleetConfig = `
defaults:
  budget: {wall_time: 10m, cost_usd: 1}
forges:
  gitea: {kind: gitea, base_url: https://gitea.example.com}
templates:
  - name: listed
    repos: [https://gitea.example.com/acme/a.git, https://gitea.example.com/acme/b.git]
    goal: Bump.
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: gitea, mode: pull_request}
    fleet: {max_open_prs: 2, concurrency: 1}
  - name: listing
    repos_from: {forge: gitea, owner: acme}
    goal: Bump.
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: gitea, mode: pull_request}
`

// TestAFleetTemplateRunsOnTheTasksRepo: a task of a fleet template runs its template on the
// task's repo alone (repos, repos_from and fleet give way), a task without a repo is refused
// naming why, and a variant may not set the fleet's fields.
func TestAFleetTemplateRunsOnTheTasksRepo(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(fleetConfig))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Config: func() *config.Config { return cfg }, Clock: workitems.SystemClock{}}
	const repo = "https://gitea.example.com/acme/b.git"
	suite := &Suite{Name: "fleet", Tasks: []Task{{ID: "a", Template: "listed", Repo: repo}, {ID: "b", Template: "listing", Repo: repo}}}
	e, err := r.Prepare(Plan{ID: "x1", Suite: suite, Variants: []Variant{{Name: "A"}}})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	built, err := Build(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range suite.Tasks {
		rt, ok := built.Template(RunTemplate(e.ID, task.ID, "A"))
		if !ok || rt.Repo != repo || rt.IsFleet() || rt.Fleet != nil || rt.Deliver.Mode != workitems.DeliverPatch {
			t.Errorf("task %s: run template %+v, want the task's repo alone, no fleet, a patch", task.ID, rt)
		}
		if e.Versions.Variants["A"][task.Template] == "" {
			t.Errorf("task %s: no version recorded for its template", task.ID)
		}
	}

	_, err = r.Prepare(Plan{Suite: &Suite{Name: "fleet", Tasks: []Task{{ID: "a", Template: "listed"}}}, Variants: []Variant{{Name: "A"}}})
	if err == nil || !strings.Contains(err.Error(), `task a: template "listed" is a fleet (repos or repos_from): give the task's repo`) {
		t.Errorf("a fleet task without a repo: %v, want it refused naming the fleet", err)
	}
	for _, field := range []string{"repos: [x]", "repos_from: {forge: gitea, owner: o}", "fleet: {concurrency: 1}"} {
		if _, err := ParseVariant("B", []byte(field+"\n")); err == nil || !strings.Contains(err.Error(), "cannot be set: a run is one item on the task's repository") {
			t.Errorf("variant %q: %v, want it refused", field, err)
		}
	}
}

// TestTasksFromFleetItemsUseTheItemsRepo: an item of a fleet template becomes a task on its
// own repository (workitems.Item.Repo), not the template's list.
func TestTasksFromFleetItemsUseTheItemsRepo(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	const repo = "https://gitea.example.com/acme/b.git"
	it := &workitems.Item{ID: "f1", Template: "listed", Goal: "Bump.", Repo: repo,
		Origin: workitems.Origin{Kind: workitems.OriginCron}, Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 1,
		Attempts: []workitems.Attempt{{N: 1, State: workitems.AttemptQueued, Base: &workitems.WorkspaceBase{Kind: workitems.BaseGit,
			Commit: "c0ffee", Tree: "t", Source: "https://gitea.example.com/acme/a.git", Branch: "main"}}}}
	if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	tasks, skipped, err := TasksFromItems(ctx, s, ItemFilter{IDs: []string{"f1"}})
	if err != nil || len(skipped) != 0 || len(tasks) != 1 {
		t.Fatalf("tasks %+v skipped %v: %v", tasks, skipped, err)
	}
	if tasks[0].Repo != repo || tasks[0].Ref != "c0ffee" {
		t.Errorf("task %+v, want repo %s at c0ffee", tasks[0], repo)
	}
}
