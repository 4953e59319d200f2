package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/giteatest"
	"outerloop/internal/sample"
	"outerloop/workitems"
)

// killForgeToken is the variable the worker processes read the Gitea token from.
const killForgeToken = "OL_KILL_FORGE_TOKEN"

// TestKillForgeResumedWorkerDeliversTheSinglePullRequestOfASingleRun is the kill/resume of
// TestKilledWorkerIsResumedByAnotherFromItsCheckpoint delivered through a real Gitea (mode
// pull_request): worker A is SIGKILLed mid-step, worker B (another work dir, as on another
// host) resumes the attempt from its checkpoint, and the one pull request of the template's
// branch holds exactly the tree and diff an uninterrupted run of the same commands delivers
// (template "single", its own branch: the same template twice would dedupe). The pushed
// commit carries the item trailer, and no process printed the token.
func TestKillForgeResumedWorkerDeliversTheSinglePullRequestOfASingleRun(t *testing.T) {
	t.Parallel()
	gs := giteatest.Start(t)
	r := gs.NewRepo(t, "killforge")
	// Public: workspaces fetch the template's repo without credentials; pushes use the token.
	gs.API(t, http.MethodPatch, "/repos/"+r.Slug, map[string]any{"private": false}, http.StatusOK, nil)
	src := t.TempDir()
	if err := sample.Write(src); err != nil {
		t.Fatal(err)
	}
	gs.Git(t, src, "init", "-q", "-b", "main")
	gs.Git(t, src, "add", "-A")
	gs.Git(t, src, "commit", "-qm", "the sample module")
	gs.PushDir(t, src, r, "main")

	logDir := t.TempDir()
	runs := filepath.Join(logDir, "runs.log")
	template := func(name string) string {
		return `  - name: ` + name + `
    repo: ` + r.CloneURL + `
    goal: survive a crash
` + resumableLoop(logDir) + `    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: ` + r.Slug + `, mode: pull_request}
`
	}
	cfg := filepath.Join(t.TempDir(), "outerloop.yaml")
	body := fmt.Sprintf("defaults:\n  max_attempts: 2\n  budget: {wall_time: 3m, verify_reserve: 1m}\n"+
		"forges:\n  tea: {kind: gitea, base_url: %q, token_env: %s}\ntemplates:\n%s%s",
		gs.URL, killForgeToken, template("resumable"), template("single"))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, cfg)
	env := append(os.Environ(), killForgeToken+"="+gs.Token())
	dirA, dirB := t.TempDir(), t.TempDir()
	a, logA := c.startEnv(env, "--workdir", dirA, "worker", "--id", "A", "--lease-ttl", killLease)
	out, e, code := c.run("enqueue", "resumable")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	printed := out + e
	id := enqueuedID(t, out)
	waitFile(t, filepath.Join(logDir, "READY"))
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	awaitGone(t, readPID(t, filepath.Join(logDir, "pgid"))) // stopped by its guard
	s := c.store()
	mid, _ := s.Get(t.Context(), id)
	if mid.State != workitems.StateRunning || mid.Current().Base == nil {
		t.Fatalf("after the kill: %s base %+v", mid.State, mid.Current().Base)
	}
	if prs := forgePulls(t, gs, r); len(prs) != 0 {
		t.Fatalf("nothing may be delivered before the attempt ends: %+v", prs)
	}
	workerB, logB := c.startEnv(env, "--workdir", dirB, "worker", "--id", "B", "--lease-ttl", killLease)
	it := awaitState(t, s, id, 2*time.Minute, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 {
		t.Fatalf("want closed in one attempt, got %s after %d: %+v", it.State, len(it.Attempts), it.Decisions)
	}
	at := it.Attempts[0]
	if at.Resumes < 1 || !strings.HasPrefix(at.Worker, "B/") || at.Epoch < 2 {
		t.Fatalf("the attempt must be resumed by B: worker %s epoch %d resumes %d", at.Worker, at.Epoch, at.Resumes)
	}
	evs, _ := s.Events(t.Context(), id, "", 1000, 0)
	restored := 0
	for _, ev := range evs {
		if ev.Type == workitems.EventWorkspaceRestored && ev.Data["from"] == "snapshot" && strings.HasPrefix(ev.Actor, "B") {
			restored++
		}
		if ev.Type == workitems.EventAttemptRestarted {
			t.Fatalf("the attempt started over: %s", ev.Message)
		}
	}
	if restored != 1 {
		t.Fatalf("B must restore the checkpointed workspace once: %d", restored)
	}

	// The same commands, uninterrupted (MARK exists: step 2 does not block).
	out, e, code = c.run("enqueue", "single")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	printed += out + e
	single := awaitState(t, s, enqueuedID(t, out), 2*time.Minute, workitems.StateClosed, workitems.StateEscalated)
	if single.State != workitems.StateClosed {
		t.Fatalf("the single run: %s %+v", single.State, single.Decisions)
	}
	if b, _ := os.ReadFile(runs); strings.Join(strings.Fields(string(b)), " ") != "c1 c2-start c2-again c3 c1 c2-again c3" {
		t.Fatalf("command runs %q: across the crash c1 once, c2 resumed, c3 once; then the single run", b)
	}

	prs := forgePulls(t, gs, r)
	resumedPR, singlePR := prFor(t, prs, "outerloop/resumable"), prFor(t, prs, "outerloop/single")
	for _, tc := range []struct {
		it *workitems.Item
		pr forgePR
	}{{it, resumedPR}, {single, singlePR}} {
		d := tc.it.Delivery
		if d == nil || d.Mode != workitems.DeliverPullRequest || d.Outcome != workitems.DeliveryPROpened || d.PR == nil ||
			d.PR.Number != tc.pr.Number || d.PushedSHA != tc.pr.Head.SHA || tc.pr.State != "open" || tc.pr.Base.Ref != "main" {
			t.Fatalf("%s: delivery %+v, pull request %+v", tc.it.ID, d, tc.pr)
		}
	}
	resumed := forgeCommit(t, gs, r, resumedPR.Head.SHA)
	if !strings.Contains(resumed.Commit.Message, "Outerloop-Item: "+id) {
		t.Fatalf("the pushed commit lacks the trailer for %s:\n%s", id, resumed.Commit.Message)
	}
	// Gitea's commit JSON names the commit in tree.sha: read the trees from git.
	clone := t.TempDir()
	gs.Git(t, clone, "init", "-q")
	gs.Git(t, clone, "fetch", "-q", r.CloneURL, resumedPR.Head.SHA, singlePR.Head.SHA)
	resumedTree, singleTree := gs.Git(t, clone, "rev-parse", resumedPR.Head.SHA+"^{tree}"), gs.Git(t, clone, "rev-parse", singlePR.Head.SHA+"^{tree}")
	if resumedTree != singleTree || it.Delivery.Tree != resumedTree {
		t.Fatalf("the resumed attempt pushed tree %s (recorded %s), a single run %s", resumedTree, it.Delivery.Tree, singleTree)
	}
	diffResumed, diffSingle := prDiff(t, gs, r, resumedPR.Number), prDiff(t, gs, r, singlePR.Number)
	for _, want := range []string{"+one", "+two", "+func Add(a, b int) int { return a + b }"} {
		if !strings.Contains(diffResumed, want) {
			t.Errorf("the resumed PR's diff lacks %q:\n%s", want, diffResumed)
		}
	}
	// A's half-done step 2 was never checkpointed: B restores the tree before it.
	if strings.Contains(diffResumed, "partial.txt") {
		t.Errorf("the resumed PR holds the killed step's partial work:\n%s", diffResumed)
	}
	if diffResumed != diffSingle {
		t.Fatalf("the PR diffs differ:\nresumed:\n%s\nsingle:\n%s", diffResumed, diffSingle)
	}

	// A is dead; B is stopped so its log is complete before it is searched.
	_ = workerB.Process.Signal(syscall.SIGTERM)
	_ = workerB.Wait()
	tok := gs.Token()
	if len(tok) < 16 {
		t.Fatalf("the token is too short to search for: %d", len(tok))
	}
	for name, path := range map[string]string{"A": logA, "B": logB} {
		log, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(log), "verify decision") && name == "B" || len(log) == 0 {
			t.Fatalf("worker %s log: %v, %d bytes", name, err, len(log))
		}
		if strings.Contains(string(log), tok) {
			t.Errorf("worker %s's log holds the token", name)
		}
	}
	if strings.Contains(printed, tok) {
		t.Error("enqueue printed the token")
	}
}

