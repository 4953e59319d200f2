package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/metrics"
	"outerloop/workitems"
)

var statsNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func sampleStats() workitems.Stats {
	return workitems.Stats{
		Items: map[string]map[workitems.State]int{
			"nightly": {workitems.StateQueued: 2, workitems.StateEscalated: 1, workitems.StateClosed: 7},
		},
		OpenEscalations:    1,
		OldestEscalationAt: statsNow.Add(-90 * time.Minute),
		DailyCostUSD:       map[string]float64{"nightly": 4.5},
		LastClosedAt:       map[string]time.Time{"nightly": statsNow.Add(-time.Hour)},
	}
}

func fakeSource(s workitems.Stats, err error) func(context.Context) (workitems.Stats, error) {
	return func(ctx context.Context) (workitems.Stats, error) {
		if _, ok := ctx.Deadline(); !ok {
			return workitems.Stats{}, errors.New("stats source called without a deadline")
		}
		return s, err
	}
}

var statsNames = []string{
	"outerloop_items", "outerloop_escalations_open", "outerloop_escalation_oldest_age_seconds",
	"outerloop_template_daily_cost_usd", "outerloop_template_last_closed_timestamp_seconds",
	"outerloop_stats_errors_total",
}

func TestStatsAreReadOnScrape(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.WithClock(func() time.Time { return statsNow }))
	// "manual" is configured but has no items yet: it is exported with zeros.
	m.SetTemplates([]workitems.Template{{Name: "nightly"}, {Name: "manual"}})
	m.SetStatsSource(fakeSource(sampleStats(), nil))

	var want strings.Builder
	want.WriteString(`# HELP outerloop_escalation_oldest_age_seconds Age of the oldest open escalation (0 when none is open).
# TYPE outerloop_escalation_oldest_age_seconds gauge
outerloop_escalation_oldest_age_seconds 5400
# HELP outerloop_escalations_open Items waiting for a person.
# TYPE outerloop_escalations_open gauge
outerloop_escalations_open 1
# HELP outerloop_items Work items by template and state.
# TYPE outerloop_items gauge
`)
	for _, tmpl := range []string{"manual", "nightly"} {
		for _, st := range workitems.AllStates() {
			v := "0"
			if tmpl == "nightly" {
				v = map[workitems.State]string{workitems.StateQueued: "2", workitems.StateEscalated: "1", workitems.StateClosed: "7"}[st]
				if v == "" {
					v = "0"
				}
			}
			want.WriteString(`outerloop_items{state="` + string(st) + `",template="` + tmpl + `"} ` + v + "\n")
		}
	}
	want.WriteString(`# HELP outerloop_stats_errors_total Scrapes whose read of the store's aggregate view failed (its gauges were left out).
# TYPE outerloop_stats_errors_total counter
outerloop_stats_errors_total 0
# HELP outerloop_template_daily_cost_usd Cost spent today (UTC) per template in USD.
# TYPE outerloop_template_daily_cost_usd gauge
outerloop_template_daily_cost_usd{template="manual"} 0
outerloop_template_daily_cost_usd{template="nightly"} 4.5
# HELP outerloop_template_last_closed_timestamp_seconds Unix time of the last closed item per template (absent: never closed).
# TYPE outerloop_template_last_closed_timestamp_seconds gauge
outerloop_template_last_closed_timestamp_seconds{template="nightly"} ` + fmtFloat(float64(statsNow.Add(-time.Hour).Unix())) + "\n")

	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want.String()), statsNames...); err != nil {
		t.Error(err)
	}
}

func TestStatsWithoutOpenEscalationsReportAgeZero(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.WithClock(func() time.Time { return statsNow }))
	s := sampleStats()
	s.OpenEscalations = 0
	m.SetStatsSource(fakeSource(s, nil))
	samples := scrape(t, m)
	if got := samples["outerloop_escalation_oldest_age_seconds"]; got != 0 {
		t.Errorf("oldest escalation age = %v with none open, want 0", got)
	}
}

func TestAFailingStatsSourceExportsNoBogusValues(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	m := metrics.New(metrics.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	m.SetTemplates([]workitems.Template{{Name: "nightly", DailyCostCapUSD: 20}})
	m.SetStatsSource(fakeSource(sampleStats(), errors.New("redis: connection refused")))

	for scrapeN := 1; scrapeN <= 2; scrapeN++ {
		samples := scrape(t, m)
		for _, name := range statsNames[:5] {
			for k := range samples {
				if k == name || strings.HasPrefix(k, name+"{") {
					t.Errorf("scrape %d: %s exported although the stats source failed", scrapeN, k)
				}
			}
		}
		if got := samples["outerloop_stats_errors_total"]; got != float64(scrapeN) {
			t.Errorf("scrape %d: outerloop_stats_errors_total = %v", scrapeN, got)
		}
		// The rest of the registry is still served.
		if samples[`outerloop_template_daily_cost_cap_usd{template="nightly"}`] != 20 {
			t.Errorf("scrape %d: the cap gauge is missing after a stats error", scrapeN)
		}
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the stats error was not logged: %q", logs.String())
	}
}

func TestWithoutAStatsSourceOnlyTheErrorCounterIsExported(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	n, err := testutil.GatherAndCount(m.Registry(), statsNames...)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d stats series without a source, want 1 (the error counter)", n)
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
