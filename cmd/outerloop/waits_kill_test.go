package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/giteatest"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A real worker process pushes a change and the item waits for CI; the worker is SIGKILLed;
// CI answers while no worker runs (the Gitea's webhook reaches this process's hooks handler,
// which queues the wake); a new worker process closes the item. A waiting item holds no
// worker, so the kill loses nothing and nothing has to be recovered.
func TestASIGKILLedWorkerLosesNoWaitingItem(t *testing.T) {
	t.Parallel()
	gs := giteatest.Start(t)
	r := gs.NewRepo(t, "waitkill")
	gs.API(t, http.MethodPatch, "/repos/"+r.Slug, map[string]any{"private": false}, http.StatusOK, nil)
	src := t.TempDir()
	if err := sample.Write(src); err != nil {
		t.Fatal(err)
	}
	gs.Git(t, src, "init", "-q", "-b", "main")
	gs.Git(t, src, "add", "-A")
	gs.Git(t, src, "commit", "-qm", "the sample module")
	gs.PushDir(t, src, r, "main")

	const tokenVar, secretVar, secret = "OLWK_TEA_TOKEN", "OLWK_TEA_SECRET", "kill-hook-secret"
	body := fmt.Sprintf(`defaults:
  max_attempts: 2
  budget: {wall_time: 3m, verify_reserve: 1m}
waits: {first_poll: 10m}
forges:
  tea: {kind: gitea, base_url: %q, token_env: %s, webhook_secret_env: %s}
templates:
  - name: ci
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check:
      commands: ["test -s NOTES.md"]
      ci: {forge: tea, required: [test], wait: 5m}
    deliver: {forge: tea, repo: %s}
`, gs.URL, tokenVar, secretVar, r.CloneURL, sample.FixCommand+`; echo "attempt $OUTERLOOP_ATTEMPT" >> NOTES.md`, r.Slug)
	cfgPath := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(cfgPath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseConfig([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, cfgPath)
	env := append(os.Environ(), tokenVar+"="+gs.Token())

	// This process is the deployment's serve: the queue and POST /hooks/{forge}.
	getenv := func(k string) string {
		switch k {
		case tokenVar:
			return gs.Token()
		case secretVar:
			return secret
		}
		return ""
	}
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: c.env.Prefix, Queue: c.env.Queue,
		Workdir: t.TempDir(), Getenv: getenv, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	handler := a.Hooks(nil, nil)
	statuses := make(chan int, 16) // the answers to the Gitea's status deliveries
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if req.Header.Get("X-Gitea-Event-Type") == "status" {
			select {
			case statuses <- rec.Code:
			default:
			}
		}
	}))
	t.Cleanup(hooks.Close)
	gs.CreateHook(t, r.Slug, hooks.URL+"/hooks/tea", secret, []string{"status", "pull_request", "pull_request_review", "issue_comment"})

	w1, _ := c.startEnv(env, "--workdir", t.TempDir(), "worker", "--concurrency", "2", "--id", "w1")
	it, err := a.Queue.Submit(context.Background(), scheduler.Request{Template: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	it, err = a.Store.WaitFor(ctx, it.ID, func(it *workitems.Item) bool { return it.Wait != nil || it.State.Terminal() })
	if err != nil || it.State != workitems.StateWaiting {
		t.Fatalf("the item must wait for CI: %v %+v", err, it)
	}
	sha := it.Wait.SHA

	if err := w1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w1.Wait()
	gs.PostStatus(t, r, sha, "test", "success", "ok", gs.URL+"/ci/"+sha)
	// The webhook queues the wake; with no worker it waits in the queue.
	select {
	case code := <-statuses:
		if code != http.StatusOK {
			t.Fatalf("the status delivery was answered %d", code)
		}
	case <-ctx.Done():
		t.Fatal("the Gitea delivered no status")
	}
	now, err := a.Store.Get(ctx, it.ID)
	if err != nil || now.State != workitems.StateWaiting {
		t.Fatalf("with no worker the item changed: %v %s", err, now.State)
	}
	if _, err := a.Inspector().GetTaskInfo(workitems.UrgentQueue(c.env.Queue), workitems.WakeTaskID(it.ID, now.Wait.Seq)); err != nil {
		t.Fatalf("the status's webhook queued no wake: %v", err)
	}

	c.startEnv(env, "--workdir", t.TempDir(), "worker", "--concurrency", "2", "--id", "w2")
	done := awaitState(t, a.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if done.State != workitems.StateClosed || len(done.Attempts) != 1 || done.Delivery.PushedSHA != sha ||
		len(done.Delivery.Checks) != 1 || done.Delivery.Checks[0].State != workitems.CheckSuccess {
		t.Fatalf("want closed in one attempt on CI green: %s %+v %+v", done.State, done.Delivery, done.Decisions)
	}
	evs, err := a.Store.Events(context.Background(), it.ID, "", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var by []string
	for _, e := range evs {
		if e.Type == workitems.EventWoken {
			by = append(by, e.Data["by"])
		}
	}
	if len(by) == 0 || strings.Trim(strings.ReplaceAll(strings.Join(by, " "), "webhook", ""), " ") != "" {
		t.Fatalf("woken by %v, want webhooks only", by)
	}
}
