package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"outerloop/lib/fakeclock"
	"outerloop/metrics"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// testConfig is a deployment with one agent template on a configured provider.
func testConfig() *config.Config {
	return &config.Config{
		Providers: map[string]config.ProviderConfig{"openai": {Kind: "openai-responses", Model: "gpt-5-codex"}},
		Templates: []config.Template{{Name: "nightly", Schedule: "CRON_TZ=UTC 0 3 * * *",
			Loop: config.Loop{Kind: "agent", Provider: "openai"}}},
	}
}

// workload calls every recording method once or more.
func workload(m *metrics.Metrics) {
	m.AttemptStarted("nightly", "agent")
	m.AttemptFinished("nightly", "agent", workitems.ExitCompleted, 42*time.Minute, 17, "nightly@20260101T030000Z")
	m.AttemptFinished("nightly", "agent", workitems.ExitBudgetExhausted, 2*time.Hour, 300, "nightly@20260102T030000Z")
	spend := workitems.Spend{
		WallTime: workitems.Duration(90 * time.Second), ModelCalls: 3, ToolCalls: 5,
		InputTokens: 1000, CachedInputTokens: 200, OutputTokens: 50, CostUSD: 0.25,
	}
	m.AddSpend("nightly", "agent", spend, "nightly@20260101T030000Z")
	m.AddModelSpend("nightly", "openai", "", spend, "nightly@20260101T030000Z")
	m.SetRunningCost("nightly", "agent", "nightly@20260103T030000Z", 0.5)
	m.Decision("nightly", workitems.ActorVerifier, workitems.OutcomeClose, "all_green", "nightly@20260101T030000Z")
	m.Delivery("nightly", workitems.DeliveryPROpened, "nightly@20260101T030000Z")
	m.CheckpointWrite(3 * time.Millisecond)
	m.SchedulerTick("nightly")
	m.SchedulerSkip("nightly", metrics.SkipMaxOpen)
	m.SchedulerSkip("nightly", metrics.SkipPaused)
	m.SchedulerMisfire("nightly", 1)
	m.ModelRequest("openai", 2*time.Second, "")
	m.ModelRequest("openai", 500*time.Millisecond, string(workitems.ClassTransient))
}

func TestNilMetricsDoNothing(t *testing.T) {
	t.Parallel()
	var m *metrics.Metrics
	workload(m)
	m.SetTemplates([]config.Template{{Name: "x"}})
	m.SetConfig(testConfig())
	m.ClearRunningCost("x")
	m.SetStatsSource(nil)
	if m.Registry() != nil {
		t.Error("nil Metrics has a registry")
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Metrics handler: status %d, want 404", rec.Code)
	}
}

