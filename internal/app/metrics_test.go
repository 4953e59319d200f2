package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"outerloop/internal/app"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testlog"
	"outerloop/lib/testwait"
	"outerloop/metrics"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// scrapeValues GETs /metrics over HTTP and returns "name{k="v",...}" (labels sorted by name) →
// value for gauges and counters.
func scrapeValues(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// A paused Redis (SIGSTOP: connections open, no answers) must neither blank the budget gauges nor
// hold the scrape up; the error is logged through the app's logger, in its format.
func TestAPausedStoreKeepsTheBudgetGaugesWithTheirAge(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg, err := parseConfig([]byte(`
defaults:
  budget: {wall_time: 10m}
templates:
  - {name: capped, daily_cost_cap_usd: 1, goal: g, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	clock := fakeclock.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{Config: cfg, RedisURL: srv.URL(), Clock: clock, Workdir: t.TempDir(),
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Metrics: []metrics.Option{metrics.WithStatsTimeout(200 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Metrics.RegisterQueues(a.Inspector()); err != nil { // as serve does: it reads Redis too
		t.Fatal(err)
	}
	it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "capped"})
	if err != nil {
		t.Fatal(err)
	}
	fence, err := a.Store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Store.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 1.25}, "", false); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.Metrics.Handler())
	t.Cleanup(hs.Close)
	const cost = `outerloop_template_daily_cost_usd{template="capped"}`
	if s := scrapeValues(t, hs.URL); s[cost] != 1.25 || s["outerloop_stats_age_seconds"] != 0 {
		t.Fatalf("before the pause: cost %v age %v", s[cost], s["outerloop_stats_age_seconds"])
	}

	srv.Pause(t)
	clock.Advance(25 * time.Second)
	s := scrapeValues(t, hs.URL) // answers although Redis does not
	if s[cost] != 1.25 || s[`outerloop_template_daily_cost_cap_usd{template="capped"}`] != 1 {
		t.Errorf("during the pause: cost %v cap %v, want the last cost 1.25 and the cap 1", s[cost], s[`outerloop_template_daily_cost_cap_usd{template="capped"}`])
	}
	if s["outerloop_stats_age_seconds"] != 25 || s["outerloop_stats_errors_total"] < 1 {
		t.Errorf("during the pause: age %v errors %v, want 25 and at least 1", s["outerloop_stats_age_seconds"], s["outerloop_stats_errors_total"])
	}
	srv.Resume(t)

	deadline := testwait.Deadline(t)
	for scrapeValues(t, hs.URL)["outerloop_stats_age_seconds"] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stats did not become fresh after Redis resumed")
		}
	}

	// The stats error reached the app's logger, as JSON (--log-format json), like every line.
	found := false
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", sc.Text())
			continue
		}
		if rec["msg"] == "metrics: reading store stats" {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON log line for the stats error:\n%s", logs.String())
	}
}

// Spend is charged at every checkpoint: the daily cost the scheduler's cap reads, the spend
// counters and the running attempt's cost advance while the attempt runs, and its exit charges
// only what no checkpoint did.
func TestSpendAdvancesWithEveryCheckpoint(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig([]byte(`
defaults:
  budget: {wall_time: 10m, verify_reserve: 1m}
templates:
  - {name: spender, daily_cost_cap_usd: 0.6, goal: g, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	type seen struct{ daily, counter, running float64 }
	var (
		a        *app.App
		mu       sync.Mutex
		observed []seen
		capErr   error
	)
	const counter = `outerloop_spend_cost_usd_total{loop="script",template="spender"}`
	const running = `outerloop_running_attempts_cost_usd{loop="script",template="spender"}`
	var hs *httptest.Server
	loop := worker.InnerLoopFunc(func(ctx context.Context, at *worker.Attempt) workitems.Exit {
		for range 3 {
			_ = at.Meter.Add(workitems.Spend{CostUSD: 0.25, ModelCalls: 1})
			if err := at.Checkpoints.Save(ctx, []byte(`{}`)); err != nil {
				return workitems.Exit{Reason: workitems.ExitFailed, Message: err.Error()}
			}
			daily, _ := a.Store.DailyCost(ctx, "spender", time.Now())
			s := scrapeValues(t, hs.URL)
			mu.Lock()
			observed = append(observed, seen{daily, s[counter], s[running]})
			mu.Unlock()
		}
		// Past the cap while still running: the cap refuses the template's next tick now.
		_, err := a.Queue.Submit(ctx, scheduler.Request{Template: "spender", ID: "spender@tick",
			Origin: workitems.Origin{Kind: workitems.OriginCron, Actor: "scheduler"}})
		mu.Lock()
		capErr = err
		mu.Unlock()
		return workitems.Exit{Reason: workitems.ExitCompleted}
	})
	a, err = app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue,
		Workdir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Loops: map[workitems.LoopKind]worker.InnerLoop{"script": loop}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	hs = httptest.NewServer(a.Metrics.Handler())
	t.Cleanup(hs.Close)
	startAppWorker(t, a, 1, "spend")
	ctx := context.Background()
	it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "spender"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	it, err = a.Store.WaitFor(wctx, it.ID, itemstore.InState(workitems.StateClosed, workitems.StateEscalated))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, o := range observed {
		want := 0.25 * float64(i+1)
		if !nearly(o.daily, want) || !nearly(o.counter, want) || !nearly(o.running, want) {
			t.Errorf("after checkpoint %d: daily cost %v, counter %v, running %v; want %v each", i+1, o.daily, o.counter, o.running, want)
		}
	}
	if len(observed) != 3 {
		t.Fatalf("%d checkpoints observed", len(observed))
	}
	if !errors.Is(capErr, itemstore.ErrDailyCap) {
		t.Errorf("a tick while the attempt ran past the cap: %v, want ErrDailyCap", capErr)
	}
	daily, _ := a.Store.DailyCost(ctx, "spender", time.Now())
	s := scrapeValues(t, hs.URL)
	if !nearly(it.Spend.CostUSD, 0.75) || !nearly(daily, 0.75) || !nearly(s[counter], 0.75) || s[running] != 0 {
		t.Errorf("after the exit: item %v, daily %v, counter %v, running %v; want 0.75 charged once and nothing running",
			it.Spend.CostUSD, daily, s[counter], s[running])
	}
	if s[`outerloop_spend_model_calls_total{loop="script",template="spender"}`] != 3 {
		t.Errorf("model calls counted %v, want 3", s[`outerloop_spend_model_calls_total{loop="script",template="spender"}`])
	}
}

func nearly(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
