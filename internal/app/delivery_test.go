package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"outerloop/api"
	"outerloop/delivery"
	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// seen is what a delivery left in its workspace, read right after Deliver (the workspace may be
// cleaned up once the item ends).
type seen struct {
	head, parent, message, author string
	diff                          string // git diff base HEAD
	commits                       int    // commits between base and HEAD
}

// watchingDeliverer runs the real delivery and records the workspace it left; failNext makes
// the next call fail transiently after delivering, like a worker that died before recording.
type watchingDeliverer struct {
	t        *testing.T
	inner    worker.Deliverer
	mu       sync.Mutex
	byKey    map[string]seen
	failNext bool
}

func (w *watchingDeliverer) Deliver(ctx context.Context, in delivery.Request) (delivery.Result, error) {
	res, err := w.inner.Deliver(ctx, in)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && res.Delivery != nil && res.Delivery.Commit != "" {
		g := func(args ...string) string {
			// The worker's own git directory of the workspace holds the delivery commit.
			if in.GitDir == "" {
				w.t.Errorf("the delivery of %s got no git directory of the worker's", in.Item.ID)
			}
			out, err := exec.Command("git", append([]string{"--git-dir=" + in.GitDir, "--work-tree=" + in.Workspace}, args...)...).Output()
			if err != nil {
				w.t.Errorf("git %v: %v", args, err)
			}
			return string(out)
		}
		var n int
		fmt.Sscan(g("rev-list", "--count", in.Base+"..HEAD"), &n)
		w.byKey[workitems.TaskID(in.Item.ID, in.Attempt)] = seen{head: strings.TrimSpace(g("rev-parse", "HEAD")),
			parent: strings.TrimSpace(g("rev-parse", "HEAD^")), message: g("log", "-1", "--format=%B"),
			author: strings.TrimSpace(g("log", "-1", "--format=%an <%ae>")), diff: g("diff", in.Base, "HEAD"), commits: n}
	}
	if err == nil && w.failNext {
		w.failNext = false
		return delivery.Result{}, workitems.Classify(workitems.ClassTransient, errors.New("test: the worker died after delivering"))
	}
	return res, err
}

func (w *watchingDeliverer) Merge(ctx context.Context, in delivery.Merge) (workitems.Delivery, error) {
	return w.inner.Merge(ctx, in)
}

func (w *watchingDeliverer) Followup(ctx context.Context, in delivery.Followup) {
	w.inner.Followup(ctx, in)
}

func (w *watchingDeliverer) Ready(ctx context.Context, in delivery.Ready) (workitems.Delivery, error) {
	return w.inner.Ready(ctx, in)
}

func (w *watchingDeliverer) Cleanup(ctx context.Context, in delivery.Cleanup) error {
	return w.inner.Cleanup(ctx, in)
}

func (w *watchingDeliverer) get(id string, n int) seen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byKey[workitems.TaskID(id, n)]
}

// watchedHandler is the app's handler with the watching deliverer around its deliverer.
func (s *sys) watchedHandler(t *testing.T, id string) (*worker.Handler, *watchingDeliverer) {
	t.Helper()
	w := &watchingDeliverer{t: t, inner: s.Deliverer, byKey: map[string]seen{}}
	h := worker.NewHandler(worker.HandlerOptions{Store: s.Store, Config: s.Config, Loops: s.Loops,
		Verifier: s.Verifier, Evidence: s.Judge, Enqueuer: s.Queue, Deliverer: w,
		Workspaces: s.Workspaces, Logger: testLogger(t), WorkerID: id})
	return h, w
}

func (s *sys) startHandler(t *testing.T, h *worker.Handler) *worker.Server {
	t.Helper()
	srv := worker.NewServer(s.AsynqOpt, h, worker.ServerOptions{Queue: s.QueueName(), Concurrency: 2, Logger: testLogger(t)})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv
}

func deliverySteps(t *testing.T, st *itemstore.Store, id string, attempt int) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id, "", 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == workitems.EventDelivery && e.Attempt == attempt {
			out = append(out, e.Data["step"])
		}
	}
	return out
}