func TestRecordingMethodsCountWhatHappened(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetConfig(testConfig())
	workload(m)
	// A second spend with zero and negative parts adds only the positive ones.
	m.AddSpend("nightly", "agent", workitems.Spend{ModelCalls: -4, CostUSD: 0.5, ToolCalls: 0}, "")
	// Label values outside the fixed sets are folded, never passed through.
	m.AttemptFinished("nightly", "agent", workitems.ExitReason("segfault at 0xdead"), time.Minute, 1, "")
	m.SchedulerSkip("nightly", "redis said no")
	m.ModelRequest("openai", time.Second, "HTTP 500: upstream exploded")
	// A person's decision is counted apart from the verifier's, under the rule "person".
	m.Decision("nightly", workitems.ActorPerson, workitems.OutcomeCancel, "ignored", "")
	// A composite rule counts under the rule that decided; free text and names outside the policy are folded.
	m.Decision("nightly", workitems.ActorVerifier, workitems.OutcomeEscalate, "max_attempts (after tests_failed)", "")
	m.Decision("nightly", workitems.ActorVerifier, workitems.OutcomeEscalate, "Tests FAILED: TestX", "")
	m.Decision("nightly", workitems.ActorVerifier, workitems.OutcomeEscalate, "made_up_rule", "") // an identifier, not a rule
	// Providers and models outside the config are folded.
	m.AddModelSpend("nightly", "openai", "gpt-from-a-response", workitems.Spend{CostUSD: 0.125}, "")
	m.AddModelSpend("nightly", "somebody-else", "x", workitems.Spend{CostUSD: 1}, "")
	m.ModelRequest("unconfigured", time.Second, "")
	m.Delivery("nightly", workitems.DeliveryOutcome("the forge said 502"), "")
	m.NetworkRefused("nightly", "private_address", 1)
	m.NetworkRefused("nightly", "not_allowed", 1)
	m.NetworkRefused("nightly", "not_allowed", 41) // a command's refusals counted while it ran
	m.NetworkRefused("nightly", "the resolver exploded", 1)

	tests := []struct {
		name   string
		metric string
		labels string
		want   float64
	}{
		{"an attempt start is counted", "outerloop_attempts_started_total", `template="nightly",loop="agent"`, 1},
		{"a completed attempt is counted by reason", "outerloop_attempts_total", `template="nightly",loop="agent",reason="completed"`, 1},
		{"a budget-exhausted attempt is counted by reason", "outerloop_attempts_total", `template="nightly",loop="agent",reason="budget_exhausted"`, 1},
		{"an unknown exit reason is folded into unknown", "outerloop_attempts_total", `template="nightly",loop="agent",reason="unknown"`, 1},
		{"input tokens are counted", "outerloop_spend_tokens_total", `template="nightly",loop="agent",direction="input"`, 1000},
		{"cached input tokens are counted apart", "outerloop_spend_tokens_total", `template="nightly",loop="agent",direction="cached_input"`, 200},
		{"output tokens are counted", "outerloop_spend_tokens_total", `template="nightly",loop="agent",direction="output"`, 50},
		{"a negative model-call delta is ignored", "outerloop_spend_model_calls_total", `template="nightly",loop="agent"`, 3},
		{"tool calls are counted", "outerloop_spend_tool_calls_total", `template="nightly",loop="agent"`, 5},
		{"cost adds up across deltas", "outerloop_spend_cost_usd_total", `template="nightly",loop="agent"`, 0.75},
		{"wall time is counted in seconds", "outerloop_spend_wall_seconds_total", `template="nightly",loop="agent"`, 90},
		{"a verifier decision is counted by outcome", "outerloop_decisions_total", `template="nightly",outcome="close",actor_kind="verifier"`, 1},
		{"and by the rule that fired", "outerloop_decision_rules_total", `template="nightly",outcome="close",rule="all_green"`, 1},
		{"a person's decision is counted as a person's", "outerloop_decisions_total", `template="nightly",outcome="cancel",actor_kind="person"`, 1},
		{"under the rule person", "outerloop_decision_rules_total", `template="nightly",outcome="cancel",rule="person"`, 1},
		{"a composite rule counts under its first rule", "outerloop_decision_rules_total", `template="nightly",outcome="escalate",rule="max_attempts"`, 1},
		{"a rule that is not one of the policy's is folded into other", "outerloop_decision_rules_total", `template="nightly",outcome="escalate",rule="other"`, 2},
		{"escalations are counted by outcome whatever the rule", "outerloop_decisions_total", `template="nightly",outcome="escalate",actor_kind="verifier"`, 3},
		{"cost is counted by provider and configured model", "outerloop_model_cost_usd_total", `template="nightly",provider="openai",model="gpt-5-codex"`, 0.25},
		{"tokens are counted by provider, model and direction", "outerloop_model_tokens_total", `template="nightly",provider="openai",model="gpt-5-codex",direction="cached_input"`, 200},
		{"a model the config does not name is folded into other", "outerloop_model_cost_usd_total", `template="nightly",provider="openai",model="other"`, 0.125},
		{"a provider the config does not name is folded into other", "outerloop_model_cost_usd_total", `template="nightly",provider="other",model="other"`, 1},
		{"an unconfigured provider's requests are observed as other", "outerloop_model_request_duration_seconds_count", `provider="other"`, 1},
		{"a delivery is counted by outcome", "outerloop_deliveries_total", `template="nightly",outcome="pr_opened"`, 1},
		{"a delivery outcome outside the vocabulary is folded into other", "outerloop_deliveries_total", `template="nightly",outcome="other"`, 1},
		{"a refused connection is counted by reason", "outerloop_sandbox_network_refused_total", `template="nightly",reason="private_address"`, 1},
		{"refusals counted while a command ran add their count", "outerloop_sandbox_network_refused_total", `template="nightly",reason="not_allowed"`, 42},
		{"a refusal reason outside the vocabulary is folded into other", "outerloop_sandbox_network_refused_total", `template="nightly",reason="other"`, 1},
		{"the running attempt's cost is exported", "outerloop_running_attempts_cost_usd", `template="nightly",loop="agent"`, 0.5},
		{"and the attempt is counted as running", "outerloop_running_attempts", `template="nightly",loop="agent"`, 1},
		{"a tick is counted", "outerloop_scheduler_ticks_total", `template="nightly"`, 1},
		{"a max_open skip is counted", "outerloop_scheduler_skips_total", `template="nightly",reason="max_open"`, 1},
		{"a paused template's skip is counted", "outerloop_scheduler_skips_total", `template="nightly",reason="paused"`, 1},
		{"an unknown skip reason is folded into other", "outerloop_scheduler_skips_total", `template="nightly",reason="other"`, 1},
		{"a misfire is counted", "outerloop_scheduler_misfires_total", `template="nightly"`, 1},
		{"a classified model error is counted", "outerloop_model_errors_total", `provider="openai",class="transient"`, 1},
		{"an unclassified model error is folded into unknown", "outerloop_model_errors_total", `provider="openai",class="unknown"`, 1},
		{"attempt durations are observed", "outerloop_attempt_duration_seconds_count", `template="nightly",loop="agent"`, 3},
		{"attempt durations sum in seconds", "outerloop_attempt_duration_seconds_sum", `template="nightly",loop="agent"`, 42*60 + 2*3600 + 60},
		{"attempt steps are observed", "outerloop_attempt_steps_sum", `template="nightly",loop="agent"`, 17 + 300 + 1},
		{"checkpoint writes are observed", "outerloop_checkpoint_write_duration_seconds_count", ``, 1},
		{"every model request is observed, failed or not", "outerloop_model_request_duration_seconds_count", `provider="openai"`, 3},
	}
	samples := scrape(t, m)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := tt.metric
			if tt.labels != "" {
				key += "{" + tt.labels + "}"
			}
			got, ok := samples[key]
			if !ok {
				t.Fatalf("%s: not exported", key)
			}
			if diff := got - tt.want; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("%s = %v, want %v", key, got, tt.want)
			}
		})
	}
	if _, ok := samples[`outerloop_model_errors_total{provider="openai",class="HTTP 500: upstream exploded"}`]; ok {
		t.Error("error text leaked into a label")
	}
}

