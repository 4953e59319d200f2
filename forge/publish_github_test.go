package forge_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/publish"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The publisher on GitHub: go-github against an httptest server answering GitHub's documented
// REST shapes (pulls, labels, check runs, statuses, merge), the push going to a real git remote
// (git http-backend). GitHub itself is out of reach from the tests.

const pubToken = "ghp_publishT0kenForTests000000000000000"

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

type events struct {
	mu    sync.Mutex
	steps []string
}

func (e *events) Emit(_ context.Context, ev workitems.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.steps = append(e.steps, ev.Data["step"])
}

func TestOnGitHubRedCIRetriesAndGreenCIClosesAndMergesTheSamePullRequest(t *testing.T) {
	t.Parallel()
	fake := forge.NewFakeGitHub(t, pubToken)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(p) }), nil))
	f, err := forge.New(forge.Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
		BaseURL: fake.APIURL(), TokenEnv: "GH_PUB_TOKEN"}, Getenv: func(k string) string {
		if k == "GH_PUB_TOKEN" {
			return pubToken
		}
		return ""
	}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	set := forge.Set{"github": f}
	v := verify.New(verify.WithCI("github", verify.NewForgeCI(f)), verify.WithLogger(logger))
	judge := &waits.Judge{Verifier: v, Forges: set, Logger: logger}
	p := publish.New(publish.Options{Forges: set, Logger: logger})

	// The remote's main, and a workspace cloned from it.
	seed := t.TempDir()
	git(t, seed, "init", "-q")
	if err := os.WriteFile(filepath.Join(seed, "go.mod"), []byte("module payments\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, seed, "add", "-A")
	git(t, seed, "commit", "-qm", "base")
	git(t, seed, "push", "-q", fake.Bare(), "HEAD:refs/heads/main")
	base := git(t, seed, "rev-parse", "HEAD")
	ws := t.TempDir()
	git(t, ws, "clone", "-q", fake.Bare(), ".")

	tmpl := &config.Template{Name: "deps-bump", Goal: "bump",
		Deliver: config.Deliver{Forge: "github", Repo: "acme/payments", Mode: workitems.DeliverPullRequest,
			Branch: config.DefaultBranchPattern, Title: "deps: bump", Labels: []string{"outerloop"}, Automerge: true, MergeMethod: workitems.MergeSquash},
		DoneCheck: config.DoneCheck{CI: &config.CICheck{Forge: "github", Repo: "acme/payments", Required: []string{"build"}, Wait: workitems.Duration(time.Minute)}}}
	it := &workitems.Item{ID: "deps-bump@20261201T030000Z", Template: tmpl.Name, Attempt: 1, MaxAttempts: 3,
		Attempts: []workitems.Attempt{{N: 1}}}
	commit := func(content string) workitems.Delivery {
		git(t, ws, "checkout", "-q", base)
		if err := os.WriteFile(filepath.Join(ws, "go.sum"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, ws, "add", "-A")
		git(t, ws, "commit", "-qm", "deps: bump\n\nOuterloop-Item: "+it.ID)
		return workitems.Delivery{Mode: workitems.DeliverPullRequest, Base: base, Commit: git(t, ws, "rev-parse", "HEAD"),
			Tree: git(t, ws, "rev-parse", "HEAD^{tree}"), BaseTree: git(t, ws, "rev-parse", base+"^{tree}"), FileCount: 1, Added: 1}
	}
	closeDec := workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "checks_passed", Reasons: []string{"local check green"}, Actor: "verifier"}
	ctx := context.Background()

	// waitOn is the item as the store has it after the push decided to wait for CI.
	waitOn := func(del workitems.Delivery) {
		it.Delivery = &del
		it.Wait = &workitems.Wait{Kind: workitems.WaitCI, Seq: 1, Attempt: it.Attempt, Forge: "github", Repo: "acme/payments",
			SHA: del.PushedSHA, PR: del.PR.Number, Since: time.Now(), Deadline: time.Now().Add(time.Hour), LocalRule: "checks_passed"}
	}

	ev1 := &events{}
	d1 := commit("example.com/lib v1.2.0 h1:x\n")
	res, err := p.Publish(ctx, delivery.Publication{Template: tmpl, Item: it, Attempt: 1, Workspace: ws, Delivery: d1, Decision: closeDec, Events: ev1})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Delivery
	if first.Outcome != workitems.DeliveryPROpened || first.PR == nil || first.PushedSHA != d1.Commit || fake.BranchSHA("outerloop/deps-bump") != d1.Commit {
		t.Fatalf("attempt 1 delivery %+v", first)
	}
	if fmt.Sprint(ev1.steps) != "[pushed pr_opened]" {
		t.Fatalf("attempt 1 steps %v", ev1.steps)
	}
	// The push decides nothing; the policy after it waits for CI.
	if d := judge.AfterPush(ctx, tmpl, it, 1, closeDec, &first, ""); d.Outcome != workitems.OutcomeWait || d.Rule != workitems.RuleCIPending ||
		d.Wait.Forge != "github" || d.Wait.Repo != "acme/payments" {
		t.Fatalf("after the push: %+v %+v", d, d.Wait)
	}
	waitOn(first)
	if d, err := judge.Peek(ctx, tmpl, it); err != nil || d.Outcome != workitems.OutcomeWait {
		t.Fatalf("no check run yet: %+v %v", d, err)
	}
	fake.AddCheckRun("build", d1.Commit, "failure")
	facts, err := judge.WakeFacts(ctx, tmpl, it)
	if err != nil {
		t.Fatal(err)
	}
	dec, judged := judge.Decide(ctx, tmpl, facts), facts.Delivery
	if dec.Outcome != workitems.OutcomeRetry || dec.Rule != "ci_failed" || !strings.Contains(dec.Next.Input, "Failing CI checks: build") {
		t.Fatalf("red CI must retry with the failing check in the input: %+v", dec)
	}
	if len(judged.Checks) != 1 || judged.Checks[0].State != workitems.CheckFailure {
		t.Fatalf("the checks read go on the delivery record: %+v", judged.Checks)
	}

	// Attempt 2: a new commit on the same branch updates the same pull request; CI is green.
	it.Attempt, it.Attempts, it.Wait = 2, append(it.Attempts, workitems.Attempt{N: 2}), nil
	ev2 := &events{}
	d2 := commit("example.com/lib v1.2.1 h1:y\n")
	res, err = p.Publish(ctx, delivery.Publication{Template: tmpl, Item: it, Attempt: 2, Workspace: ws, Delivery: d2, Decision: closeDec, Events: ev2})
	if err != nil {
		t.Fatal(err)
	}
	second := res.Delivery
	if second.Outcome != workitems.DeliveryPRUpdated || second.PR.Number != first.PR.Number || second.PushedSHA != d2.Commit {
		t.Fatalf("attempt 2: %+v", second)
	}
	waitOn(second)
	fake.AddCheckRun("build", d2.Commit, "success")
	facts, err = judge.WakeFacts(ctx, tmpl, it)
	dec, judged = judge.Decide(ctx, tmpl, facts), facts.Delivery
	if err != nil || dec.Outcome != workitems.OutcomeClose || dec.Rule != "checks_passed" {
		t.Fatalf("green CI closes: %+v %v", dec, err)
	}
	merged, err := p.Merge(ctx, delivery.Merge{Template: tmpl, Item: it, Attempt: 2, Delivery: *judged, Events: ev2})
	if err != nil || merged.Outcome != workitems.DeliveryMerged || merged.MergeCommit == "" || merged.PR.State != workitems.PRMerged {
		t.Fatalf("merge: %+v %v", merged, err)
	}
	// The merged pull request's branch was outerloop's alone: it is deleted on the remote.
	if fmt.Sprint(ev2.steps) != "[pushed pr_updated merged branch_deleted]" || fake.BranchSHA("outerloop/deps-bump") != "" {
		t.Fatalf("attempt 2 steps %v; the branch at %q", ev2.steps, fake.BranchSHA("outerloop/deps-bump"))
	}
	if pulls := fake.Pulls(); len(pulls) != 1 || pulls[0]["merged"] != true || fmt.Sprint(fake.Labels(first.PR.Number)) != "[outerloop]" {
		t.Fatalf("pull requests %v", pulls)
	}
	// A second merge of the same head is refused by the forge: a fact, not transient trouble.
	if _, err := p.Merge(ctx, delivery.Merge{Template: tmpl, Item: it, Attempt: 2, Delivery: *judged, Events: ev2}); err == nil {
		t.Fatal("merging a merged pull request again must be refused")
	}
	if len(fake.GitAuthSeen()) == 0 {
		t.Fatal("the pushes must have gone to the git remote with credentials")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), pubToken) || strings.Contains(fmt.Sprint(res), pubToken) {
		t.Fatal("the token leaked into the logs or the delivery record")
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
