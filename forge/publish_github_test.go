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
	"outerloop/workitems"
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

// ciOnPush is the CI: when the publisher asks for the pushed commit's checks, a check run
// "build" with the next conclusion is posted for exactly that SHA, then the real verifier reads
// them through the forge.
type ciOnPush struct {
	fake        *forge.FakeGitHub
	v           *verify.Verifier
	mu          sync.Mutex
	conclusions []string
	shas        []string
}

func (c *ciOnPush) VerifyPushed(ctx context.Context, p delivery.Publication, sha string) (workitems.Decision, []workitems.CheckResult, error) {
	c.mu.Lock()
	c.fake.AddCheckRun("build", sha, c.conclusions[len(c.shas)])
	c.shas = append(c.shas, sha)
	c.mu.Unlock()
	r, err := c.v.VerifyPushed(ctx, verify.Request{Template: p.Template, Item: p.Item, Attempt: p.Attempt,
		Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Workspace: p.Workspace}, sha)
	if err != nil {
		return workitems.Decision{}, nil, err
	}
	var checks []workitems.CheckResult
	for _, ch := range r.Facts.CI.Checks {
		checks = append(checks, workitems.CheckResult{Name: ch.Name, State: workitems.CheckState(ch.State), URL: ch.URL, Summary: ch.Details})
	}
	return r.Decision, checks, nil
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

func TestThePublisherOnGitHubRetriesOnRedCIThenMergesTheSamePullRequest(t *testing.T) {
	t.Parallel()
	fake := forge.NewFakeGitHub(t, pubToken)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(p) }), nil))
	f, err := forge.New(forge.Config{Name: "github", ForgeConfig: workitems.ForgeConfig{Kind: workitems.ForgeGitHub,
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
	ci := &ciOnPush{fake: fake, conclusions: []string{"failure", "success"},
		v: verify.New(verify.WithCI("github", verify.NewForgeCI(f)), verify.WithLogger(logger))}
	p := publish.New(publish.Options{Forges: set, CI: ci, Logger: logger})

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

	tmpl := &workitems.Template{Name: "deps-bump", Goal: "bump",
		Deliver: workitems.Deliver{Forge: "github", Repo: "acme/payments", Mode: workitems.DeliverPullRequest,
			Branch: workitems.DefaultBranchPattern, Title: "deps: bump", Labels: []string{"outerloop"}, Automerge: true, MergeMethod: workitems.MergeSquash},
		DoneCheck: workitems.DoneCheck{CI: &workitems.CICheck{Forge: "github", Repo: "acme/payments", Required: []string{"build"}, Wait: workitems.Duration(time.Minute)}}}
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

	ev1 := &events{}
	d1 := commit("example.com/lib v1.2.0 h1:x\n")
	res, err := p.Publish(ctx, delivery.Publication{Template: tmpl, Item: it, Attempt: 1, Workspace: ws, Delivery: d1, Decision: closeDec, Events: ev1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision == nil || res.Decision.Outcome != workitems.OutcomeRetry || res.Decision.Rule != "ci_failed" ||
		!strings.Contains(res.Decision.Next.Input, "Failing CI checks: build") {
		t.Fatalf("red CI must retry with the failing check in the input: %+v", res.Decision)
	}
	first := res.Delivery
	if first.Outcome != workitems.DeliveryPROpened || first.PR == nil || first.PushedSHA != d1.Commit || fake.BranchSHA("outerloop/deps-bump") != d1.Commit ||
		len(first.Checks) != 1 || first.Checks[0].State != workitems.CheckFailure {
		t.Fatalf("attempt 1 delivery %+v", first)
	}
	if fmt.Sprint(ev1.steps) != "[pushed pr_opened ci]" {
		t.Fatalf("attempt 1 steps %v", ev1.steps)
	}

	// Attempt 2: a new commit on the same branch updates the same pull request; CI is green.
	it.Attempt, it.Attempts, it.Delivery = 2, append(it.Attempts, workitems.Attempt{N: 2}), &first
	ev2 := &events{}
	d2 := commit("example.com/lib v1.2.1 h1:y\n")
	res, err = p.Publish(ctx, delivery.Publication{Template: tmpl, Item: it, Attempt: 2, Workspace: ws, Delivery: d2, Decision: closeDec, Events: ev2})
	if err != nil {
		t.Fatal(err)
	}
	second := res.Delivery
	if res.Decision.Outcome != workitems.OutcomeClose || second.Outcome != workitems.DeliveryMerged || second.PR.Number != first.PR.Number ||
		second.PushedSHA != d2.Commit || second.MergeCommit == "" || second.PR.State != workitems.PRMerged {
		t.Fatalf("attempt 2: %+v %+v", res.Decision, second)
	}
	if fmt.Sprint(ev2.steps) != "[pushed pr_updated ci merged]" {
		t.Fatalf("attempt 2 steps %v", ev2.steps)
	}
	if pulls := fake.Pulls(); len(pulls) != 1 || pulls[0]["merged"] != true || fmt.Sprint(fake.Labels(first.PR.Number)) != "[outerloop]" {
		t.Fatalf("pull requests %v", pulls)
	}
	if ci.shas[0] != d1.Commit || ci.shas[1] != d2.Commit {
		t.Fatalf("CI asked for %v", ci.shas)
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
