package dashboards

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/metrics"
	"outerloop/notify"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// workloadMetricsHandler returns the /metrics handler of a metrics.Metrics after a small
// workload that calls every recording method, with templates and a store-stats source set.
// When a test server of the whole process exists, point checkMetricNamesExported at it instead.
func workloadMetricsHandler(t *testing.T) http.Handler {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	m := metrics.New(metrics.WithClock(clock))
	m.SetConfig(&config.Config{
		Providers: map[string]config.ProviderConfig{"openai": {Kind: "openai-responses", Model: "gpt-5-codex"}},
		Templates: []config.Template{{
			Name:            "nightly",
			Schedule:        "CRON_TZ=UTC 0 3 * * *",
			DailyCostCapUSD: 20,
			Loop:            config.Loop{Kind: "agent", Provider: "openai"},
			Budget:          workitems.Budget{WallTime: workitems.Duration(30 * time.Minute), CostUSD: 3, Steps: 100},
			ItemBudget:      workitems.Budget{CostUSD: 15},
		}},
	})
	m.SetStatsSource(func(context.Context) (workitems.Stats, error) {
		return workitems.Stats{
			Items:              map[string]map[workitems.State]int{"nightly": {workitems.StateEscalated: 1}},
			OpenEscalations:    1,
			OldestEscalationAt: clock.Now().Add(-time.Hour),
			DailyCostUSD:       map[string]float64{"nightly": 1.5},
			LastClosedAt:       map[string]time.Time{"nightly": clock.Now().Add(-2 * time.Hour)},
			Waiting:            map[workitems.WaitKind]int64{workitems.WaitReview: 1},
			FirstPollAt:        clock.Now().Add(-time.Minute),
		}, nil
	})
	const item = "nightly@20261125T030000Z"
	m.AttemptStarted("nightly", "script")
	m.AttemptFinished("nightly", "script", workitems.ExitFailed, 5*time.Minute, 4, item)
	spend := workitems.Spend{
		WallTime: workitems.Duration(5 * time.Minute), ModelCalls: 2, ToolCalls: 3,
		InputTokens: 100, CachedInputTokens: 10, OutputTokens: 20, CostUSD: 0.1,
	}
	m.AddSpend("nightly", "script", spend, item)
	m.AddModelSpend("nightly", "openai", "", spend, item)
	m.SetRunningCost("nightly", "agent", "nightly@20261126T030000Z", 0.05)
	m.Decision("nightly", workitems.ActorVerifier, workitems.OutcomeRetry, "tests_failed", item)
	m.Delivery("nightly", workitems.DeliveryMerged, item)
	m.PullRequestAction("nightly", workitems.StepHeld)
	m.CheckpointWrite(2 * time.Millisecond)
	m.SchedulerTick("nightly")
	m.SchedulerSkip("nightly", metrics.SkipDailyCap)
	m.SchedulerMisfire("nightly", 1)
	m.ModelRequest("openai", time.Second, string(workitems.ClassTransient))
	m.Woken(workitems.WaitCI, workitems.WakeWebhook, 3*time.Minute)
	m.Polled("tea", metrics.PollPending)
	metrics.NewWebhooks(m, []string{"tea"})
	metrics.NewNotifications(m, &config.Config{Notify: config.Notify{Sinks: map[string]config.NotifySink{
		"hook": {Kind: workitems.SinkWebhook}}}}).Notification("hook", notify.ResultDead)
	return m.Handler()
}

// scrape GETs /metrics from h through a real HTTP server and returns the text exposition.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	return string(b)
}