// TestAGreenChangeIsOneCommitOnTheBaseAndItsPatchIsServedAfterARestart runs the "fix" template
// (attempt 1 fails, attempt 2 fixes) on a real worker, then opens the system again with the work
// directory gone: the patch and the delivery record are in Redis.
func TestAGreenChangeIsOneCommitOnTheBaseAndItsPatchIsServedAfterARestart(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	s := open(t, testConfig(t, repo, ""), workitems.SystemClock{})
	h, watch := s.watchedHandler(t, "deliver-1")
	srv := s.startHandler(t, h)
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "fix"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 2 {
		t.Fatalf("want closed after 2 attempts: %s %d", it.State, len(it.Attempts))
	}
	// Attempt 1 failed its tests: nothing committed, no delivery.
	if it.Attempts[0].Delivery != nil || watch.get(it.ID, 1) != (seen{}) || len(deliverySteps(t, s.Store, it.ID, 1)) != 0 {
		t.Fatalf("a failing attempt must not be delivered: %+v", it.Attempts[0].Delivery)
	}
	d := it.Delivery
	ws := watch.get(it.ID, 2)
	if d == nil || it.Attempts[1].Delivery == nil || d.Outcome != workitems.DeliveryPatched || d.Mode != workitems.DeliverPatch || d.Attempt != 2 {
		t.Fatalf("delivery %+v", d)
	}
	if ws.commits != 1 || ws.head != d.Commit || ws.parent != d.Base || ws.author != "outerloop <outerloop@localhost>" {
		t.Fatalf("one commit on the base: %+v vs %+v", ws, d)
	}
	for _, want := range []string{"make TestAdd pass\n", "Outerloop-Item: " + it.ID + "\n", "Outerloop-Attempt: 2"} {
		if !strings.Contains(ws.message, want) {
			t.Errorf("commit message lacks %q:\n%s", want, ws.message)
		}
	}
	patch, err := s.Store.Patch(ctx, it.ID, 2)
	if err != nil || string(patch) != ws.diff || !strings.Contains(ws.diff, "+func Add(a, b int) int { return a + b }") {
		t.Fatalf("the stored patch must be git diff base commit: %v\n%s\nwant\n%s", err, patch, ws.diff)
	}
	if d.FileCount != 1 || d.Files[0].Path != "calc.go" || d.PatchBytes != int64(len(patch)) {
		t.Fatalf("record %+v", d)
	}
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 2)); steps != "[committed recorded]" {
		t.Fatalf("delivery events %s", steps)
	}

	// A restart on another host: the worker is gone, its work directory too.
	srv.Shutdown(ctx)
	if err := os.RemoveAll(s.Workdir); err != nil {
		t.Fatal(err)
	}
	again, err := app.Open(ctx, app.Options{Config: s.Config, RedisURL: redistest.URL(), Prefix: s.env.Prefix,
		Queue: s.env.Queue, Workdir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Close)
	later, err := again.Store.Get(ctx, it.ID)
	if err != nil || later.Delivery == nil || later.Delivery.Commit != d.Commit {
		t.Fatalf("the delivery record after a restart: %v %+v", err, later)
	}
	// GET /api/items/{id}/diff serves exactly git diff base commit.
	srvAPI := httptest.NewServer(api.New(api.Options{Queue: again.Queue, Logger: testLogger(t)}).Handler())
	t.Cleanup(srvAPI.Close)
	resp, err := http.Get(srvAPI.URL + "/api/items/" + it.ID + "/diff")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != ws.diff || resp.Header.Get("Content-Type") != "text/x-diff; charset=utf-8" {
		t.Fatalf("GET diff after a restart: %d %q\nwant\n%s", resp.StatusCode, body, ws.diff)
	}
}

func TestAPassingAttemptThatChangedNothingClosesUnchanged(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	if err := sample.Fix(repo); err != nil { // already right: nothing to do
		t.Fatal(err)
	}
	s := open(t, testConfig(t, repo, `  - name: look
    repo: `+repo+`
    goal: check that Add adds
    loop: {kind: script, commands: ["go vet ./..."]}
    done_check: {commands: ["go test -json ./..."]}
`), workitems.SystemClock{})
	h, watch := s.watchedHandler(t, "nochange")
	s.startHandler(t, h)
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "look"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	last := it.Decisions[len(it.Decisions)-1]
	if it.State != workitems.StateClosed || last.Rule != workitems.RuleNoChange || it.Delivery.Outcome != workitems.DeliveryUnchanged ||
		it.Delivery.Commit != "" {
		t.Fatalf("want closed unchanged: %s %+v %+v", it.State, last, it.Delivery)
	}
	if watch.get(it.ID, 1) != (seen{}) {
		t.Fatal("nothing may be committed")
	}
	if _, err := s.Store.Patch(context.Background(), it.ID, 1); !errors.Is(err, itemstore.ErrNoPatch) {
		t.Fatalf("no patch for an unchanged item: %v", err)
	}
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[unchanged recorded]" {
		t.Fatalf("delivery events %s", steps)
	}
}

