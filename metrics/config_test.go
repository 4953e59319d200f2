package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/robfig/cron/v3"

	"outerloop/egress"
	"outerloop/metrics"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestSetConfigCreatesEveryCounterSeriesAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	cfg := testConfig()
	cfg.Templates = append(cfg.Templates, config.Template{Name: "manual", Loop: config.Loop{Kind: "script"}})
	m.SetConfig(cfg)
	samples := scrape(t, m)

	var want []string
	for _, r := range workitems.AllExitReasons() {
		want = append(want, `outerloop_attempts_total{template="nightly",loop="agent",reason="`+string(r)+`"}`,
			`outerloop_attempts_total{template="manual",loop="script",reason="`+string(r)+`"}`)
	}
	for _, d := range []string{"input", "cached_input", "output"} {
		want = append(want, `outerloop_spend_tokens_total{template="nightly",loop="agent",direction="`+d+`"}`,
			`outerloop_model_tokens_total{template="nightly",provider="openai",model="gpt-5-codex",direction="`+d+`"}`)
	}
	for _, name := range []string{"attempts_started_total", "spend_model_calls_total", "spend_tool_calls_total",
		"spend_cost_usd_total", "spend_wall_seconds_total", "running_attempts_cost_usd", "running_attempts"} {
		want = append(want, `outerloop_`+name+`{template="nightly",loop="agent"}`, `outerloop_`+name+`{template="manual",loop="script"}`)
	}
	for _, a := range workitems.AllActorKinds() {
		for _, o := range a.Outcomes() {
			want = append(want, fmt.Sprintf(`outerloop_decisions_total{template="manual",outcome="%s",actor_kind="%s"}`, o, a))
		}
	}
	for _, o := range workitems.AllDeliveryOutcomes() {
		want = append(want, `outerloop_deliveries_total{template="manual",outcome="`+string(o)+`"}`)
	}
	for _, r := range egress.Reasons() {
		want = append(want, `outerloop_sandbox_network_refused_total{template="manual",reason="`+string(r)+`"}`)
	}
	want = append(want,
		`outerloop_model_cost_usd_total{template="nightly",provider="openai",model="gpt-5-codex"}`,
		`outerloop_scheduler_ticks_total{template="nightly"}`,
		`outerloop_scheduler_misfires_total{template="nightly"}`,
		`outerloop_scheduler_skips_total{template="nightly",reason="max_open"}`,
		`outerloop_scheduler_skips_total{template="nightly",reason="daily_cap"}`,
		`outerloop_scheduler_skips_total{template="nightly",reason="paused"}`,
	)
	for _, c := range workitems.AllErrorClasses() {
		want = append(want, `outerloop_model_errors_total{provider="openai",class="`+string(c)+`"}`)
	}
	for _, k := range want {
		v, ok := samples[k]
		if !ok {
			t.Errorf("%s is not created by SetConfig", k)
		} else if v != 0 {
			t.Errorf("%s = %v before anything happened", k, v)
		}
	}
	for k := range samples {
		switch {
		case strings.HasPrefix(k, "outerloop_scheduler_") && strings.Contains(k, `template="manual"`):
			t.Errorf("%s: a template without a schedule gets no scheduler series", k)
		case strings.HasPrefix(k, "outerloop_model_cost_usd_total") && strings.Contains(k, `template="manual"`):
			t.Errorf("%s: a template without a provider gets no provider series", k)
		case strings.HasPrefix(k, "outerloop_decisions_total") && strings.Contains(k, `outcome="escalate",actor_kind="person"`):
			t.Errorf("%s: a person does not escalate", k)
		case strings.HasPrefix(k, "outerloop_decision_rules_total"):
			t.Errorf("%s: rule series are created on first use only", k)
		}
	}

	t.Run("and a reload creates the new template's series and keeps the removed one's counts", func(t *testing.T) {
		t.Parallel()
		m := metrics.New()
		m.SetConfig(testConfig())
		m.AttemptStarted("nightly", "agent")
		m.SetConfig(&config.Config{Templates: []config.Template{{Name: "fresh", Loop: config.Loop{Kind: "exec"}, DailyCostCapUSD: 2}}})
		samples := scrape(t, m)
		if v, ok := samples[`outerloop_attempts_total{template="fresh",loop="exec",reason="completed"}`]; !ok || v != 0 {
			t.Errorf("the new template's series: %v %v", v, ok)
		}
		if samples[`outerloop_attempts_started_total{template="nightly",loop="agent"}`] != 1 {
			t.Error("a reload lost a removed template's count")
		}
		if _, ok := samples[`outerloop_running_attempts_cost_usd{template="nightly",loop="agent"}`]; ok {
			t.Error("the removed template still has a running-cost gauge")
		}
		if samples[`outerloop_template_daily_cost_cap_usd{template="fresh"}`] != 2 {
			t.Error("the new cap is not exported")
		}
	})
}

func TestRunningCostIsTheSumOfTheAttemptsRunningNow(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetConfig(testConfig())
	m.SetRunningCost("nightly", "agent", "a", 0.5)
	m.SetRunningCost("nightly", "agent", "b", 0.25)
	m.SetRunningCost("nightly", "agent", "a", 0.75) // a's next checkpoint replaces its value
	const cost, count = `outerloop_running_attempts_cost_usd{template="nightly",loop="agent"}`, `outerloop_running_attempts{template="nightly",loop="agent"}`
	if s := scrape(t, m); s[cost] != 1 || s[count] != 2 {
		t.Errorf("two running: cost %v count %v, want 1 and 2", s[cost], s[count])
	}
	m.ClearRunningCost("a")
	m.ClearRunningCost("b")
	m.ClearRunningCost("never-ran")
	if s := scrape(t, m); s[cost] != 0 || s[count] != 0 {
		t.Errorf("none running: cost %v count %v, want 0 and 0 (still exported)", s[cost], s[count])
	}
}

