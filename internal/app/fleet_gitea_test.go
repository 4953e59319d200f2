package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/giteatest"
	"outerloop/lib/testwait"
	"outerloop/worker"
	"outerloop/workitems"
)

// openPRs counts the open pull requests over the organisation's fleet repositories.
func openPRs(t *testing.T, gs *giteatest.Server, org string) int {
	t.Helper()
	n := 0
	for i := range 8 {
		var prs []struct{ Number int }
		gs.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/r%02d/pulls?state=open", org, i), nil, http.StatusOK, &prs)
		n += len(prs)
	}
	return n
}

// On the real Gitea: a fleet discovered by topic, as a member who cannot read one repository's
// code (archived, empty and unreadable repositories skipped and counted), with max_open_prs 3.
// Three items open their pull requests; the other four wait in line without a worker; each
// merge of one of the open pull requests lets exactly one more go, in order, and never more
// than three are open.
func TestAFleetOnGiteaKeepsAtMostMaxOpenPRsOpenWhileTheyAreMergedOneByOne(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	org := gs.NewFleetOrg(t)
	member := gs.NewFleetMember(t, org, "r07")
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: bump
    repos_from: {forge: tea, owner: %s, topic: go}
    fleet: {max_open_prs: 3}
    goal: bump the dependencies
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["test -s BUMP.md"]}
    deliver: {forge: tea, mode: pull_request}
`, org))
	loop := worker.InnerLoopFunc(func(ctx context.Context, at *worker.Attempt) workitems.Exit {
		if err := os.WriteFile(filepath.Join(at.Workspace, "BUMP.md"), []byte("bumped\n"), 0o644); err != nil {
			return workitems.Exit{Reason: workitems.ExitFailed, Message: err.Error()}
		}
		return workitems.Exit{Reason: workitems.ExitCompleted}
	})
	token := member.Getenv(tokenVar)
	s := openWith(t, cfg, func(o *app.Options) {
		o.Getenv = token
		o.Loops = map[workitems.LoopKind]worker.InnerLoop{"script": loop}
		o.FleetEvery, o.FleetPRCheckEvery = 50*time.Millisecond, 100*time.Millisecond
	})
	ctx := context.Background()
	ft, err := s.Queue.RunFleet(ctx, "bump", "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if ft.Repos != 7 || ft.Created != 7 || ft.Skipped["archived"] != 1 || ft.Skipped["empty"] != 1 || ft.Skipped["unreadable"] != 1 || ft.SkippedCount() != 3 {
		t.Fatalf("fleet run: %+v", ft)
	}
	for i, id := range ft.Items {
		if it, _ := s.Store.Get(ctx, id); !strings.HasSuffix(it.Repo, fmt.Sprintf("/%s/r%02d.git", org, i)) {
			t.Fatalf("item %d is of %s, want r%02d (the fleet sorted)", i, it.Repo, i)
		}
	}
	startAppWorker(t, s.App, 4, "w")
	closed := func(id string) *workitems.Item {
		t.Helper()
		it := awaitState(t, s.Store, id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
		if it.State != workitems.StateClosed || it.Delivery == nil || it.Delivery.PR == nil {
			t.Fatalf("%s: %s, delivery %+v", id, it.State, it.Delivery)
		}
		return it
	}
	var open []*workitems.Item
	for _, id := range ft.Items[:3] {
		open = append(open, closed(id))
	}
	u, err := s.Fleet.Usage(ctx, "bump")
	if err != nil || u.OpenPRs != 3 || u.Held != 4 {
		t.Fatalf("usage %+v %v: three open, four in line", u, err)
	}
	if n := openPRs(t, gs, org); n != 3 {
		t.Fatalf("%d open pull requests on the forge, want 3", n)
	}
	for k, id := range ft.Items[3:] {
		// Merge the oldest open one: exactly the next in line goes.
		m := open[0]
		open = open[1:]
		slug, _ := workitems.RepoSlugFromURL(m.Repo)
		gs.MergePullRequest(t, giteatest.Repo{Slug: slug, CloneURL: m.Repo}, m.Delivery.PR.Number)
		open = append(open, closed(id))
		if n := openPRs(t, gs, org); n != 3 {
			t.Fatalf("after merge %d: %d open pull requests, want 3", k+1, n)
		}
		if u, _ := s.Fleet.Usage(ctx, "bump"); u.Held != int64(3-k) {
			t.Fatalf("after merge %d: %d in line, want %d", k+1, u.Held, 3-k)
		}
	}
}

// On the real Gitea: a fleet whose items all fail pauses itself after three in a row, the
// webhook sink is told, and the rest of the fleet waits in line without starting.
func TestAFailingFleetOnGiteaPausesItselfAndTellsTheSink(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	org := gs.NewFleetOrg(t)
	got := make(chan []byte, 20)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	defer recv.Close()
	cfg := forgeConfigWith(t, gs, fmt.Sprintf("notify:\n  sinks:\n    hook: {kind: webhook, url: %q, secret_env: OL_FLEET_SECRET}", recv.URL),
		fmt.Sprintf(`  - name: bump
    schedule: "0 3 * * *"
    repos_from: {forge: tea, owner: %s, topic: go}
    fleet: {concurrency: 1, pause_after_failures: 3}
    max_attempts: 1
    goal: bump the dependencies
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: tea, mode: pull_request}
`, org))
	loop := worker.InnerLoopFunc(func(ctx context.Context, at *worker.Attempt) workitems.Exit {
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvalidInput, Message: "cannot bump"}
	})
	token := gs.Getenv(tokenVar)
	s := openWith(t, cfg, func(o *app.Options) {
		o.Getenv = func(k string) string {
			if k == "OL_FLEET_SECRET" {
				return "s"
			}
			return token(k)
		}
		o.Loops = map[workitems.LoopKind]worker.InnerLoop{"script": loop}
		o.FleetEvery = 20 * time.Millisecond
	})
	ctx := context.Background()
	ft, err := s.Queue.RunFleet(ctx, "bump", "alice", "")
	if err != nil || ft.Created != 8 {
		t.Fatalf("fleet run %+v %v", ft, err)
	}
	startAppWorker(t, s.App, 2, "w")
	d, err := s.Dispatcher("w")
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	defer d.Shutdown()
	for _, id := range ft.Items[:3] {
		if it := awaitState(t, s.Store, id, workitems.StateEscalated, workitems.StateFailed, workitems.StateClosed); it.State == workitems.StateClosed {
			t.Fatalf("%s closed", id)
		}
	}
	for body := []byte(nil); body == nil; {
		select {
		case b := <-got:
			if strings.Contains(string(b), `"fleet_paused"`) && strings.Contains(string(b), `"bump"`) {
				body = b
			}
		case <-testwait.After(t):
			t.Fatal("the sink was not told of the pause")
		}
	}
	p, err := s.Queue.PauseOf(ctx, "bump")
	if err != nil || p == nil || p.Actor != "outerloop" {
		t.Fatalf("pause %+v %v", p, err)
	}
	// The third failure freed its slot in the MULTI that tripped the streak, and a tripped
	// streak grants nothing: no fourth item started, and the other five wait in line.
	u, err := s.Fleet.Usage(ctx, "bump")
	if err != nil || u.Held != 5 || u.Running != 0 {
		t.Fatalf("usage %+v %v: five in line, none running", u, err)
	}
	for _, id := range ft.Items[3:] {
		if it, _ := s.Store.Get(ctx, id); it.State != workitems.StateQueued || it.Attempts[0].State != workitems.AttemptQueued {
			t.Fatalf("%s is %s after the pause", id, it.State)
		}
	}
}