// TestAResumedVerifyingAttemptReusesItsCommit: the worker delivers, then dies before it records
// the decision (a transient error here); the task runs again and finds the commit made.
func TestAResumedVerifyingAttemptReusesItsCommit(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	s := open(t, testConfig(t, repo, `  - name: fix-now
    repo: `+repo+`
    goal: make TestAdd pass
    loop: {kind: script, commands: [`+fmt.Sprintf("%q", sample.FixCommand)+`]}
    done_check: {commands: ["go test -json ./..."]}
`), workitems.SystemClock{})
	h, watch := s.watchedHandler(t, "resume")
	watch.failNext = true
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "fix-now"})
	if err != nil {
		t.Fatal(err)
	}
	// No server: the handler is called as asynq would, twice.
	if err := h.Process(ctx, it.ID, 1); err == nil || !strings.Contains(err.Error(), "died after delivering") {
		t.Fatalf("first run: %v", err)
	}
	mid, _ := s.Store.Get(ctx, it.ID)
	first := watch.get(it.ID, 1)
	if mid.State != workitems.StateVerifying || mid.Attempt != 1 || first.head == "" {
		t.Fatalf("a transient delivery error keeps the item verifying without spending an attempt: %s attempt %d", mid.State, mid.Attempt)
	}
	if err := h.Process(ctx, it.ID, 1); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Store.Get(ctx, it.ID)
	second := watch.get(it.ID, 1)
	if done.State != workitems.StateClosed || len(done.Attempts) != 1 || done.Attempts[0].Resumes != 1 {
		t.Fatalf("closed in one resumed attempt: %s %d", done.State, len(done.Attempts))
	}
	if second.head != first.head || second.commits != 1 || done.Delivery.Commit != first.head {
		t.Fatalf("the resumed attempt must reuse the commit: %s vs %s (%d commits)", second.head, first.head, second.commits)
	}
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed reused recorded]" {
		t.Fatalf("delivery events %s", steps)
	}
}

// publisherOnce fails its first publication transiently, then opens a pull request.
type publisherOnce struct {
	mu    sync.Mutex
	calls int
}

func (p *publisherOnce) Publish(_ context.Context, pub delivery.Publication) (delivery.Published, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls == 1 {
		return delivery.Published{}, workitems.Classify(workitems.ClassTransient, errors.New("forge: connection reset"))
	}
	d := pub.Delivery
	d.Outcome, d.Branch, d.PushedSHA = workitems.DeliveryPROpened, "outerloop/"+pub.Template.Name, d.Commit
	d.PR = &workitems.PullRequest{Number: 1, URL: "https://forge.example/acme/calc/pulls/1", State: workitems.PROpen}
	return delivery.Published{Delivery: d}, nil
}

func (p *publisherOnce) Followup(context.Context, delivery.Followup) error { return nil }

func (p *publisherOnce) Withdraw(context.Context, delivery.Withdrawal) (workitems.Delivery, error) {
	return workitems.Delivery{}, nil
}

func (p *publisherOnce) Ready(_ context.Context, r delivery.Ready) (workitems.Delivery, error) {
	return r.Delivery, nil
}

func (p *publisherOnce) Cleanup(context.Context, delivery.Cleanup) error { return nil }

func (p *publisherOnce) Merge(_ context.Context, m delivery.Merge) (workitems.Delivery, error) {
	return m.Delivery, errors.New("test: no merges here")
}

