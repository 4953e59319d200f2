package dashboards

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Grafana dashboard model: only what the checks need.
type dashboard struct {
	UID        string          `json:"uid"`
	Title      string          `json:"title"`
	Inputs     json.RawMessage `json:"__inputs"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasource     `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // collapsed rows
}

type target struct {
	Expr       string      `json:"expr"`
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
}

// expression is one PromQL expression and where it comes from.
type expression struct {
	where string
	expr  string
}

func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	out := map[string]dashboard{}
	for _, name := range Dashboards() {
		b, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = d
	}
	if len(out) < 3 {
		t.Fatalf("found %d dashboards, want at least overview, budgets and runtime", len(out))
	}
	return out
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// grafanaVars maps Grafana's built-in variables to values PromQL accepts; dashboard variables
// (multi-value, used in regex matchers) become ".*".
var grafanaVars = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1d",
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

var varRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func substitute(expr string, defined []string) (string, error) {
	var bad []string
	out := varRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := varRE.FindStringSubmatch(m)[1]
		if v, ok := grafanaVars[name]; ok {
			return v
		}
		if slices.Contains(defined, name) {
			return ".*"
		}
		bad = append(bad, name)
		return m
	})
	if len(bad) > 0 {
		return "", fmt.Errorf("undefined variables %v", bad)
	}
	return out, nil
}

// dashboardExpressions returns every panel and variable expression with variables substituted.
func dashboardExpressions(t *testing.T) []expression {
	t.Helper()
	var out []expression
	for name, d := range loadDashboards(t) {
		var defined []string
		for _, v := range d.Templating.List {
			defined = append(defined, v.Name)
		}
		for _, p := range allPanels(d.Panels) {
			for _, tg := range p.Targets {
				e, err := substitute(tg.Expr, defined)
				if err != nil {
					t.Errorf("%s panel %d %q: %v", name, p.ID, p.Title, err)
					continue
				}
				out = append(out, expression{fmt.Sprintf("%s panel %d (%s) %s", name, p.ID, p.Title, tg.RefID), e})
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			// label_values(SELECTOR, label) is Grafana's; the selector is PromQL.
			m := labelValuesRE.FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("%s variable %s: %q is not label_values(selector, label)", name, v.Name, v.Definition)
				continue
			}
			out = append(out, expression{fmt.Sprintf("%s variable %s", name, v.Name), m[1]})
		}
	}
	slices.SortFunc(out, func(a, b expression) int { return strings.Compare(a.where, b.where) })
	return out
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := fs.ReadFile(FS(), Rules)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("%s: %v", Rules, err)
	}
	return rf
}

