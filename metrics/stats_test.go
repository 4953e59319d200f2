package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/lib/fakeclock"
	"outerloop/metrics"
	"outerloop/workitems"
	"outerloop/workitems/config"
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
	"outerloop_stats_age_seconds", "outerloop_stats_errors_total",
}

func TestStatsAreReadOnScrape(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.WithClock(fakeclock.New(statsNow)))
	// "manual" is configured but has no items yet: it is exported with zeros.
	m.SetTemplates([]config.Template{{Name: "nightly"}, {Name: "manual"}})
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
	want.WriteString(`# HELP outerloop_stats_age_seconds Age of the store stats in this scrape: 0 when read now, else the time since the last successful read (the values are last-known).
# TYPE outerloop_stats_age_seconds gauge
outerloop_stats_age_seconds 0
# HELP outerloop_stats_errors_total Scrapes whose read of the store's aggregate view failed or timed out (they served the last values read, if recent).
# TYPE outerloop_stats_errors_total counter
outerloop_stats_errors_total 0
# HELP outerloop_template_daily_cost_usd Cost spent today (UTC) per template in USD; what the scheduler's daily cap compares with.
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
	m := metrics.New(metrics.WithClock(fakeclock.New(statsNow)))
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
	m.SetTemplates([]config.Template{{Name: "nightly", DailyCostCapUSD: 20}})
	m.SetStatsSource(fakeSource(sampleStats(), errors.New("redis: connection refused")))

	for scrapeN := 1; scrapeN <= 2; scrapeN++ {
		samples := scrape(t, m)
		for _, name := range statsNames[:6] {
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

// switchable is a stats source a test turns off and on, or holds until released.
type switchable struct {
	mu    sync.Mutex
	stats workitems.Stats
	err   error
	hold  chan struct{} // non-nil: calls block until it is closed
	calls int
}

func (s *switchable) source(ctx context.Context) (workitems.Stats, error) {
	s.mu.Lock()
	s.calls++
	hold, st, err := s.hold, s.stats, s.err
	s.mu.Unlock()
	if hold != nil {
		<-hold // like a paused Redis: the read ignores ctx and ends when the server answers
	}
	return st, err
}

func (s *switchable) set(f func(*switchable)) { s.mu.Lock(); f(s); s.mu.Unlock() }

func TestAStoreOutageServesTheLastValuesWithTheirAge(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(statsNow)
	advance := clock.Advance
	src := &switchable{stats: sampleStats()}
	m := metrics.New(metrics.WithClock(clock), metrics.WithStatsTimeout(50*time.Millisecond),
		metrics.WithStatsMaxAge(10*time.Minute), metrics.WithLogger(slog.New(slog.DiscardHandler)))
	m.SetTemplates([]config.Template{{Name: "nightly", DailyCostCapUSD: 5}})
	m.SetStatsSource(src.source)
	const cost = `outerloop_template_daily_cost_usd{template="nightly"}`
	if s := scrape(t, m); s[cost] != 4.5 || s["outerloop_stats_age_seconds"] != 0 {
		t.Fatalf("fresh: cost %v age %v", s[cost], s["outerloop_stats_age_seconds"])
	}

	t.Run("a failing read serves the last values, aged", func(t *testing.T) {
		src.set(func(s *switchable) {
			s.err = errors.New("redis: i/o timeout")
			s.stats.DailyCostUSD = map[string]float64{"nightly": 99}
		})
		advance(25 * time.Second)
		s := scrape(t, m)
		if s[cost] != 4.5 || s["outerloop_stats_age_seconds"] != 25 || s["outerloop_stats_errors_total"] != 1 {
			t.Errorf("cost %v age %v errors %v, want 4.5, 25, 1", s[cost], s["outerloop_stats_age_seconds"], s["outerloop_stats_errors_total"])
		}
		if s["outerloop_escalation_oldest_age_seconds"] != 90*60+25 {
			t.Errorf("the oldest escalation's age stopped at %v: it is computed from the last read, now", s["outerloop_escalation_oldest_age_seconds"])
		}
	})

	t.Run("a read that hangs does not hold the scrape up, and only one read runs", func(t *testing.T) {
		hold := make(chan struct{})
		src.set(func(s *switchable) {
			s.err, s.hold, s.calls = nil, hold, 0
			s.stats.DailyCostUSD = map[string]float64{"nightly": 4.75}
		})
		for range 3 {
			if s := scrape(t, m); s[cost] != 4.5 {
				t.Errorf("while the read hangs: cost %v, want the last value 4.5", s[cost])
			}
		}
		src.set(func(s *switchable) {
			if s.calls != 1 {
				t.Errorf("%d reads started for 3 scrapes while one hung, want 1", s.calls)
			}
			s.hold = nil
		})
		close(hold) // the server answers: the hung read ends and serves the next scrape
		if s := scrape(t, m); s[cost] != 4.75 || s["outerloop_stats_age_seconds"] != 0 {
			t.Errorf("after the read ended: cost %v age %v, want 4.75 and 0", s[cost], s["outerloop_stats_age_seconds"])
		}
	})

	t.Run("last values older than the max age are left out", func(t *testing.T) {
		src.set(func(s *switchable) { s.err = errors.New("redis: connection refused") })
		advance(10*time.Minute + time.Second)
		s := scrape(t, m)
		for k := range s {
			for _, name := range statsNames[:5] {
				if k == name || strings.HasPrefix(k, name+"{") {
					t.Errorf("%s served from a read older than the max age", k)
				}
			}
		}
	})

	t.Run("today's cost from another UTC day is left out, the rest is served", func(t *testing.T) {
		m := metrics.New(metrics.WithClock(clock), metrics.WithStatsMaxAge(24*time.Hour), metrics.WithLogger(slog.New(slog.DiscardHandler)))
		src := &switchable{stats: sampleStats()}
		m.SetStatsSource(src.source)
		scrape(t, m) // read at about 12:10 UTC
		src.set(func(s *switchable) { s.err = errors.New("down") })
		advance(12 * time.Hour) // past 00:00 UTC, well within the max age
		s := scrape(t, m)
		if _, ok := s[cost]; ok {
			t.Error("yesterday's cost is served as today's")
		}
		if s[`outerloop_items{template="nightly",state="queued"}`] != 2 {
			t.Error("the item counts are not served from the last read")
		}
	})
}