func TestForgeDelivery(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	cfg := testConfig(t, repo, `  - name: pr
    repo: `+repo+`
    goal: make TestAdd pass
    loop: {kind: script, commands: [`+fmt.Sprintf("%q", sample.FixCommand)+`]}
    done_check: {commands: ["go test -json ./..."]}
`)
	// The mode is set here, not in YAML: the forge config (forges:, deliver.forge) may refuse a
	// pull_request mode without a forge, and this is about a worker without one.
	tmpl, _ := cfg.Template("pr")
	tmpl.Deliver.Mode = workitems.DeliverPullRequest
	t.Run("without a forge the item escalates with the cause", func(t *testing.T) {
		t.Parallel()
		s := open(t, cfg, workitems.SystemClock{})
		s.startWorker(t, "no-forge")
		it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "pr"})
		if err != nil {
			t.Fatal(err)
		}
		it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
		if it.State != workitems.StateEscalated || len(it.Attempts) != 1 || it.Escalation.Reason != string(workitems.RuleDeliveryFailed) ||
			!strings.Contains(it.Escalation.Summary, "forge delivery not configured") {
			t.Fatalf("want escalated at once with the cause: %s %+v", it.State, it.Escalation)
		}
		if it.Delivery.Outcome != workitems.DeliveryFailed || it.Delivery.ErrorClass != workitems.ClassInvalidInput || it.Delivery.Commit == "" {
			t.Fatalf("delivery %+v", it.Delivery)
		}
		if p, err := s.Store.Patch(context.Background(), it.ID, 1); err != nil || !strings.Contains(string(p), "a + b") {
			t.Fatalf("the undelivered patch is kept for the person: %v", err)
		}
		esc, _ := s.Store.Escalated(context.Background(), 0, 0)
		if len(esc) != 1 || esc[0].ID != it.ID {
			t.Fatal("the item must be in the escalation inbox")
		}
		if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed publish failed recorded]" {
			t.Fatalf("delivery events %s", steps)
		}
	})
	t.Run("a transient forge error costs no attempt", func(t *testing.T) {
		t.Parallel()
		s := openWith(t, cfg, func(o *app.Options) { o.Publisher = &publisherOnce{} })
		ctx := context.Background()
		it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "pr"})
		if err != nil {
			t.Fatal(err)
		}
		h := s.Handler("flaky-forge")
		if err := h.Process(ctx, it.ID, 1); workitems.ClassOf(err) != workitems.ClassTransient {
			t.Fatalf("first run: %v", err)
		}
		if mid, _ := s.Store.Get(ctx, it.ID); mid.State != workitems.StateVerifying || mid.Attempt != 1 || mid.Delivery != nil {
			t.Fatalf("after a transient error: %s attempt %d", mid.State, mid.Attempt)
		}
		if err := h.Process(ctx, it.ID, 1); err != nil {
			t.Fatal(err)
		}
		done, _ := s.Store.Get(ctx, it.ID)
		if done.State != workitems.StateClosed || done.Attempt != 1 || done.Delivery.Outcome != workitems.DeliveryPROpened ||
			done.Delivery.PR.Number != 1 || done.Delivery.PushedSHA != done.Delivery.Commit {
			t.Fatalf("closed with the pull request: %s %+v", done.State, done.Delivery)
		}
		if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed publish retrying reused publish recorded]" {
			t.Fatalf("delivery events %s", steps)
		}
	})
}

// openWith is open with options of the test's choosing.

func TestTwoTicksWithTheSameResultDeliverOnce(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	s := open(t, testConfig(t, repo, `  - name: bump
    repo: `+repo+`
    goal: make TestAdd pass
    loop: {kind: script, commands: [`+fmt.Sprintf("%q", sample.FixCommand)+`]}
    done_check: {commands: ["go test -json ./..."]}
`), workitems.SystemClock{})
	s.startWorker(t, "ticks")
	ctx := context.Background()
	var items []*workitems.Item
	for range 2 {
		it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "bump"})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated))
	}
	first, second := items[0], items[1]
	if first.Delivery.Outcome != workitems.DeliveryPatched || second.State != workitems.StateClosed {
		t.Fatalf("first %+v, second %s", first.Delivery, second.State)
	}
	d := second.Delivery
	if d.Outcome != workitems.DeliveryUnchanged || d.SameAs == nil || d.SameAs.Item != first.ID || d.SameAs.Commit != first.Delivery.Commit ||
		d.Tree != first.Delivery.Tree {
		t.Fatalf("the second tick's identical result must close unchanged, linking the first: %+v", d)
	}
	if last := second.Decisions[len(second.Decisions)-1]; last.Rule != workitems.RuleAlreadyDelivered || !strings.Contains(last.Reasons[0], first.ID) {
		t.Fatalf("decision %+v", last)
	}
}

func TestAnOversizedPatchIsKeptTruncatedAndMarked(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	cfg := testConfig(t, repo, `  - name: generate
    repo: `+repo+`
    goal: generate a big table
    loop: {kind: script, commands: ["seq 1 20000 > table.txt"]}
    done_check: {commands: ["go test -json ./..."]}
`)
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	s := openWith(t, cfg, func(o *app.Options) { o.MaxPatchBytes = 8 << 10 })
	s.startWorker(t, "big")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "generate"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	d := it.Delivery
	if it.State != workitems.StateClosed || !d.PatchTruncated || d.PatchBytes < 100<<10 || d.Added != 20000 {
		t.Fatalf("%s %+v", it.State, d)
	}
	p, err := s.Store.Patch(context.Background(), it.ID, 1)
	if err != nil || len(p) > 9<<10 || !strings.Contains(string(p), "# outerloop: patch truncated:") || !strings.HasPrefix(string(p), "diff --git a/table.txt b/table.txt") {
		t.Fatalf("stored patch (%d bytes): %v", len(p), err)
	}
}
