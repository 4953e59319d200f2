package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// privateRepo creates a private repository on the shared Gitea holding the broken sample
// module on main (anonymous reads of it get 404).
func privateRepo(t *testing.T, gs *giteatest.Server, prefix string) giteatest.Repo {
	t.Helper()
	r := gs.NewRepo(t, prefix)
	var repo struct {
		Private bool `json:"private"`
	}
	gs.API(t, http.MethodGet, "/repos/"+r.Slug, nil, http.StatusOK, &repo)
	if !repo.Private {
		t.Fatalf("%s is not private", r.Slug)
	}
	dir := t.TempDir()
	if err := sample.Write(dir); err != nil {
		t.Fatal(err)
	}
	gs.Git(t, dir, "init", "-q", "-b", "main")
	gs.Git(t, dir, "add", "-A")
	gs.Git(t, dir, "commit", "-qm", "the sample module")
	gs.PushDir(t, dir, r, "main")
	resp, err := http.Get(r.CloneURL + "/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous read of the private repo answered %d", resp.StatusCode)
	}
	return r
}

// privateTemplate is a patch-mode template (no deliver.forge: the forge is found by the repo
// URL's origin) working on repo.
func privateTemplate(repo string) string {
	return fmt.Sprintf(`  - name: fix
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
`, repo, sample.FixCommand)
}

// A private repository is fetched with its forge's token: the item closes, and the token is in
// no log line, event, Redis key or value, metric or git config under the work dir.
func TestAPrivateRepoIsFetchedWithTheTokenOfItsForge(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := privateRepo(t, gs, "private")
	cfg := forgeConfig(t, gs, privateTemplate(r.CloneURL))
	logs := &testlog.Buffer{}
	s := openForge(t, gs, cfg, logs)
	s.startWorker(t, "private-1")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "fix"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed {
		t.Fatalf("want closed: %s %+v", it.State, it.Decisions)
	}
	if d := it.Delivery; d == nil || d.Mode != workitems.DeliverPatch || d.FileCount != 1 {
		t.Fatalf("delivery %+v", d)
	}
	assertNoToken(t, gs, s, logs, it.ID)
}

// Without the token the same item escalates at once as a configuration error that names the
// mirror and says the forge's token variable is not set; with a wrong token, it says the
// token was refused. Neither token appears anywhere.
func TestAPrivateRepoWithoutAUsableTokenEscalatesSayingWhy(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := privateRepo(t, gs, "private-notoken")
	for _, tc := range []struct {
		name, token string
		want        []string
	}{
		{"unset", "", []string{"mirror of " + r.CloneURL, "read without credentials", "$" + tokenVar + " is not set"}},
		{"wrong", "0123456789abcdef0123456789abcdef01234567", []string{"mirror of " + r.CloneURL, "read with the token of forge tea ($" + tokenVar + ")", "the forge refused the token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := forgeConfig(t, gs, privateTemplate(r.CloneURL))
			logs := &testlog.Buffer{}
			s := openWith(t, cfg, func(o *app.Options) {
				o.Getenv = func(k string) string {
					if k == tokenVar {
						return tc.token
					}
					return ""
				}
				o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, testLogWriter()), &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			s.startWorker(t, "private-"+tc.name)
			it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "fix"})
			if err != nil {
				t.Fatal(err)
			}
			it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
			if it.State != workitems.StateEscalated || len(it.Attempts) != 1 {
				t.Fatalf("want escalated after one attempt: %s %d", it.State, len(it.Attempts))
			}
			d := it.Attempts[0].Decision
			reason := strings.Join(d.Reasons, " | ")
			if d.Rule != "config_error" {
				t.Fatalf("decision %+v", d)
			}
			for _, w := range tc.want {
				if !strings.Contains(reason, w) {
					t.Errorf("the reason does not say %q: %s", w, reason)
				}
			}
			for _, secret := range []string{gs.Token(), tc.token} {
				if secret != "" && (strings.Contains(reason, secret) || strings.Contains(logs.String(), secret)) {
					t.Errorf("a token is in the reason or the logs")
				}
			}
		})
	}
}