// forgePR is the part of Gitea's pull request JSON the test reads.
type forgePR struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func forgePulls(t *testing.T, gs *giteatest.Server, r giteatest.Repo) []forgePR {
	t.Helper()
	var prs []forgePR
	gs.API(t, http.MethodGet, "/repos/"+r.Slug+"/pulls?state=all", nil, http.StatusOK, &prs)
	return prs
}

// prFor returns the one pull request whose head is branch.
func prFor(t *testing.T, prs []forgePR, branch string) forgePR {
	t.Helper()
	var found []forgePR
	for _, pr := range prs {
		if pr.Head.Ref == branch {
			found = append(found, pr)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one pull request for %s: %+v", branch, prs)
	}
	return found[0]
}

type forgeCommitJSON struct {
	Commit struct {
		Message string `json:"message"`
	} `json:"commit"`
}

func forgeCommit(t *testing.T, gs *giteatest.Server, r giteatest.Repo, sha string) forgeCommitJSON {
	t.Helper()
	var c forgeCommitJSON
	gs.API(t, http.MethodGet, "/repos/"+r.Slug+"/git/commits/"+sha, nil, http.StatusOK, &c)
	return c
}

func prDiff(t *testing.T, gs *giteatest.Server, r giteatest.Repo, number int) string {
	t.Helper()
	code, b, err := gs.Do(context.Background(), http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d.diff", r.Slug, number), nil)
	if err != nil || code != http.StatusOK || len(b) == 0 {
		t.Fatalf("pull request %d's diff: HTTP %d, %v", number, code, err)
	}
	return string(b)
}
