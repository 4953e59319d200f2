package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"outerloop/forge"
	"outerloop/lib/fakeclock"
	"outerloop/lib/giteatest"
	"outerloop/lib/testwait"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A Gitea's commit statuses on the workspace's HEAD are the CI evidence, through the same
// forge client delivery uses.
func TestVerifyReadsCIFromARealGitea(t *testing.T) {
	t.Parallel()
	srv := giteatest.Start(t)
	repo := srv.NewRepo(t, "verify")
	ws, sha := gitRepo(t, map[string]string{"a.txt": "a\n"})
	srv.PushDir(t, ws, repo, "main")
	f, err := forge.New(forge.Config{Name: "tea", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitea,
		BaseURL: srv.URL, TokenEnv: "GITEA_TOKEN"}, Getenv: srv.Getenv("GITEA_TOKEN"), RequestTimeout: testwait.Left(t)})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template()
	tmpl.DoneCheck.CI = &config.CICheck{Forge: "tea", Repo: repo.Slug, Required: []string{"build", "test"},
		Wait: workitems.Duration(time.Minute)}
	v := New(WithClock(fakeclock.New(testNow)), WithCI("tea", NewForgeCI(f)))
	verify := func() workitems.Decision {
		t.Helper()
		res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
			Exit: completed(), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return res.Decision
	}

	srv.PostStatus(t, repo, sha, "build", "success", "built", "http://ci/build")
	srv.PostStatus(t, repo, sha, "test", "failure", "TestAdd failed", "http://ci/test")
	if d := verify(); d.Rule != "ci_failed" || d.Next == nil || !strings.Contains(d.Next.Input, "Failing CI checks: test") {
		t.Fatalf("red: %s %+v", d.Rule, d.Next)
	}
	srv.PostStatus(t, repo, sha, "test", "success", "12 passed", "http://ci/test")
	if d := verify(); d.Outcome != workitems.OutcomeClose || d.Rule != "checks_passed" {
		t.Fatalf("green: %s/%s %v", d.Outcome, d.Rule, d.Reasons)
	}
}

// checksOnly is a forge that only reads and re-runs checks: all ForgeCI asks of one.
type checksOnly struct {
	checks []forge.Check
	rerun  []string
	err    error
}

func (c *checksOnly) Checks(context.Context, string, string) ([]forge.Check, error) {
	return c.checks, c.err
}

func (c *checksOnly) RerunChecks(_ context.Context, _, _ string, names []string) ([]string, error) {
	c.rerun = names
	return names, c.err
}

func TestForgeCINeedsOnlyChecksAndRerunOfAForge(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("a", 40)
	f := &checksOnly{checks: []forge.Check{{Name: "build", State: workitems.CheckFailure, SHA: sha, URL: "http://ci/1", Summary: "exit 2"}}}
	ci := NewForgeCI(f)
	got, err := ci.Checks(context.Background(), "acme/app", sha)
	if err != nil || len(got) != 1 || got[0] != (CICheck{Name: "build", State: CIFailure, SHA: sha, URL: "http://ci/1", Details: "exit 2"}) {
		t.Fatalf("checks %+v, %v", got, err)
	}
	if err := ci.Rerun(context.Background(), "acme/app", sha, []string{"build"}); err != nil || len(f.rerun) != 1 || f.rerun[0] != "build" {
		t.Fatalf("rerun %v, %v", f.rerun, err)
	}
	f.err = forge.ErrRateLimited
	if _, err := ci.Checks(context.Background(), "acme/app", sha); !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "acme/app@") {
		t.Fatalf("a failing forge: %v", err)
	}
}