func ruleExpressions(t *testing.T) []expression {
	var out []expression
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			out = append(out, expression{Rules + " " + r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

// promtoolPath returns promtool's path. Without promtool the test is skipped, unless CI is set:
// then it fails, so CI never passes without checking the rules (scripts/promtool.sh installs
// Debian's prometheus package, which provides promtool).
func promtoolPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skip("promtool not found; run scripts/promtool.sh (set CI to make this a failure)")
	}
	t.Fatal("promtool not found and CI is set: install it with scripts/promtool.sh (Debian package prometheus)")
	return ""
}

func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtoolPath(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestDashboardsFollowTheClassicModel(t *testing.T) {
	t.Parallel()
	uids := map[string]string{}
	for name, d := range loadDashboards(t) {
		if prev, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %q", prev, name, d.UID)
		}
		uids[d.UID] = name
		t.Run(name+" is self-contained and uses the datasource variable", func(t *testing.T) {
			t.Parallel()
			if d.UID == "" || d.Title == "" {
				t.Errorf("uid %q title %q: both are required", d.UID, d.Title)
			}
			if len(d.Inputs) > 0 {
				t.Error("has __inputs: provisioned dashboards must not need an import step")
			}
			i := slices.IndexFunc(d.Templating.List, func(v variable) bool { return v.Name == "datasource" })
			if i < 0 {
				t.Fatal("no datasource variable")
			}
			if v := d.Templating.List[i]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
				t.Errorf("datasource variable: type %q query %s, want type datasource, query prometheus", v.Type, v.Query)
			}
			for _, v := range d.Templating.List {
				if v.Datasource != nil && v.Datasource.UID != "${datasource}" {
					t.Errorf("variable %s uses datasource %q", v.Name, v.Datasource.UID)
				}
			}
			ids := map[int]bool{}
			panels := allPanels(d.Panels)
			for _, p := range panels {
				if ids[p.ID] {
					t.Errorf("panel id %d used twice", p.ID)
				}
				ids[p.ID] = true
				g := p.GridPos
				if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
					t.Errorf("panel %d %q: gridPos %+v outside the 24-column grid", p.ID, p.Title, g)
				}
				if p.Type == "row" {
					continue
				}
				if p.Title == "" {
					t.Errorf("panel %d has no title", p.ID)
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("panel %d %q: datasource %+v, want uid ${datasource}", p.ID, p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %d %q has no query", p.ID, p.Title)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					if strings.TrimSpace(tg.Expr) == "" {
						t.Errorf("panel %d %q: target %s has no expression", p.ID, p.Title, tg.RefID)
					}
					if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
						t.Errorf("panel %d %q: target %s datasource %+v", p.ID, p.Title, tg.RefID, tg.Datasource)
					}
					if refs[tg.RefID] {
						t.Errorf("panel %d %q: refId %s used twice", p.ID, p.Title, tg.RefID)
					}
					refs[tg.RefID] = true
				}
			}
			for i, a := range panels {
				for _, b := range panels[i+1:] {
					ga, gb := a.GridPos, b.GridPos
					if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
						t.Errorf("panels %d %q and %d %q overlap", a.ID, a.Title, b.ID, b.Title)
					}
				}
			}
		})
	}
}

func TestEveryPanelExpressionParses(t *testing.T) {
	t.Parallel()
	exprs := dashboardExpressions(t)
	if len(exprs) < 30 {
		t.Fatalf("only %d expressions found; the dashboard model did not parse", len(exprs))
	}
	dir := t.TempDir()
	writeRecordingRules(t, filepath.Join(dir, "panels.yml"), exprs)
	if out, err := runPromtool(t, dir, "check", "rules", "panels.yml"); err != nil {
		t.Fatalf("promtool check rules on the panel expressions: %v\n%s", err, out)
	}

	t.Run("and a broken expression would be caught", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeRecordingRules(t, filepath.Join(dir, "bad.yml"), []expression{{"bad", `sum(rate(outerloop_attempts_total[5m])`}})
		if out, err := runPromtool(t, dir, "check", "rules", "bad.yml"); err == nil {
			t.Errorf("promtool accepted an unbalanced expression:\n%s", out)
		}
	})
}

// writeRecordingRules writes exprs as recording rules, one per expression, so promtool parses
// each of them.
func writeRecordingRules(t *testing.T, path string, exprs []expression) {
	t.Helper()
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	type group struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	}
	g := group{Name: "dashboard-panels"}
	for i, e := range exprs {
		g.Rules = append(g.Rules, rule{Record: fmt.Sprintf("dashboard_expression_%d", i), Expr: e.expr})
	}
	b, err := yaml.Marshal(map[string][]group{"groups": {g}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"the rules are valid", []string{"check", "rules", Rules}},
		{"the rule unit tests pass", []string{"test", "rules", AlertTests}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if out, err := runPromtool(t, ".", tt.args...); err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
		})
	}
}