func TestMetricNamesPassPromlint(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetConfig(testConfig())
	workload(m)
	m.SetTemplates([]config.Template{testTemplate()})
	m.SetStatsSource(fakeSource(sampleStats(), nil))
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestExemplarsCarryTheItemID(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	workload(m)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		family string
		labels map[string]string
		want   string
	}{
		{"on the attempts counter", "outerloop_attempts_total", map[string]string{"reason": "completed"}, "nightly@20260101T030000Z"},
		{"on the cost counter", "outerloop_spend_cost_usd_total", nil, "nightly@20260101T030000Z"},
		{"on the decisions counter", "outerloop_decisions_total", nil, "nightly@20260101T030000Z"},
		{"on the duration histogram", "outerloop_attempt_duration_seconds", nil, "nightly@20260102T030000Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := exemplarItemIDs(find(mfs, tt.family), tt.labels)
			if !contains(got, tt.want) {
				t.Errorf("%s exemplars: item ids %q, want %q among them", tt.family, got, tt.want)
			}
		})
	}

	t.Run("and the OpenMetrics exposition shows them", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), `# {item_id="nightly@20260101T030000Z"}`) {
			t.Errorf("no item_id exemplar in the OpenMetrics scrape:\n%.2000s", b)
		}
	})

	t.Run("but never an item id as a label", func(t *testing.T) {
		t.Parallel()
		for _, mf := range mfs {
			for _, mm := range mf.GetMetric() {
				for _, lp := range mm.GetLabel() {
					if strings.Contains(lp.GetValue(), "@2026") || lp.GetName() == "item_id" {
						t.Errorf("%s has item id label %s=%q", mf.GetName(), lp.GetName(), lp.GetValue())
					}
				}
			}
		}
	})
}

