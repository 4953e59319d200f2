package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
)

// fleetApp opens an app whose fleet admitter runs often, with loops replacing the script kind.
func fleetApp(t *testing.T, y string, loop worker.InnerLoop, getenv func(string) string) *app.App {
	t.Helper()
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Getenv: getenv,
		Loops: map[workitems.LoopKind]worker.InnerLoop{"script": loop}, FleetEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// A fleet of five repositories with concurrency 2 on a worker of four slots: two run, three
// wait in line holding no worker, each goes as one ends, in order, and all close.
func TestAFleetRunsAtMostItsConcurrencyAcrossItsRepositories(t *testing.T) {
	t.Parallel()
	var repos []string
	for range 5 {
		repos = append(repos, sampleRepo(t))
	}
	var (
		mu       sync.Mutex
		inflight int
		most     int
		order    []string
	)
	started := make(chan string, 10)
	release := make(chan struct{})
	loop := worker.InnerLoopFunc(func(ctx context.Context, at *worker.Attempt) workitems.Exit {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		order = append(order, at.Item.Repo)
		mu.Unlock()
		started <- at.Item.ID
		select {
		case <-release:
		case <-ctx.Done():
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		return workitems.Exit{Reason: workitems.ExitCompleted}
	})
	a := fleetApp(t, fmt.Sprintf(`
defaults: {budget: {wall_time: 2m, verify_reserve: 30s}}
templates:
  - name: deps
    repos: [%s]
    goal: bump
    fleet: {concurrency: 2}
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`, strings.Join(repos, ", ")), loop, nil)
	ctx := context.Background()
	var ids []string
	for _, r := range repos {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "deps", Repo: r})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	startAppWorker(t, a, 4, "w")
	next := func() string {
		t.Helper()
		select {
		case id := <-started:
			return id
		case <-testwait.After(t):
			t.Fatal("no attempt started")
			return ""
		}
	}
	first := []string{next(), next()}
	// Two run; the other three wait in line, with no task taking a slot.
	u, err := a.Fleet.Usage(ctx, "deps")
	if err != nil || u.Running != 2 || u.Held != 3 {
		t.Fatalf("usage %+v %v", u, err)
	}
	info, err := a.Inspector().GetQueueInfo(a.QueueName())
	if err != nil || info.Pending != 0 {
		t.Fatalf("queue %+v %v: held items must have no task", info, err)
	}
	for range 3 {
		release <- struct{}{}
		first = append(first, next())
	}
	close(release)
	for _, id := range ids {
		if it := awaitState(t, a.Store, id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed); it.State != workitems.StateClosed {
			t.Fatalf("%s ended %s", id, it.State)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Fatalf("%d attempts ran at once, want at most (and at full load exactly) 2", most)
	}
	// Held items went in the order they were made.
	for i, r := range order[2:] {
		if r != repos[i+2] {
			t.Fatalf("started %v, want the held ones in order %v", order, repos[2:])
		}
	}
}

// Three items in a row that end escalated (across repositories) pause the fleet template,
// recorded as outerloop's pause, and a webhook sink is told; a success between resets the count.
func TestConsecutiveFailuresPauseTheFleetAndTellTheSink(t *testing.T) {
	t.Parallel()
	got := make(chan []byte, 20)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
	}))
	defer recv.Close()
	var repos []string
	for range 5 {
		repos = append(repos, sampleRepo(t))
	}
	good := repos[1]
	// The repository that succeeds is the second; every other one fails its done check.
	loop := worker.InnerLoopFunc(func(ctx context.Context, at *worker.Attempt) workitems.Exit {
		if at.Item.Repo == good {
			return workitems.Exit{Reason: workitems.ExitCompleted}
		}
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvalidInput, Message: "cannot"}
	})
	a := fleetApp(t, fmt.Sprintf(`
defaults: {budget: {wall_time: 2m, verify_reserve: 30s}, max_attempts: 1}
notify:
  sinks:
    hook: {kind: webhook, url: %q, secret_env: OL_FLEET_SECRET}
templates:
  - name: deps
    schedule: "0 3 * * *"
    repos: [%s]
    goal: bump
    fleet: {concurrency: 1, pause_after_failures: 3}
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`, recv.URL, strings.Join(repos, ", ")), loop, func(k string) string {
		if k == "OL_FLEET_SECRET" {
			return "s"
		}
		return ""
	})
	ctx := context.Background()
	startAppWorker(t, a, 1, "w")
	d, err := a.Dispatcher("w")
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	defer d.Shutdown()
	// fail, close, fail, fail: two in a row — not paused.
	for _, r := range repos[:4] {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "deps", Repo: r})
		if err != nil {
			t.Fatal(err)
		}
		awaitState(t, a.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	}
	if p, err := a.Queue.PauseOf(ctx, "deps"); err != nil || p != nil {
		t.Fatalf("paused after two failures in a row: %+v %v", p, err)
	}
	// A third in a row: the breaker pauses the template.
	it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "deps", Repo: repos[4]})
	if err != nil {
		t.Fatal(err)
	}
	awaitState(t, a.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	var body []byte
	for body == nil {
		select {
		case b := <-got:
			if strings.Contains(string(b), `"fleet_paused"`) {
				body = b
			}
		case <-testwait.After(t):
			t.Fatal("the sink was not told of the pause")
		}
	}
	var n struct {
		Event, Template, Headline string
	}
	if err := json.Unmarshal(body, &n); err != nil || n.Template != "deps" || !strings.Contains(n.Headline, "3 items in a row") {
		t.Fatalf("notification %s (%v)", body, err)
	}
	p, err := a.Queue.PauseOf(ctx, "deps")
	if err != nil || p == nil || p.Actor != "outerloop" || !strings.Contains(p.Reason, "pause_after_failures: 3") {
		t.Fatalf("pause %+v %v", p, err)
	}
	// Paused, the fleet starts nothing: a person's item waits in line, holding no worker, and
	// goes once the template is resumed.
	it, err = a.Queue.Submit(ctx, scheduler.Request{Template: "deps", Repo: good})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := testwait.Deadline(t); ; time.Sleep(20 * time.Millisecond) {
		u, err := a.Fleet.Usage(ctx, "deps")
		if err != nil {
			t.Fatal(err)
		}
		if u.Held == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the paused fleet's item is not in line: %+v", u)
		}
	}
	if now, _ := a.Store.Get(ctx, it.ID); now.State != workitems.StateQueued {
		t.Fatalf("a paused fleet's item is %s, want queued (in line)", now.State)
	}
	if _, err := a.Queue.Resume(ctx, "deps", "alice"); err != nil {
		t.Fatal(err)
	}
	if it = awaitState(t, a.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed); it.State != workitems.StateClosed {
		t.Fatalf("after the resume the item ended %s", it.State)
	}
}