func TestEveryAlertIsTestedFiringAndQuiet(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(FS(), AlertTests)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				AlertName string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tf.RuleFiles, []string{Rules}) {
		t.Errorf("%s tests rule files %v, want [%s]", AlertTests, tf.RuleFiles, Rules)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test case where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("alert %s has no test case where it stays quiet", r.Alert)
			}
		}
	}
	for name := range fires {
		if !alerts[name] {
			t.Errorf("%s tests alert %s, which %s does not define", AlertTests, name, Rules)
		}
	}
	// The alerts the issue asks for, by name, so none is dropped silently.
	for _, want := range []string{
		"OuterloopDailyBudgetNearCap", "OuterloopDailyBudgetExhausted", "OuterloopDailyBudgetBurnRate",
		"OuterloopEscalationWaiting", "OuterloopNightlyTemplateNotClosing", "OuterloopNightlyTemplateNeverClosed",
		"OuterloopAttemptsFailingRepeatedly", "OuterloopCheckpointLatencyHigh",
		"OuterloopWaitPollerStuck", "OuterloopWebhookBadSignatures", "OuterloopReviewsWaitingLong",
	} {
		if !alerts[want] {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// metricNameRE finds metric names of the families the checks own. Histogram series names
// (_bucket, _sum, _count) are matched whole, as the text exposition writes them.
var metricNameRE = regexp.MustCompile(`\b((?:outerloop|asynq|go|process)_[a-zA-Z0-9_]+)\b`)

// asynqExporterNames are the series of github.com/hibiken/asynq/x/metrics (QueueMetricsCollector,
// read from x/metrics/metrics.go, unchanged from 2021 to 2025). outerloop serve registers that
// exporter; its names are checked against this list rather than a live Redis.
var asynqExporterNames = []string{
	"asynq_tasks_enqueued_total", "asynq_queue_size", "asynq_queue_latency_seconds",
	"asynq_queue_memory_usage_approx_bytes", "asynq_tasks_processed_total", "asynq_tasks_failed_total",
	"asynq_queue_paused_total",
}

func usedMetricNames(exprs []expression) map[string][]string {
	used := map[string][]string{}
	for _, e := range exprs {
		for _, m := range metricNameRE.FindAllStringSubmatch(e.expr, -1) {
			used[m[1]] = append(used[m[1]], e.where)
		}
	}
	return used
}

func TestMetricNamesUsedAreExported(t *testing.T) {
	t.Parallel()
	checkMetricNamesExported(t, workloadMetricsHandler(t))

	t.Run("and a name nobody exports would be caught", func(t *testing.T) {
		t.Parallel()
		used := map[string][]string{"outerloop_no_such_thing_total": {"a panel"}, "asynq_no_such_gauge": {"a rule"}}
		if got := missingMetricNames(map[string]bool{}, used); len(got) != 2 {
			t.Errorf("missing names = %q, want both", got)
		}
	})
}

// checkMetricNamesExported scrapes /metrics from h and asserts that every outerloop_, go_ and
// process_ series named in the dashboards and rules is exported, and every asynq_ one is a
// series of asynq's exporter.
func checkMetricNamesExported(t *testing.T, h http.Handler) {
	t.Helper()
	used := usedMetricNames(append(dashboardExpressions(t), ruleExpressions(t)...))
	if len(used) < 20 {
		t.Fatalf("only %d metric names found in dashboards and rules", len(used))
	}
	for _, msg := range missingMetricNames(scrapeNames(t, h), used) {
		t.Error(msg)
	}
}

func missingMetricNames(exported map[string]bool, used map[string][]string) []string {
	var out []string
	for name, where := range used {
		switch {
		case strings.HasPrefix(name, "asynq_"):
			if !slices.Contains(asynqExporterNames, name) {
				out = append(out, fmt.Sprintf("%s (used in %s) is not a series of asynq's exporter", name, where[0]))
			}
		case !exported[name]:
			out = append(out, fmt.Sprintf("%s (used in %s and %d more) is not exported", name, where[0], len(where)-1))
		}
	}
	slices.Sort(out)
	return out
}

func scrapeNames(t *testing.T, h http.Handler) map[string]bool {
	t.Helper()
	body := scrape(t, h)
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}