func TestAttemptDurationBucketsResolveSecondsToHours(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.AttemptFinished("t", "script", workitems.ExitCompleted, 1500*time.Millisecond, 1, "")
	m.AttemptFinished("t", "agent", workitems.ExitCompleted, 3*time.Hour, 1, "")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var h *dto.Histogram
	for _, mm := range find(mfs, "outerloop_attempt_duration_seconds").GetMetric() {
		if matches(mm, map[string]string{"loop": "script"}) {
			h = mm.GetHistogram()
		}
	}
	b := h.GetBucket()
	if first, last := b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(); first != 0.1 || last != 4*3600 {
		t.Errorf("buckets from %vs to %vs, want 0.1s to 4h", first, last)
	}
	for _, bk := range b {
		if bk.GetUpperBound() == 1 && bk.GetCumulativeCount() != 0 || bk.GetUpperBound() == 2.5 && bk.GetCumulativeCount() != 1 {
			t.Errorf("a 1.5s attempt: bucket le=%v holds %d", bk.GetUpperBound(), bk.GetCumulativeCount())
		}
	}
}

func TestTheLongestTickGapComesFromTheScheduleFields(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	specs := []string{
		"* * * * *", "*/15 * * * *", "7,8,50 * * * *", "0 3 * * *", "30 2,14 * * *", "*/20 9-10 * * *",
		"0 9-17 * * 1-5", "0 3 * * 1-5", "0 0 * * 0", "@weekly", "@daily", "@hourly", "@monthly",
		"0 0 1 * *", "0 0 31 * *", "0 0 1,15 * *", "0 6 1 * 1", "0 0 * 2 *", "15 4 1 1,7 *", "0 0 13 * 5",
	}
	for _, spec := range specs {
		t.Run(spec+" gaps as walking its ticks shows", func(t *testing.T) {
			t.Parallel()
			got, ok := metrics.ScheduleMaxGap("CRON_TZ=UTC "+spec, from)
			want := walkMaxGap(t, "CRON_TZ=UTC "+spec, from, from.AddDate(0, 0, 397))
			if !ok || got != want {
				t.Errorf("= %s (%v), walking the ticks gives %s", got, ok, want)
			}
		})
	}

	tests := []struct {
		name string
		spec string
		want time.Duration
	}{
		{"a nightly schedule in a DST zone has a 24h gap (wall-clock time)", "CRON_TZ=Europe/Berlin 0 3 * * *", 24 * time.Hour},
		{"a constant-delay schedule has its delay", "@every 90s", 90 * time.Second},
		{"a date that comes every four years reports the horizon", "0 0 29 2 *", 397 * 24 * time.Hour},
		{"a date that never comes reports the horizon", "0 0 30 2 *", 397 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, ok := metrics.ScheduleMaxGap(tt.spec, from); !ok || got != tt.want {
				t.Errorf("%q: %s (%v), want %s", tt.spec, got, ok, tt.want)
			}
		})
	}
	for _, spec := range []string{"", "not a cron"} {
		if _, ok := metrics.ScheduleMaxGap(spec, from); ok {
			t.Errorf("%q has a gap", spec)
		}
	}
}

// walkMaxGap is the reference: the longest gap between consecutive ticks from `from` to `to`,
// walking every tick (what metrics did before, at up to 2000 ticks per template).
func walkMaxGap(t testing.TB, spec string, from, to time.Time) time.Duration {
	t.Helper()
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		t.Fatal(err)
	}
	var gap time.Duration
	prev := sched.Next(from.Add(-time.Second))
	for n := 0; !prev.After(to) && n < 100_000; n++ { // 100k ticks cover 69 days of an every-minute schedule
		next := sched.Next(prev)
		gap = max(gap, next.Sub(prev))
		prev = next
	}
	return gap
}

// oldMaxScheduleInterval is what SetTemplates used to run per template: up to 2000 ticks over
// the week ahead. It is the baseline of BenchmarkScheduleGap.
func oldMaxScheduleInterval(spec string, from time.Time) (time.Duration, bool) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, false
	}
	end := from.Add(7 * 24 * time.Hour)
	prev := sched.Next(from)
	var gap time.Duration
	for range 2000 {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		gap = max(gap, next.Sub(prev))
		if next.After(end) {
			break
		}
		prev = next
	}
	return gap, gap > 0
}

func BenchmarkScheduleGap(b *testing.B) {
	from := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, spec := range []string{"* * * * *", "CRON_TZ=UTC 0 3 * * *"} {
		b.Run("walk(baseline) "+spec, func(b *testing.B) {
			for b.Loop() {
				_, _ = oldMaxScheduleInterval(spec, from)
			}
		})
		b.Run("fields "+spec, func(b *testing.B) {
			for b.Loop() {
				_, _ = metrics.ScheduleMaxGap(spec, from)
			}
		})
	}
}

// BenchmarkSetConfig10kTemplates is opening the app with 10,000 scheduled templates (every
// minute: the schedule the old tick walk paid most for).
func BenchmarkSetConfig10kTemplates(b *testing.B) {
	cfg := &config.Config{Providers: map[string]config.ProviderConfig{"p": {Model: "m"}}}
	for i := range 10_000 {
		cfg.Templates = append(cfg.Templates, config.Template{Name: fmt.Sprintf("t%05d", i), Schedule: "* * * * *",
			DailyCostCapUSD: 5, Budget: workitems.Budget{WallTime: workitems.Duration(time.Hour), CostUSD: 1},
			Loop: config.Loop{Kind: "agent", Provider: "p"}})
	}
	for b.Loop() {
		metrics.New().SetConfig(cfg)
	}
}
