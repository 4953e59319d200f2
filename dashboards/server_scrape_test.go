package dashboards

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/internal/app"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/metrics"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// TestRunningServerExportsEveryMetricTheDashboardsUse runs a small real workload — a script item
// that closes, one that escalates, an agent item against a local model server, cron ticks of
// which one is skipped for max_open — through the wired system on the real Redis, then scrapes
// /metrics as `serve` serves it and checks every name the dashboards and rules use, asynq's
// included.
func TestRunningServerExportsEveryMetricTheDashboardsUse(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":    "module sample\n\ngo 1.26\n",
		"a.go":      "package sample\n\n// One is 1.\nfunc One() int { return 1 }\n",
		"a_test.go": "package sample\n\nimport \"testing\"\n\nfunc TestOne(t *testing.T) {\n\tif One() != 1 {\n\t\tt.Fatal(\"not one\")\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := modeltest.NewResponsesServer(t)
	// The notifications' receiver: the failed item's notification is delivered to it.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(hook.Close)
	// One transient error (retried), one tool call, one answer: model latency, model errors and
	// tool-call spend all get series.
	srv.Enqueue(modeltest.ServerError(),
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c1", Name: "read_file", Arguments: `{"path":"a.go"}`}),
		modeltest.Text("nothing to change"))
	cfg, err := config.ParseConfig(fmt.Appendf(nil, `
defaults:
  budget: {wall_time: 5m, verify_reserve: 1m, cost_usd: 2}
  item_budget: {cost_usd: 5}
providers:
  local: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s, prices: {input_per_mtok: 1, output_per_mtok: 2}}
templates:
  - {name: ok, repo: %[4]s, goal: pass, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["go test -json ./..."]}}
  - {name: hopeless, repo: %[4]s, max_attempts: 1, goal: fail, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["false"]}}
  - {name: agent, repo: %[4]s, goal: look, loop: {kind: agent, provider: local}, done_check: {commands: ["go test -json ./..."]}}
  - {name: ticker, schedule: "* * * * *", max_open: 1, daily_cost_cap_usd: 10, goal: tick, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}
notify:
  sinks:
    hook: {kind: webhook, url: %[5]s, secret_env: OUTERLOOP_TEST_SCRAPE_SECRET}
`, srv.URL, modeltest.KeyEnv, modeltest.Model, repo, hook.URL))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	var m *metrics.Metrics
	agent := agentloop.New(agentloop.WithProviderFactory(func(pc config.ProviderConfig, name string) (model.Provider, error) {
		p, err := model.New(pc, name, srv.Getenv, nil)
		return model.Instrument(p, m.ModelRequest), err
	}))
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue,
		Workdir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Loops: map[workitems.LoopKind]worker.InnerLoop{"agent": agent},
		Getenv: func(k string) string {
			if k == "OUTERLOOP_TEST_SCRAPE_SECRET" {
				return "scrape-secret"
			}
			return os.Getenv(k)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	m = a.Metrics
	if err := a.Metrics.RegisterQueues(a.Inspector()); err != nil {
		t.Fatal(err)
	}
	// As serve does: the notification dispatcher runs beside the worker.
	nd, err := a.Dispatcher("scrape")
	if err != nil || nd == nil {
		t.Fatalf("dispatcher: %v %v", nd, err)
	}
	nd.Start()
	t.Cleanup(nd.Shutdown)
	w := a.Worker(3, "scrape")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"ok", "hopeless", "agent"} {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	// Cron ticks through a queue nobody works on: the first tick's item stays open, so the
	// second is skipped for max_open; the tick before the start counts as a misfire.
	client := asynq.NewClient(a.AsynqOpt)
	t.Cleanup(func() { _ = client.Close() })
	idleQueue := scheduler.NewQueue(a.Store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue + "-idle"})
	t.Cleanup(func() { redistest.DeleteMatching(context.Background(), env.Client, "asynq:{"+env.Queue+"-idle}*") })
	clock := fakeclock.New(time.Now().Truncate(time.Minute).Add(30 * time.Second))
	ticks := make(chan scheduler.TickResult, 10)
	sched, err := scheduler.New(idleQueue, scheduler.Options{Clock: clock, Observer: a.Metrics, OnTick: func(r scheduler.TickResult) { ticks <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sched.Start(ctx)
	t.Cleanup(sched.Shutdown)
	var outcomes []string
	for range 2 {
		clock.BlockUntil(1, nil)
		clock.Advance(time.Minute)
		for r := range ticks {
			outcomes = append(outcomes, string(r.Outcome))
			if r.Outcome != "misfire_dropped" {
				break
			}
		}
	}
	if !slices.Contains(outcomes, "created") || !slices.Contains(outcomes, "skipped_max_open") {
		t.Fatalf("tick outcomes %v", outcomes)
	}
	for _, id := range ids {
		waitSettled(t, a.Store, id)
	}
	checkMetricNamesExported(t, a.Metrics.Handler())
	names := scrapeNames(t, a.Metrics.Handler())
	used := usedMetricNames(append(dashboardExpressions(t), ruleExpressions(t)...))
	for name, where := range used {
		if slices.Contains(asynqExporterNames, name) && !names[name] && isGauge(name) {
			t.Errorf("%s (used in %s) is not exported by the running server", name, where[0])
		}
	}
}

// isGauge reports whether an asynq exporter series is present as soon as a queue exists (its
// counters appear only once tasks were processed or failed in the current day).
func isGauge(name string) bool {
	return name == "asynq_queue_size" || name == "asynq_queue_latency_seconds" || name == "asynq_tasks_enqueued_total" ||
		name == "asynq_queue_paused_total" || name == "asynq_queue_memory_usage_approx_bytes"
}

func waitSettled(t *testing.T, s *itemstore.Store, id string) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	if it, err := s.WaitFor(ctx, id, itemstore.InState(workitems.StateClosed, workitems.StateEscalated)); err != nil {
		t.Fatalf("%s did not settle: %v (%+v)", id, err, it)
	}
}