func TestAnItemIDTooLongForAnExemplarIsStillCounted(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	long := strings.Repeat("x", 200)
	m.AttemptFinished("t", "script", workitems.ExitFailed, time.Second, 1, long)
	m.AddSpend("t", "script", workitems.Spend{CostUSD: 1}, long)
	m.Decision("t", workitems.ActorVerifier, workitems.OutcomeEscalate, "repeated_failure", "\xff\xfe")
	samples := scrape(t, m)
	for _, key := range []string{
		`outerloop_attempts_total{template="t",loop="script",reason="failed"}`,
		`outerloop_spend_cost_usd_total{template="t",loop="script"}`,
		`outerloop_decisions_total{template="t",outcome="escalate",actor_kind="verifier"}`,
	} {
		if samples[key] != 1 {
			t.Errorf("%s = %v, want 1", key, samples[key])
		}
	}
}

func TestSetTemplatesExportsCaps(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.SetTemplates([]config.Template{testTemplate(), {Name: "manual", Budget: workitems.Budget{WallTime: workitems.Duration(time.Hour)}}})
	samples := scrape(t, m)
	want := map[string]float64{
		`outerloop_budget_cap{template="nightly",scope="attempt",kind="wall_time"}`: 1800,
		`outerloop_budget_cap{template="nightly",scope="attempt",kind="cost_usd"}`:  3,
		`outerloop_budget_cap{template="nightly",scope="item",kind="cost_usd"}`:     15,
		`outerloop_budget_cap{template="manual",scope="attempt",kind="wall_time"}`:  3600,
		`outerloop_template_daily_cost_cap_usd{template="nightly"}`:                 20,
	}
	for k, v := range want {
		if got, ok := samples[k]; !ok || got != v {
			t.Errorf("%s = %v (exported %v), want %v", k, got, ok, v)
		}
	}
	for _, absent := range []string{
		`outerloop_template_daily_cost_cap_usd{template="manual"}`,
		`outerloop_budget_cap{template="nightly",scope="attempt",kind="steps"}`,
	} {
		if _, ok := samples[absent]; ok {
			t.Errorf("%s exported for a cap that is not set", absent)
		}
	}

	t.Run("and replaces them when the config changes", func(t *testing.T) {
		t.Parallel()
		m := metrics.New()
		m.SetTemplates([]config.Template{testTemplate()})
		m.SetTemplates([]config.Template{{Name: "other", DailyCostCapUSD: 1}})
		samples := scrape(t, m)
		if _, ok := samples[`outerloop_template_daily_cost_cap_usd{template="nightly"}`]; ok {
			t.Error("a removed template's cap is still exported")
		}
		if samples[`outerloop_template_daily_cost_cap_usd{template="other"}`] != 1 {
			t.Error("the new template's cap is not exported")
		}
	})
}

