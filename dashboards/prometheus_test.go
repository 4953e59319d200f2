package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// TestARealPrometheusAlertsAndDrawsFromTheWiredSystem runs Debian's prometheus against the wired
// system (internal/app: store on the real Redis, worker, verifier, scheduler, metrics over HTTP)
// with the real dashboards/alerts.yml, at a 1s scrape and evaluation interval, and asserts
// through Prometheus's HTTP API:
//   - OuterloopDailyBudgetExhausted fires once a template's spend reaches its cap and the
//     scheduler refuses its tick, and resolves after a second run with a raised cap;
//   - OuterloopDailyBudgetBurnRate becomes active (pending: its for: 15m is promtool's to test)
//     for a template whose first and only spend is 90% of its cap;
//   - every panel and variable query of every dashboard evaluates without error, to a non-empty
//     result without NaN;
//   - the budget panels equal the spend recorded on the items: they are evaluated at the last
//     scrape's timestamp, where increase() over counters created at zero is exact.
func TestARealPrometheusAlertsAndDrawsFromTheWiredSystem(t *testing.T) {
	t.Parallel()
	promBin := prometheusPath(t)
	awaitDayWithRoom(t, 3*time.Minute)

	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("sample\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cappedModel, burnerModel := modeltest.NewResponsesServer(t), modeltest.NewResponsesServer(t)
	// capped: a transient error (retried: model errors and latency get series), then an answer
	// whose 100 input tokens cost $1.00, its whole daily cap. burner: $9.00 of a $10 cap.
	cappedModel.Enqueue(modeltest.ServerError(), modeltest.Text("done"))
	burnerModel.Enqueue(modeltest.Text("done"))
	configYAML := func(cappedCap float64) *config.Config {
		cfg, err := config.ParseConfig(fmt.Appendf(nil, `
defaults:
  budget: {wall_time: 5m, verify_reserve: 1m, steps: 100}
  item_budget: {cost_usd: 50}
providers:
  cheap: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s, prices: {input_per_mtok: 10000}}
  dear: {kind: openai-responses, base_url: %[4]s, api_key_env: %[2]s, model: %[3]s, prices: {input_per_mtok: 90000}}
templates:
  - {name: capped, schedule: "* * * * *", daily_cost_cap_usd: %[5]v, repo: %[6]s, goal: look, loop: {kind: agent, provider: cheap}, done_check: {commands: ["true"]}}
  - {name: burner, daily_cost_cap_usd: 10, repo: %[6]s, goal: look, loop: {kind: agent, provider: dear}, done_check: {commands: ["true"]}}
  - {name: hopeless, max_attempts: 1, repo: %[6]s, goal: fail, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["false"]}}
`, cappedModel.URL, modeltest.KeyEnv, modeltest.Model, burnerModel.URL, cappedCap, repo))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	env := redistest.New(t)
	var current atomic.Pointer[app.App]
	open := func(cfg *config.Config) *app.App {
		t.Helper()
		agent := agentloop.New(agentloop.WithProviderFactory(func(pc config.ProviderConfig, name string) (model.Provider, error) {
			p, err := model.New(pc, name, cappedModel.Getenv, nil)
			return model.Instrument(p, current.Load().Metrics.ModelRequest), err
		}))
		a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue,
			Workdir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Loops: map[workitems.LoopKind]worker.InnerLoop{"agent": agent}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Metrics.RegisterQueues(a.Inspector()); err != nil {
			t.Fatal(err)
		}
		current.Store(a)
		return a
	}
	a := open(configYAML(1))
	closeApp := func(a *app.App) func() {
		w := a.Worker(1, "prom")
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return func() { w.Shutdown(context.Background()); a.Close() }
	}
	stop1 := closeApp(a)
	t.Cleanup(func() {
		if stop1 != nil {
			stop1()
		}
	})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current.Load().Metrics.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)
	prom := startPrometheus(t, promBin, strings.TrimPrefix(target.URL, "http://"))
	// Prometheus has seen the counters at zero before anything is spent.
	prom.await(t, "the target is scraped", func() bool { return len(prom.query(t, `up{job="outerloop-api"} == 1`, time.Time{})) == 1 })

	ctx := context.Background()
	for _, name := range []string{"capped", "burner", "hopeless"} {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: name})
		if err != nil {
			t.Fatal(err)
		}
		waitSettled(t, a.Store, it.ID)
	}
	// The scheduler's tick of capped (on time at its start) is refused by the daily cap.
	clock := fakeclock.New(time.Now().Truncate(time.Minute).Add(30 * time.Second))
	ticks := make(chan scheduler.TickResult, 10)
	sched, err := scheduler.New(a.Queue, scheduler.Options{Clock: clock, Observer: a.Metrics, OnTick: func(r scheduler.TickResult) { ticks <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sched.Start(ctx)
	sched.Shutdown()
	if r := <-ticks; r.Outcome != "skipped_daily_cap" {
		t.Fatalf("capped's tick: %+v, want skipped_daily_cap", r)
	}

	prom.await(t, "OuterloopDailyBudgetExhausted fires for capped", func() bool {
		return prom.alertState(t, "OuterloopDailyBudgetExhausted", "capped") == "firing"
	})
	prom.await(t, "OuterloopDailyBudgetBurnRate is active for burner", func() bool {
		return prom.alertState(t, "OuterloopDailyBudgetBurnRate", "burner") != ""
	})
	if s := prom.alertState(t, "OuterloopDailyBudgetExhausted", "burner"); s != "" {
		t.Errorf("Exhausted is %s for burner, which spent 90%%", s)
	}

	// Every dashboard query, at a scrape taken after all the spend.
	at := prom.scrapeAfter(t, time.Now())
	spent := map[string]float64{}
	delivered := map[[2]string]float64{} // template, outcome → items
	for _, name := range []string{"capped", "burner", "hopeless"} {
		items, err := a.Store.List(ctx, itemstore.ListOptions{Template: name})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			spent[name] += it.Spend.CostUSD
			if it.Delivery != nil {
				delivered[[2]string{name, string(it.Delivery.Outcome)}]++
			}
		}
	}
	if len(delivered) == 0 {
		t.Fatal("no item recorded a delivery")
	}
	if spent["capped"] != 1 || spent["burner"] != 9 {
		t.Fatalf("items spent %v, want capped $1 and burner $9", spent)
	}
	liveVars := map[string]string{"__rate_interval": "10m", "__interval": "1m", "__range": "1h"}
	results := map[string][]promSample{}
	for _, e := range liveDashboardExpressions(t, liveVars) {
		res, err := prom.tryQuery(e.expr, at)
		if err != nil {
			t.Errorf("%s: %v\n%s", e.where, err, e.expr)
			continue
		}
		if len(res) == 0 {
			t.Errorf("%s: no result\n%s", e.where, e.expr)
		}
		for _, s := range res {
			if math.IsNaN(s.Value) {
				t.Errorf("%s: NaN for %v\n%s", e.where, s.Metric, e.expr)
			}
		}
		results[e.where] = res
	}

	// The budget panels say what the items spent.
	type panelValue struct {
		panel   string // dashboard file, panel title and target
		series  map[string]string
		want    float64
		matched bool
	}
	tests := []panelValue{
		{panel: "budgets.json Today's cost vs daily cap A", series: map[string]string{"template": "capped"}, want: spent["capped"]},
		{panel: "budgets.json Today's cost vs daily cap A", series: map[string]string{"template": "burner"}, want: spent["burner"]},
		{panel: "budgets.json Cost by inner loop (range) A", series: map[string]string{"template": "capped", "loop": "agent"}, want: spent["capped"]},
		{panel: "budgets.json Cost by inner loop (range) A", series: map[string]string{"template": "burner", "loop": "agent"}, want: spent["burner"]},
		{panel: "budgets.json Cost by provider and model (range) A", series: map[string]string{"provider": "dear", "model": modeltest.Model}, want: spent["burner"]},
		{panel: "budgets.json Cost per closed item (range) A", series: map[string]string{"template": "capped"}, want: spent["capped"]},
		{panel: "budgets.json Daily cap remaining A", series: map[string]string{"template": "burner"}, want: 10 - spent["burner"]},
		{panel: "budgets.json Daily cap remaining A", series: map[string]string{"template": "capped"}, want: 0},
		{panel: "budgets.json Spend of running attempts A", series: map[string]string{"template": "burner"}, want: 0},
		{panel: "budgets.json Ticks skipped by the daily cap, per hour A", series: map[string]string{"template": "capped"}, want: 1},
		{panel: "overview.json Cost today (UTC) A", want: spent["capped"] + spent["burner"]},
		{panel: "overview.json Closed in range A", want: 2},
		{panel: "overview.json Escalated in range A", want: 1},
	}
	for k, n := range delivered {
		tests = append(tests, panelValue{panel: "overview.json Deliveries in range by template and outcome A", series: map[string]string{"template": k[0], "outcome": k[1]}, want: n})
	}
	for _, tt := range tests {
		res, ok := results[tt.panel]
		if !ok {
			t.Errorf("%s: no such panel query", tt.panel)
			continue
		}
		for _, s := range res {
			if matchLabels(s.Metric, tt.series) {
				tt.matched = true
				if math.Abs(s.Value-tt.want) > 1e-9 {
					t.Errorf("%s %v = %v, want %v (the items' spend)", tt.panel, tt.series, s.Value, tt.want)
				}
			}
		}
		if !tt.matched {
			t.Errorf("%s: no series %v in %v", tt.panel, tt.series, res)
		}
	}

	// A second run with the cap raised: the scheduler creates capped's next item, the alert
	// resolves.
	stop1()
	stop1 = nil
	a2 := open(configYAML(5))
	t.Cleanup(a2.Close)
	cappedModel.Enqueue(modeltest.Text("done"))
	clock.Advance(time.Minute)
	sched2, err := scheduler.New(a2.Queue, scheduler.Options{Clock: clock, Observer: a2.Metrics, OnTick: func(r scheduler.TickResult) { ticks <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sched2.Start(ctx)
	sched2.Shutdown()
	if r := <-ticks; r.Outcome != "created" {
		t.Fatalf("capped's tick after the cap was raised: %+v, want created", r)
	}
	prom.await(t, "OuterloopDailyBudgetExhausted resolves for capped", func() bool {
		return prom.alertState(t, "OuterloopDailyBudgetExhausted", "capped") == ""
	})
}

// awaitDayWithRoom waits, if the UTC day ends within d, until it has begun anew: today's cost
// and the burn-rate projection both turn over at 00:00 UTC.
func awaitDayWithRoom(t *testing.T, d time.Duration) {
	now := time.Now().UTC()
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if left := midnight.Sub(now); left < d {
		t.Logf("the UTC day ends in %s: waiting for it to begin anew", left.Round(time.Second))
		<-time.After(left + 2*time.Second)
	}
}

func prometheusPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skip("prometheus not found; scripts/test.sh installs Debian's prometheus package (set CI to make this a failure)")
	}
	t.Fatal("prometheus not found and CI is set: install Debian's prometheus package (scripts/test.sh does)")
	return ""
}

type promServer struct {
	base string
	hc   *http.Client
	log  string
}

// startPrometheus runs prometheus with the repository's alerts.yml, scraping target every second
// and evaluating the rules every second, and waits until it is ready.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := fs.ReadFile(FS(), Rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, Rules), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%s]
scrape_configs:
  - job_name: outerloop-api
    static_configs:
      - targets: [%q]
`, Rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	p := &promServer{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}, log: logPath}
	p.await(t, "prometheus is ready", func() bool {
		resp, err := p.hc.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// await polls Prometheus's API (its only way to tell) until cond holds, until the test's
// deadline.
func (p *promServer) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	began, deadline := time.Now(), testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(p.log)
			t.Fatalf("waited %s for: %s\nprometheus log:\n%s", time.Since(began).Round(time.Second), what, log)
		}
		<-time.After(200 * time.Millisecond) // the API's polling interval, not a synchronisation
	}
}

type promSample struct {
	Metric map[string]string
	Value  float64
	At     float64
}

// tryQuery evaluates an instant query at `at` (zero: now).
func (p *promServer) tryQuery(q string, at time.Time) ([]promSample, error) {
	v := url.Values{"query": {q}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	resp, err := p.hc.Get(p.base + "/api/v1/query?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result type %s, want vector", r.Data.ResultType)
	}
	out := make([]promSample, 0, len(r.Data.Result))
	for _, x := range r.Data.Result {
		ts, _ := x.Value[0].(float64)
		vs, _ := x.Value[1].(string)
		f, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			return nil, fmt.Errorf("value %v: %w", x.Value[1], err)
		}
		out = append(out, promSample{Metric: x.Metric, Value: f, At: ts})
	}
	return out, nil
}

func (p *promServer) query(t *testing.T, q string, at time.Time) []promSample {
	t.Helper()
	res, err := p.tryQuery(q, at)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

// scrapeAfter waits for a successful scrape of the target that started after `after` and
// returns its timestamp: the instant whose samples are the newest. A failed scrape (the 1 s
// scrape timeout, exceeded on a loaded machine) has a timestamp too, but marks every series
// stale there: each query at that instant would find nothing.
func (p *promServer) scrapeAfter(t *testing.T, after time.Time) time.Time {
	t.Helper()
	var at time.Time
	p.await(t, "a successful scrape after the workload", func() bool {
		res := p.query(t, `timestamp(up{job="outerloop-api"})`, time.Time{})
		if len(res) != 1 {
			return false
		}
		at = time.UnixMilli(int64(math.Round(res[0].Value * 1000)))
		if !at.After(after) {
			return false
		}
		up := p.query(t, `up{job="outerloop-api"}`, at) // the scrape at `at` itself
		return len(up) == 1 && up[0].Value == 1
	})
	return at
}

// alertState returns the state of an alert for a template ("" when it is not active).
func (p *promServer) alertState(t *testing.T, alert, template string) string {
	t.Helper()
	resp, err := p.hc.Get(p.base + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == alert && a.Labels["template"] == template {
			return a.State
		}
	}
	return ""
}

func matchLabels(m, want map[string]string) bool {
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// liveDashboardExpressions returns every panel target and variable selector of the dashboards
// with Grafana's variables set to vars (dashboard variables: every value), keyed
// "file panel-title refId" and "file variable name".
func liveDashboardExpressions(t *testing.T, vars map[string]string) []expression {
	t.Helper()
	var out []expression
	for name, d := range loadDashboards(t) {
		for _, p := range allPanels(d.Panels) {
			for _, tg := range p.Targets {
				e := varRE.ReplaceAllStringFunc(tg.Expr, func(m string) string {
					if v, ok := vars[varRE.FindStringSubmatch(m)[1]]; ok {
						return v
					}
					return ".*"
				})
				out = append(out, expression{fmt.Sprintf("%s %s %s", name, p.Title, tg.RefID), e})
			}
		}
		for _, v := range d.Templating.List {
			if m := labelValuesRE.FindStringSubmatch(v.Definition); m != nil {
				out = append(out, expression{fmt.Sprintf("%s variable %s", name, v.Name), m[1]})
			}
		}
	}
	slices.SortFunc(out, func(a, b expression) int { return strings.Compare(a.where, b.where) })
	return out
}
