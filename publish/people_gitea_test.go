package publish

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/lib/giteatest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// people is one repository on the real Gitea with outerloop's template delivering to it, and a
// second user, Pat, with write access: the person who pushes to outerloop's branch.
type people struct {
	t      *testing.T
	srv    *giteatest.Server
	repo   giteatest.Repo
	set    forge.Set
	pub    *Publisher
	d      *delivery.Deliverer
	tmpl   *config.Template
	branch string
	pat    *giteatest.User
}

func newPeople(t *testing.T, deliver func(*config.Deliver)) *people {
	t.Helper()
	srv := giteatest.Shared(t)
	repo := srv.NewRepo(t, "people")
	set, err := forge.NewSet(map[string]config.ForgeConfig{"tea": {Kind: workitems.ForgeGitea, BaseURL: srv.URL, TokenEnv: "GITEA_TOKEN"}},
		forge.Config{Getenv: srv.Getenv("GITEA_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	pub := New(Options{Forges: set})
	tmpl := &config.Template{Name: "bump", Goal: "Bump a.", Deliver: config.Deliver{Forge: "tea", Repo: repo.Slug,
		Mode: workitems.DeliverPullRequest, Branch: config.DefaultBranchPattern, Title: "outerloop: bump a"}}
	if deliver != nil {
		deliver(&tmpl.Deliver)
	}
	p := &people{t: t, srv: srv, repo: repo, set: set, pub: pub, d: delivery.New(delivery.Options{Publisher: pub}), tmpl: tmpl,
		branch: tmpl.Deliver.BranchFor(tmpl.Name, ""), pat: srv.NewCollaborator(t, repo, "pat")}
	up := t.TempDir()
	srv.Git(t, up, "init", "-q")
	p.write(up, "a.txt", "a0\n")
	p.write(up, "b.txt", "b0\n")
	srv.Git(t, up, "add", "-A")
	srv.Git(t, up, "commit", "-qm", "start")
	srv.PushDir(t, up, repo, "main")
	return p
}

func (p *people) write(dir, name, body string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// night is one item's attempt: a workspace cloned from main, a.txt set to content (nothing
// changed when content is ""), delivered as the verifier's close.
func (p *people) night(it *workitems.Item, content string) (*workitems.Delivery, *recorded) {
	p.t.Helper()
	ws := p.t.TempDir()
	p.srv.Git(p.t, ws, "clone", "-q", "--single-branch", "--branch", "main", p.repo.CloneURL, ".")
	rule := workitems.RuleName("all_green")
	if content == "" {
		rule = workitems.RuleNoChange
	} else {
		p.write(ws, "a.txt", content)
	}
	if it.Template == "" {
		it.Template, it.Goal = p.tmpl.Name, p.tmpl.Goal
	}
	ev := &recorded{}
	res, err := p.d.Deliver(context.Background(), delivery.Request{Template: p.tmpl, Item: it, Attempt: 1, Workspace: ws,
		Base: p.srv.Git(p.t, ws, "rev-parse", "HEAD"), Events: ev,
		Decision: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: rule, Actor: "verifier"}})
	if err != nil {
		p.t.Fatalf("deliver %s: %v", it.ID, err)
	}
	return res.Delivery, ev
}

// patPushes commits file=content to outerloop's branch as Pat (author "Pat Person") and pushes
// it with Pat's own token.
func (p *people) patPushes(file, content string) string {
	p.t.Helper()
	dir := p.t.TempDir()
	p.patGit(dir, "clone", "-q", "--branch", p.branch, p.repo.CloneURL, ".")
	p.write(dir, file, content)
	p.patGit(dir, "commit", "-qam", "Pat's fix to "+file)
	sha := p.patGit(dir, "rev-parse", "HEAD")
	p.patGit(dir, "push", "-q", "origin", "HEAD:refs/heads/"+p.branch)
	p.srv.WaitPushed(p.t, p.repo, p.branch, sha)
	return sha
}

func (p *people) patGit(dir string, args ...string) string {
	p.t.Helper()
	cred := base64.StdEncoding.EncodeToString([]byte(p.pat.Name + ":" + p.pat.Token()))
	cmd := exec.Command("git", append([]string{"-c", "user.name=Pat Person", "-c", "user.email=pat@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http."+p.srv.URL+"/.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+cred)
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("git %s as Pat: %v\n%s", strings.Join(args, " "), err, strings.ReplaceAll(string(out), p.pat.Token(), "[REDACTED]"))
	}
	return strings.TrimSpace(string(out))
}

// head is the branch's commit on the server ("" when it does not exist).
func (p *people) head() string {
	p.t.Helper()
	sha, _, _ := strings.Cut(p.srv.Git(p.t, p.t.TempDir(), "ls-remote", p.repo.CloneURL, "refs/heads/"+p.branch), "\t")
	return sha
}

// has reports whether the branch's history contains sha, and returns the branch's file.
func (p *people) has(sha, file string) (bool, string) {
	p.t.Helper()
	dir := p.t.TempDir()
	p.srv.Git(p.t, dir, "init", "-q")
	p.srv.Git(p.t, dir, "fetch", "-q", p.repo.CloneURL, "refs/heads/"+p.branch)
	body := p.srv.Git(p.t, dir, "show", "FETCH_HEAD:"+file)
	err := exec.Command("git", "-C", dir, "merge-base", "--is-ancestor", sha, "FETCH_HEAD").Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		p.t.Fatal(err)
	}
	return err == nil, body
}

func (p *people) pr(n int) *forge.PullRequest {
	p.t.Helper()
	pr, err := p.set["tea"].PullRequest(context.Background(), p.repo.Slug, n)
	if err != nil {
		p.t.Fatal(err)
	}
	return pr
}

// comments are the pull request's comments that contain s.
func (p *people) comments(n int, s string) int {
	p.t.Helper()
	var cs []struct {
		Body string `json:"body"`
	}
	p.srv.API(p.t, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/comments", p.repo.Slug, n), nil, http.StatusOK, &cs)
	c := 0
	for _, m := range cs {
		if strings.Contains(m.Body, s) {
			c++
		}
	}
	return c
}

func (r *recorded) steps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.Data["step"])
	}
	return out
}

func tick(id string) *workitems.Item {
	return &workitems.Item{ID: id, Origin: workitems.Origin{Kind: workitems.OriginCron}}
}

// With deliver.on_foreign_commits stop (the default): after Pat pushes to outerloop's branch, a
// new tick with a different change pushes nothing and says so once on the pull request; the
// next tick too, without a second comment; a review round builds on Pat's commit; Pat's commit
// is on the branch after each.
func TestOnGiteaAPersonsCommitStopsOuterloop(t *testing.T) {
	t.Parallel()
	p := newPeople(t, nil)
	first, _ := p.night(tick("bump@1"), "a1\n")
	if first.Outcome != workitems.DeliveryPROpened {
		t.Fatalf("the first night: %+v", first)
	}
	pat := p.patPushes("b.txt", "b by Pat\n")

	second, ev := p.night(tick("bump@2"), "a2\n")
	if second.Outcome != workitems.DeliveryHeld || second.Held == nil || second.Held.User != "Pat Person" || second.Held.SHA != pat ||
		second.PushedSHA != "" || second.PR == nil || second.PR.Number != first.PR.Number {
		t.Fatalf("the second night: %+v held %+v", second, second.Held)
	}
	if !strings.Contains(strings.Join(ev.steps(), " "), string(workitems.StepHeld)) {
		t.Fatalf("no held step: %v", ev.steps())
	}
	if got := p.head(); got != pat {
		t.Fatalf("the branch is at %s; want Pat's %s", got, pat)
	}
	if n := p.comments(first.PR.Number, "stopped updating this pull request: Pat Person pushed "+pat[:12]); n != 1 {
		t.Fatalf("%d comments saying it stopped; want 1", n)
	}

	third, _ := p.night(tick("bump@3"), "a3\n")
	if third.Outcome != workitems.DeliveryHeld || p.head() != pat {
		t.Fatalf("the third night: %+v, head %s", third, p.head())
	}
	if n := p.comments(first.PR.Number, "stopped updating"); n != 1 {
		t.Fatalf("%d comments saying it stopped after two held nights; want 1", n)
	}

	// A reviewer asked bump@1 for changes: its next attempt builds on Pat's commit.
	round := &workitems.Item{ID: "bump@1", Decisions: []workitems.Decision{{Outcome: workitems.OutcomeRetry, Rule: workitems.RuleChangesRequested}}}
	built, ev := p.night(round, "a4\n")
	if built.Outcome != workitems.DeliveryPRUpdated || built.PushedSHA == "" || built.Held == nil || built.Held.SHA != pat {
		t.Fatalf("the review round: %+v", built)
	}
	if !strings.Contains(strings.Join(ev.steps(), " "), string(workitems.StepBuiltOn)) {
		t.Fatalf("no built_on step: %v", ev.steps())
	}
	if got := p.head(); got != built.PushedSHA {
		t.Fatalf("the branch is at %s; want %s", got, built.PushedSHA)
	}
	if ok, a := p.has(pat, "a.txt"); !ok || a != "a4" {
		t.Fatalf("after the review round Pat's commit is in the branch: %v, a.txt %q", ok, a)
	}
	if _, b := p.has(pat, "b.txt"); b != "b by Pat" {
		t.Fatalf("b.txt %q: Pat's change is gone", b)
	}
}

// With build_on: a new tick's different change is a new commit on top of Pat's, and the next
// one on top of that; Pat's commit stays; a change that conflicts with Pat's is held.
func TestOnGiteaBuildOnAddsOuterloopsChangeOnTopOfAPersons(t *testing.T) {
	t.Parallel()
	p := newPeople(t, func(d *config.Deliver) { d.OnForeignCommits = workitems.ForeignBuildOn })
	first, _ := p.night(tick("bump@1"), "a1\n")
	pat := p.patPushes("b.txt", "b by Pat\n")
	for i, content := range []string{"a2\n", "a3\n"} {
		got, _ := p.night(tick(fmt.Sprintf("bump@%d", i+2)), content)
		if got.Outcome != workitems.DeliveryPRUpdated || got.PR.Number != first.PR.Number || got.Held == nil || got.Held.SHA != pat {
			t.Fatalf("night %d: %+v", i+2, got)
		}
		ok, a := p.has(pat, "a.txt")
		if _, b := p.has(pat, "b.txt"); !ok || a != strings.TrimSpace(content) || b != "b by Pat" {
			t.Fatalf("night %d: Pat's commit in history %v, a.txt %q, b.txt %q", i+2, ok, a, b)
		}
	}
	// Pat changes the line outerloop changes: the next change conflicts, nothing is pushed.
	pat2 := p.patPushes("a.txt", "a by Pat\n")
	held, _ := p.night(tick("bump@4"), "a4\n")
	if held.Outcome != workitems.DeliveryHeld || !strings.Contains(held.Error, "conflicts") || p.head() != pat2 {
		t.Fatalf("a conflicting night: %+v (head %s, Pat's %s)", held, p.head(), pat2)
	}
}

// A person's title, body text and label survive outerloop's update of its pull request; only
// outerloop's own section changes.
func TestOnGiteaEditsSurviveAnUpdate(t *testing.T) {
	t.Parallel()
	p := newPeople(t, nil)
	first, _ := p.night(tick("bump@1"), "a1\n")
	pr := p.pr(first.PR.Number)
	body := "Context a person wrote.\n\n" + pr.Body + "\n\nFooter a person wrote."
	p.srv.API(t, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", p.repo.Slug, pr.Number),
		map[string]string{"title": "Bump a (reviewed by Pat)", "body": body}, http.StatusCreated, nil)
	if err := p.set["tea"].AddLabels(context.Background(), p.repo.Slug, pr.Number, []string{"person-label"}); err != nil {
		t.Fatal(err)
	}

	second, _ := p.night(tick("bump@2"), "a2\n")
	if second.Outcome != workitems.DeliveryPRUpdated {
		t.Fatalf("the second night: %+v", second)
	}
	after := p.pr(pr.Number)
	item, tree := MarkedTree(after.Body)
	if after.Title != "Bump a (reviewed by Pat)" || !strings.HasPrefix(after.Body, "Context a person wrote.\n\n") ||
		!strings.HasSuffix(after.Body, "\n\nFooter a person wrote.") || item != "bump@2" || tree != second.Tree ||
		strings.Count(after.Body, "<!-- outerloop:begin") != 1 || !strings.Contains(strings.Join(after.Labels, ","), "person-label") {
		t.Fatalf("after the update: title %q labels %v body:\n%s", after.Title, after.Labels, after.Body)
	}
}

// A tick that finds nothing to change closes the open pull request with its comment and deletes
// the branch; when Pat holds the branch it only comments, once, and keeps it.
func TestOnGiteaObsoletePullRequestsClose(t *testing.T) {
	t.Parallel()
	t.Run("outerloop's alone", func(t *testing.T) {
		t.Parallel()
		p := newPeople(t, nil)
		first, _ := p.night(tick("bump@1"), "a1\n")
		obs, _ := p.night(tick("bump@2"), "")
		if obs.Outcome != workitems.DeliveryObsolete || obs.PR == nil || obs.PR.Number != first.PR.Number || obs.PR.State != workitems.PRClosed {
			t.Fatalf("the obsolete night: %+v", obs)
		}
		if pr := p.pr(first.PR.Number); pr.State != workitems.PRClosed {
			t.Fatalf("the pull request is %s on the forge", pr.State)
		}
		if n := p.comments(first.PR.Number, "closes this pull request as no longer needed: the attempt found nothing to change"); n != 1 {
			t.Fatalf("%d closing comments", n)
		}
		if h := p.head(); h != "" {
			t.Fatalf("the branch is still there at %s", h)
		}
	})
	t.Run("held by a person", func(t *testing.T) {
		t.Parallel()
		p := newPeople(t, nil)
		first, _ := p.night(tick("bump@1"), "a1\n")
		pat := p.patPushes("b.txt", "b by Pat\n")
		for _, id := range []string{"bump@2", "bump@3"} {
			obs, _ := p.night(tick(id), "")
			if obs.Outcome != workitems.DeliveryObsolete || obs.Held == nil || obs.PR.State != workitems.PROpen {
				t.Fatalf("%s: %+v", id, obs)
			}
		}
		if pr := p.pr(first.PR.Number); pr.State != workitems.PROpen || p.head() != pat {
			t.Fatalf("the pull request is %s, the branch at %s (Pat's %s)", pr.State, p.head(), pat)
		}
		if n := p.comments(first.PR.Number, "found nothing left to change"); n != 1 {
			t.Fatalf("%d comments; want 1 over two nights", n)
		}
	})
}

// After a merge the branch is deleted; a closed pull request's branch Pat committed to is
// kept, and so is one deliver.keep_branch keeps.
func TestOnGiteaFinishedBranchesAreCleanedUp(t *testing.T) {
	t.Parallel()
	cleanup := func(p *people, del *workitems.Delivery, state workitems.PRState) *recorded {
		t.Helper()
		d := *del
		pr := *d.PR
		pr.State = state
		d.PR = &pr
		ev := &recorded{}
		if err := p.d.Cleanup(context.Background(), delivery.Cleanup{Template: p.tmpl, Item: tick("bump@1"), Delivery: d, Events: ev}); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	t.Run("merged", func(t *testing.T) {
		t.Parallel()
		p := newPeople(t, nil)
		first, _ := p.night(tick("bump@1"), "a1\n")
		p.srv.MergePullRequest(t, p.repo, first.PR.Number)
		ev := cleanup(p, first, workitems.PRMerged)
		if h := p.head(); h != "" || !strings.Contains(strings.Join(ev.steps(), " "), string(workitems.StepBranchDeleted)) {
			t.Fatalf("after the merge the branch is at %q; steps %v", h, ev.steps())
		}
		cleanup(p, first, workitems.PRMerged) // again: nothing to do, no error
	})
	t.Run("a person committed", func(t *testing.T) {
		t.Parallel()
		p := newPeople(t, nil)
		first, _ := p.night(tick("bump@1"), "a1\n")
		pat := p.patPushes("b.txt", "b by Pat\n")
		p.srv.ClosePullRequest(t, p.repo, first.PR.Number)
		ev := cleanup(p, first, workitems.PRClosed)
		if h := p.head(); h != pat || !strings.Contains(strings.Join(ev.steps(), " "), string(workitems.StepBranchKept)) {
			t.Fatalf("the branch is at %q (Pat's %s); steps %v", h, pat, ev.steps())
		}
	})
	t.Run("keep_branch", func(t *testing.T) {
		t.Parallel()
		p := newPeople(t, func(d *config.Deliver) { d.KeepBranch = true })
		first, _ := p.night(tick("bump@1"), "a1\n")
		p.srv.ClosePullRequest(t, p.repo, first.PR.Number)
		cleanup(p, first, workitems.PRClosed)
		if h := p.head(); h != first.PushedSHA {
			t.Fatalf("the kept branch is at %q", h)
		}
	})
}

// deliver.draft_until: ci_green opens a draft; Ready (the wake saw CI green) makes it ready on
// the forge.
func TestOnGiteaDraftUntilGreen(t *testing.T) {
	t.Parallel()
	p := newPeople(t, func(d *config.Deliver) { d.DraftUntil = workitems.DraftUntilCIGreen })
	first, _ := p.night(tick("bump@1"), "a1\n")
	if !first.PR.Draft || !p.pr(first.PR.Number).Draft {
		t.Fatalf("opened %+v; want a draft", first.PR)
	}
	ev := &recorded{}
	ready, err := p.d.Ready(context.Background(), delivery.Ready{Template: p.tmpl, Item: tick("bump@1"), Delivery: *first, Events: ev, Why: "CI green"})
	if err != nil {
		t.Fatal(err)
	}
	if ready.PR.Draft || p.pr(first.PR.Number).Draft || !strings.Contains(strings.Join(ev.steps(), " "), string(workitems.StepReady)) {
		t.Fatalf("after Ready: %+v on the forge draft=%v; steps %v", ready.PR, p.pr(first.PR.Number).Draft, ev.steps())
	}
	// The next night's update leaves it ready.
	p.night(tick("bump@2"), "a2\n")
	if pr := p.pr(first.PR.Number); pr.Draft {
		t.Fatalf("the update made it a draft again: %q", pr.Title)
	}
}
