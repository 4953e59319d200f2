package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/giteatest"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// statusDeliveries serves the app's webhook handler and says, after each Gitea status delivery
// is handled, what the handler answered.
type statusDeliveries struct {
	next http.Handler
	done chan int
}

func (d *statusDeliveries) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	d.next.ServeHTTP(rec, r)
	if r.Header.Get("X-Gitea-Event") == "status" {
		d.done <- rec.code
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (d *statusDeliveries) await(t *testing.T, what string) {
	t.Helper()
	select {
	case code := <-d.done:
		if code/100 != 2 {
			t.Fatalf("%s: the handler answered %d", what, code)
		}
	case <-testwait.After(t): // Gitea delivers from a queue: however long a loaded machine takes
		t.Fatalf("%s: no delivery by the test's deadline", what)
	}
}

// A template subscribed to check_failed on main: a real Gitea delivers a failing ci/test status
// on main's head to the app's webhook handler, and exactly one item appears; a second failing
// status on the same commit makes none.
func TestTriggerCheckFailedOnMainMakesOneItemPerCommitFromARealGiteaDelivery(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	const tokenEnv, secretEnv = "OL_TEST_TRIGGER_TOKEN", "OL_TEST_TRIGGER_HOOK_SECRET"
	secret := fmt.Sprintf("trigger-secret-%d", time.Now().UnixNano())

	r := gs.NewRepo(t, "triggers")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# payments\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gs.Git(t, dir, "init", "-q", "-b", "main")
	gs.Git(t, dir, "add", "-A")
	gs.Git(t, dir, "commit", "-qm", "first")
	gs.PushDir(t, dir, r, "main")
	head := gs.Git(t, dir, "rev-parse", "HEAD")

	cfg, err := parseConfig(fmt.Appendf(nil, `
defaults:
  budget: {wall_time: 3m}
forges:
  tea: {kind: gitea, base_url: %q, token_env: %s, webhook_secret_env: %s}
templates:
  - name: fix-main
    goal: make main green again
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - {forge: tea, event: check_failed, repo: %s, branch: main, checks: [ci/test]}
`, gs.URL, tokenEnv, secretEnv, r.Slug))
	if err != nil {
		t.Fatal(err)
	}
	token := gs.Getenv(tokenEnv)
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t),
		Getenv: func(k string) string {
			if k == secretEnv {
				return secret
			}
			return token(k)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)

	// Gitea's status event does not say the branch: the commit is matched to main's head read
	// from the forge (git ls-remote with the forge's token).
	triggers := scheduler.NewTriggers(a.Queue, a.CurrentConfig, testLogger(t)).WithHeads(scheduler.ForgeHeads(a.Forges))
	d := &statusDeliveries{next: a.Hooks(nil, triggers), done: make(chan int, 16)}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{forge}", d)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	gs.CreateHook(t, r.Slug, hs.URL+"/hooks/tea", secret, []string{"status"})

	items := func() []*workitems.Item {
		t.Helper()
		its, err := a.Store.List(context.Background(), itemstore.ListOptions{Template: "fix-main"})
		if err != nil {
			t.Fatal(err)
		}
		return its
	}

	gs.PostStatus(t, r, head, "ci/test", "failure", "2 tests failed", "https://ci.example.com/1")
	d.await(t, "the first failing status")
	its := items()
	if len(its) != 1 {
		t.Fatalf("%d items after a failing ci/test on main's head, want 1", len(its))
	}
	it := its[0]
	if want := workitems.CheckTriggerItemID("fix-main", "tea", r.Slug, head); it.ID != want || it.Origin.Kind != workitems.OriginWebhook ||
		it.Origin.Actor != "tea:"+gs.Admin {
		t.Errorf("item %s by %+v, want %s by webhook tea:%s", it.ID, it.Origin, want, gs.Admin)
	}

	gs.PostStatus(t, r, head, "ci/test", "failure", "still failing", "https://ci.example.com/2")
	d.await(t, "the second failing status")
	if its := items(); len(its) != 1 {
		t.Fatalf("%d items after a second failing status on the same commit, want 1", len(its))
	}
}
