package publish

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/lib/giteatest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

type recorded struct {
	mu  sync.Mutex
	evs []workitems.Event
}

func (r *recorded) Emit(_ context.Context, e workitems.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

// reason is the rebase reason the delivery's events gave ("" when none did).
func (r *recorded) reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if v := e.Data["reason"]; v != "" {
			return v
		}
	}
	return ""
}

func numbered(replace map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		l, ok := replace[i]
		if !ok {
			l = fmt.Sprint("line ", i)
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// On the real Gitea, deliver.rebase conflicted: a later tick's same change pushes nothing to
// the open pull request while its base moved without conflict, and rebases it once the base
// conflicts with it.
func TestOnGiteaRebaseConflictedPushesOnlyWhenThePullRequestConflicts(t *testing.T) {
	t.Parallel()
	srv := giteatest.Start(t)
	repo := srv.NewRepo(t, "rebase")
	set, err := forge.NewSet(map[string]config.ForgeConfig{"tea": {Kind: workitems.ForgeGitea, BaseURL: srv.URL, TokenEnv: "GITEA_TOKEN"}},
		forge.Config{Getenv: srv.Getenv("GITEA_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	d := delivery.New(delivery.Options{Publisher: New(Options{Forges: set})})
	tmpl := &config.Template{Name: "bump", Goal: "Set line 10 to X.", Deliver: config.Deliver{Forge: "tea", Repo: repo.Slug,
		Mode: workitems.DeliverPullRequest, Branch: config.DefaultBranchPattern, Rebase: workitems.RebaseConflicted}}
	branch := tmpl.Deliver.BranchFor(tmpl.Name, "")

	write := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upstream := t.TempDir()
	srv.Git(t, upstream, "init", "-q")
	write(upstream, "a.txt", numbered(nil))
	write(upstream, "b.txt", "b\n")
	srv.Git(t, upstream, "add", "-A")
	srv.Git(t, upstream, "commit", "-qm", "start")
	srv.PushDir(t, upstream, repo, "main")
	moveMain := func(name, body string) string {
		t.Helper()
		write(upstream, name, body)
		srv.Git(t, upstream, "commit", "-qam", "upstream moves "+name)
		srv.PushDir(t, upstream, repo, "main")
		return srv.Git(t, upstream, "rev-parse", "HEAD")
	}
	remote := func(ref string) string {
		t.Helper()
		sha, _, _ := strings.Cut(srv.Git(t, t.TempDir(), "ls-remote", repo.CloneURL, ref), "\t")
		return sha
	}
	// night is one tick's item: a workspace cloned from main as it is now (main only, as the
	// worker clones: the pull request's head is fetched with the forge's credentials), the same change
	// made in it (line 10 set to X, on whatever main has around it), and its delivery.
	night := func(id string) (*workitems.Delivery, *recorded) {
		t.Helper()
		ws := t.TempDir()
		srv.Git(t, ws, "clone", "-q", "--single-branch", "--branch", "main", repo.CloneURL, ".")
		a, err := os.ReadFile(filepath.Join(ws, "a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		write(ws, "a.txt", strings.Replace(string(a), "line 10\n", "X\n", 1))
		ev := &recorded{}
		res, err := d.Deliver(context.Background(), delivery.Request{Template: tmpl, Item: &workitems.Item{ID: id, Template: tmpl.Name, Goal: tmpl.Goal},
			Attempt: 1, Workspace: ws, Base: srv.Git(t, ws, "rev-parse", "HEAD"), Events: ev,
			Decision: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Actor: "verifier"}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Delivery, ev
	}

	first, _ := night("bump@1")
	if first.Outcome != workitems.DeliveryPROpened || first.PushedSHA == "" || remote("refs/heads/"+branch) != first.PushedSHA {
		t.Fatalf("the first night: %+v", first)
	}

	// main moves elsewhere: the same change is held, the pull request keeps its head.
	moveMain("b.txt", "b, moved\n")
	held, ev := night("bump@2")
	if held.Outcome != workitems.DeliveryUnchanged || held.PushedSHA != "" || held.PR == nil || held.PR.Number != first.PR.Number ||
		held.SameAs == nil || held.SameAs.Commit != first.PushedSHA || held.SameAs.Item != "bump@1" {
		t.Fatalf("the second night: %+v (same as %+v)", held, held.SameAs)
	}
	if got := ev.reason(); got != string(delivery.RebaseNotNeeded) {
		t.Fatalf("the second night's reason %q", got)
	}
	if got := remote("refs/heads/" + branch); got != first.PushedSHA {
		t.Fatalf("the branch moved to %s; want %s unchanged", got, first.PushedSHA)
	}

	// main changes line 11, next to the change: the pull request conflicts and is rebased.
	tip := moveMain("a.txt", numbered(map[int]string{11: "Y"}))
	rebased, ev := night("bump@3")
	if rebased.Outcome != workitems.DeliveryPRUpdated || rebased.PR == nil || rebased.PR.Number != first.PR.Number ||
		rebased.PushedSHA == "" || rebased.PushedSHA == first.PushedSHA || rebased.Base != tip {
		t.Fatalf("the third night: %+v", rebased)
	}
	if got := ev.reason(); got != string(delivery.RebaseConflicted) {
		t.Fatalf("the third night's reason %q", got)
	}
	if got := remote("refs/heads/" + branch); got != rebased.PushedSHA {
		t.Fatalf("the branch is at %s; want the rebased %s", got, rebased.PushedSHA)
	}
	check := t.TempDir()
	srv.Git(t, check, "init", "-q")
	srv.Git(t, check, "fetch", "-q", repo.CloneURL, "refs/heads/"+branch)
	if parent := srv.Git(t, check, "rev-parse", "FETCH_HEAD^"); parent != tip {
		t.Fatalf("the rebased head's parent is %s; want main's tip %s", parent, tip)
	}
	prs, err := set["tea"].PullRequestsFor(context.Background(), repo.Slug, branch)
	if err != nil || prs.Open == nil || prs.Open.Number != first.PR.Number {
		t.Fatalf("the pull request after the rebase: %+v, %v", prs.Open, err)
	}
}