func testTemplate() config.Template {
	return config.Template{
		Name:            "nightly",
		DailyCostCapUSD: 20,
		Budget:          workitems.Budget{WallTime: workitems.Duration(30 * time.Minute), CostUSD: 3},
		ItemBudget:      workitems.Budget{CostUSD: 15},
	}
}

// scrape gathers m's registry into "name{labels}" → value, with labels in exposition order.
func scrape(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName(), mm)] = mm.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key(mf.GetName(), mm)] = mm.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key(mf.GetName()+"_count", mm)] = float64(mm.GetHistogram().GetSampleCount())
				out[key(mf.GetName()+"_sum", mm)] = mm.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

// key renders labels in the order the test tables write them: the order the vectors declare
// them. Gather sorts label pairs by name, so this reorders by a fixed preference.
func key(name string, mm *dto.Metric) string {
	order := []string{"template", "loop", "scope", "kind", "reason", "outcome", "actor_kind", "rule", "provider", "model", "direction", "state", "class"}
	var parts []string
	for _, n := range order {
		for _, lp := range mm.GetLabel() {
			if lp.GetName() == n {
				parts = append(parts, n+`="`+lp.GetValue()+`"`)
			}
		}
	}
	if len(parts) == 0 {
		return name
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func find(mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// exemplarItemIDs returns the item_id of every exemplar in mf on series matching labels.
func exemplarItemIDs(mf *dto.MetricFamily, labels map[string]string) []string {
	var ids []string
	for _, mm := range mf.GetMetric() {
		if !matches(mm, labels) {
			continue
		}
		var exs []*dto.Exemplar
		if c := mm.GetCounter(); c != nil && c.GetExemplar() != nil {
			exs = append(exs, c.GetExemplar())
		}
		if h := mm.GetHistogram(); h != nil {
			for _, b := range h.GetBucket() {
				if b.GetExemplar() != nil {
					exs = append(exs, b.GetExemplar())
				}
			}
		}
		for _, ex := range exs {
			for _, lp := range ex.GetLabel() {
				if lp.GetName() == "item_id" {
					ids = append(ids, lp.GetValue())
				}
			}
		}
	}
	return ids
}

func matches(mm *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range mm.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestScheduledTemplatesExportTheirLongestTickGap(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)) // a Wednesday, no DST change ahead
	tests := []struct {
		name     string
		schedule string
		want     float64 // 0: absent
	}{
		{"a nightly schedule has a one-day gap", "CRON_TZ=UTC 0 3 * * *", 86400},
		{"a weekday-only schedule has the weekend gap", "0 3 * * 1-5", 3 * 86400},
		{"a quarter-hourly schedule has a 15-minute gap", "*/15 * * * *", 900},
		{"a weekly descriptor has a one-week gap", "@weekly", 7 * 86400},
		{"a manual-only template has none", "", 0},
		{"an unparsable schedule has none", "not a cron", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(metrics.WithClock(clock))
			m.SetTemplates([]config.Template{{Name: "x", Schedule: tt.schedule}})
			got, ok := scrape(t, m)[`outerloop_template_schedule_max_interval_seconds{template="x"}`]
			if tt.want == 0 {
				if ok {
					t.Errorf("exported %v, want absent", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("= %v (exported %v), want %v", got, ok, tt.want)
			}
		})
	}
}

func TestHandlerCanBeMountedTwice(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	for range 2 {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
	}
}

func TestRecordingWhileScrapingIsSafe(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 50 {
				workload(m)
				m.SetTemplates([]config.Template{testTemplate()})
				m.SetStatsSource(fakeSource(sampleStats(), nil))
				if i == 0 {
					resp, err := srv.Client().Get(srv.URL)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if got := scrape(t, m)[`outerloop_attempts_started_total{template="nightly",loop="agent"}`]; got != 200 {
		t.Errorf("attempts started = %v after 4×50 workloads, want 200", got)
	}
}
