package console_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/evals"
)

// expFixture is the console and the API with experiments wired to the app's eval runner (a
// real eval namespace on the shared Redis).
type expFixture struct {
	*fixture
	runner *evals.Runner
}

func newExpFixture(t *testing.T) *expFixture {
	t.Helper()
	a := openApp(t, handlerConfig(t))
	r := a.EvalRunner()
	f := &fixture{app: a, auth: api.NewAuth(testToken), mux: http.NewServeMux()}
	api.New(api.Options{Queue: a.Queue, Auth: f.auth, Logger: testLogger(), Experiments: r}).Register(f.mux)
	f.console = console.New(console.Options{Queue: a.Queue, Auth: f.auth, Logger: testLogger(), PageSize: 2, Experiments: r})
	f.console.Register(f.mux)
	return &expFixture{fixture: f, runner: r}
}

// tenTaskRuns are runs of t1…t10 once under A and B: A closes t1…t8 at 0.20 USD a run, B
// closes t1…t3 at 0.05 USD, so t4…t8 are regressions.
func tenTaskRuns() []evals.Run {
	var runs []evals.Run
	for i := 1; i <= 10; i++ {
		task := fmt.Sprintf("t%d", i)
		runs = append(runs,
			evals.Run{Task: task, Variant: "A", Closed: i <= 8, Exit: "completed", CostUSD: 0.20, WallTime: time.Duration(30+i) * time.Second, ModelCalls: 5, Tokens: 1000},
			evals.Run{Task: task, Variant: "B", Closed: i <= 3, Exit: "budget_exhausted", CostUSD: 0.05, WallTime: 20 * time.Second, ModelCalls: 7, Tokens: 800})
	}
	return runs
}

// experiment stores an experiment of tasks t1…tN of template fix under A and B and records
// runs.
func (f *expFixture) experiment(t *testing.T, id string, tasks int, created time.Time, runs []evals.Run) {
	t.Helper()
	e := &evals.Experiment{ID: id, Suite: evals.Suite{Name: "calc-fixes"}, Repeat: 1, BudgetUSD: 10,
		Variants:      []evals.VariantSpec{{Name: "A"}, {Name: "B", Overlay: "goal: cheaper\n"}},
		ConfigVersion: "cfg-1", State: evals.StateRunning, CreatedAt: created, Actor: "alice",
		Versions: evals.Versions{Config: "cfg-1", Templates: map[string]string{"fix": "prod-v"},
			Variants: map[string]map[string]string{"A": {"fix": "a-v"}, "B": {"fix": "b-v"}}}}
	for i := 1; i <= tasks; i++ {
		e.Suite.Tasks = append(e.Suite.Tasks, evals.Task{ID: fmt.Sprintf("t%d", i), Template: "fix"})
	}
	ctx := context.Background()
	if err := f.runner.Exps.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if err := f.runner.Exps.RecordRun(ctx, id, r); err != nil {
			t.Fatal(err)
		}
	}
}

// svgNode is any element of the chart, parsed as XML.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []svgNode  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) num(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(name), 64)
	if err != nil {
		t.Fatalf("<%s> %s=%q: %v", n.XMLName.Local, name, n.attr(name), err)
	}
	return v
}

// find returns the elements under n (n too) for which match holds, in document order.
func (n svgNode) find(match func(svgNode) bool) []svgNode {
	var out []svgNode
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Nodes {
		out = append(out, c.find(match)...)
	}
	return out
}

func byClass(tag, class string) func(svgNode) bool {
	return func(n svgNode) bool { return n.XMLName.Local == tag && n.attr("class") == class }
}

// parseChart parses the page's inline SVG.
func parseChart(t *testing.T, body string) svgNode {
	t.Helper()
	i, j := strings.Index(body, "<svg"), strings.Index(body, "</svg>")
	if i < 0 || j < i {
		t.Fatalf("no inline SVG on the page:\n%s", body)
	}
	var root svgNode
	if err := xml.Unmarshal([]byte(body[i:j+len("</svg>")]), &root); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v\n%s", err, body[i:j])
	}
	return root
}

// panelScale returns the y of the value 0 and of the value top of a chart panel, read from its
// grid lines (data-tick).
func panelScale(t *testing.T, p svgNode, top string) (y0, yTop float64) {
	t.Helper()
	grid := p.find(byClass("line", "grid"))
	found := 0
	for _, g := range grid {
		switch g.attr("data-tick") {
		case "0":
			y0 = g.num(t, "y1")
			found++
		case top:
			yTop = g.num(t, "y1")
			found++
		}
	}
	if found != 2 || y0 <= yTop {
		t.Fatalf("panel %s: grid lines for 0 and %s not found (%d) or upside down (y %v, %v)", p.attr("id"), top, found, y0, yTop)
	}
	return y0, yTop
}

// row returns the HTML of the table row whose attribute attr is val.
func row(t *testing.T, body, attr, val string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr ` + attr + `="` + regexp.QuoteMeta(val) + `"[^>]*>.*?</tr>`).FindString(body)
	if m == "" {
		t.Fatalf("no row %s=%q on the page", attr, val)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.011 }

// TestTheExperimentPageShowsTheReportAndDrawsIt renders a running experiment's page over real
// recorded runs and checks the numbers against values worked out by hand (close rate, Wilson
// bounds, McNemar p, cost per close), the order of the task rows, the progress, and that the
// chart draws one interval per variant at the coordinates of its bounds.
func TestTheExperimentPageShowsTheReportAndDrawsIt(t *testing.T) {
	t.Parallel()
	f := newExpFixture(t)
	f.experiment(t, "x42", 11, time.Now().UTC().Add(-time.Hour), tenTaskRuns()) // t11 still running

	res, body := f.get(t, "/experiments/x42")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /experiments/x42: %d\n%s", res.StatusCode, body)
	}
	if !strings.Contains(body, `<a href="/experiments" class="on">Experiments</a>`) {
		t.Errorf("no highlighted Experiments nav link")
	}
	// A: 8 of 10 closed, Wilson [0.4902, 0.9433]; 2.00 USD / 8 closes. B: 3 of 10, Wilson
	// [0.1078, 0.6032]; 0.50 USD / 3 closes. Pair: 5 tasks only A closed, none only B:
	// McNemar p = 2 · C(5,0) / 2⁵ = 0.0625.
	for _, want := range []struct{ variant, rate, ci, perClose string }{
		{"A", "0.80", "[0.49, 0.94]", "$0.25"},
		{"B", "0.30", "[0.11, 0.60]", "$0.17"},
	} {
		r := row(t, body, "data-variant", want.variant)
		for _, s := range []string{`data-col="close-rate">` + want.rate + `<`, `data-col="ci">` + want.ci + `<`, `data-col="per-close">` + want.perClose + `<`} {
			if !strings.Contains(r, s) {
				t.Errorf("variant %s row lacks %s:\n%s", want.variant, s, r)
			}
		}
	}
	// The versions it ran under: production's, then A's and B's, in the variants' order.
	if r := row(t, body, "data-template", "fix"); !regexp.MustCompile(`(?s)prod-v.*a-v.*b-v`).MatchString(r) {
		t.Errorf("versions row:\n%s", r)
	}
	if r := row(t, body, "data-pair", "A-B"); !strings.Contains(r, `data-col="mcnemar-p">0.0625<`) || !strings.Contains(r, `<td class="num bad">5</td>`) {
		t.Errorf("pair row:\n%s", r)
	}
	// Regressions first, marked; then the other tasks by id.
	tasks := regexp.MustCompile(`<tr data-task="([^"]+)"( class="regressed")?>`).FindAllStringSubmatch(body, -1)
	var order []string
	for _, m := range tasks {
		order = append(order, m[1]+map[bool]string{true: "!", false: ""}[m[2] != ""])
	}
	if got, want := strings.Join(order, " "), "t4! t5! t6! t7! t8! t1 t10 t2 t3 t9"; got != want {
		t.Errorf("task rows %q, want %q", got, want)
	}
	// Progress while it runs: 20 of 22 runs ended, closes per variant, spend against the budget.
	if !strings.Contains(body, `id="progress"`) || !strings.Contains(body, "20 / 22") || !strings.Contains(body, `data-closed="A">8<`) ||
		!strings.Contains(body, `data-closed="B">3<`) || !strings.Contains(body, `<b id="spent">$2.50</b> of $10.00 budget`) {
		t.Errorf("progress section wrong:\n%s", body)
	}

	svg := parseChart(t, body)
	if svg.attr("role") != "img" || svg.attr("aria-labelledby") != "chart-title chart-desc" {
		t.Errorf("svg role/labels: %v", svg.Attrs)
	}
	desc := svg.find(func(n svgNode) bool { return n.XMLName.Local == "desc" })
	if len(desc) != 1 || !strings.Contains(desc[0].Text, "A: close rate 0.80 (95% interval 0.49 to 0.94)") ||
		!strings.Contains(desc[0].Text, "cost per close $0.17") {
		t.Errorf("chart description %v", desc)
	}
	panels := svg.find(func(n svgNode) bool { return n.attr("class") == "panel" })
	if len(panels) != 2 || panels[0].attr("id") != "panel-close-rate" || panels[1].attr("id") != "panel-cost-per-close" {
		t.Fatalf("chart panels %d", len(panels))
	}
	y0, y1 := panelScale(t, panels[0], "1")
	cis := panels[0].find(byClass("line", "ci"))
	if len(cis) != 2 {
		t.Fatalf("close-rate panel has %d intervals, want one per variant (2)", len(cis))
	}
	wantCI := map[string][2]int{"A": {8, 10}, "B": {3, 10}}
	for _, ci := range cis {
		v := ci.attr("data-variant")
		k := wantCI[v]
		lo, hi := evals.Wilson(k[0], k[1], evals.Z95)
		if !near(ci.num(t, "data-lo"), lo) || !near(ci.num(t, "data-hi"), hi) {
			t.Errorf("interval of %s: [%s, %s], want [%.4f, %.4f]", v, ci.attr("data-lo"), ci.attr("data-hi"), lo, hi)
		}
		// The whisker runs from hi (y1, higher on screen) down to lo (y2), on the same scale
		// as the grid.
		if yHi, yLo := y0+(y1-y0)*hi, y0+(y1-y0)*lo; !near(ci.num(t, "y1"), yHi) || !near(ci.num(t, "y2"), yLo) {
			t.Errorf("interval of %s drawn at y %v–%v, want %.2f–%.2f (grid 0 at %v, 1 at %v)", v, ci.attr("y1"), ci.attr("y2"), yHi, yLo, y0, y1)
		}
	}
	rates := panels[0].find(byClass("rect", "bar"))
	if len(rates) != 2 {
		t.Fatalf("close-rate bars: %d", len(rates))
	}
	for _, b := range rates {
		want := map[string]float64{"A": 0.8, "B": 0.3}[b.attr("data-variant")]
		if !near(b.num(t, "y"), y0+(y1-y0)*want) || !near(b.num(t, "y")+b.num(t, "height"), y0) {
			t.Errorf("close-rate bar of %s: y %v height %v, want top at %.2f", b.attr("data-variant"), b.attr("y"), b.attr("height"), y0+(y1-y0)*want)
		}
	}
	// Cost per close on a round scale: 0.25 is the highest, so the ticks go by 0.1 to 0.3.
	var ticks []string
	for _, g := range panels[1].find(byClass("line", "grid")) {
		ticks = append(ticks, g.attr("data-tick"))
	}
	if got := strings.Join(ticks, " "); got != "0 0.1 0.2 0.3" {
		t.Errorf("cost ticks %q, want 0 0.1 0.2 0.3", got)
	}
	c0, cTop := panelScale(t, panels[1], "0.3")
	costs := panels[1].find(byClass("rect", "bar"))
	if len(costs) != 2 {
		t.Fatalf("cost bars: %d", len(costs))
	}
	for _, b := range costs {
		want := map[string]float64{"A": 0.25, "B": 0.5 / 3}[b.attr("data-variant")]
		if !near(b.num(t, "y"), c0+(cTop-c0)*want/0.3) {
			t.Errorf("cost bar of %s at y %v, want %.2f", b.attr("data-variant"), b.attr("y"), c0+(cTop-c0)*want/0.3)
		}
	}
	labels := panels[1].find(byClass("text", "value"))
	if len(labels) != 2 || labels[0].Text != "$0.25" || labels[1].Text != "$0.17" {
		t.Errorf("cost labels %+v", labels)
	}
}

// TestTheExperimentsListPagesAndRefusesBadInput lists three experiments two a page, newest
// first, and answers a bad page and an unknown experiment naming them.
func TestTheExperimentsListPagesAndRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newExpFixture(t)
	day := time.Now().UTC().Add(-48 * time.Hour)
	f.experiment(t, "x-old", 1, day, tenTaskRuns()[:2])
	f.experiment(t, "x-mid", 2, day.Add(time.Hour), nil)
	f.experiment(t, "x-new", 10, day.Add(2*time.Hour), tenTaskRuns()[:5])

	res, body := f.get(t, "/experiments")
	ids := regexp.MustCompile(`<tr data-experiment="([^"]+)">`).FindAllStringSubmatch(body, -1)
	if res.StatusCode != http.StatusOK || len(ids) != 2 || ids[0][1] != "x-new" || ids[1][1] != "x-mid" ||
		!strings.Contains(body, "page 1 of 2 · 3 experiments") || !strings.Contains(body, `href="/experiments?page=2"`) {
		t.Fatalf("first page: %d %v\n%s", res.StatusCode, ids, body)
	}
	if r := row(t, body, "data-experiment", "x-new"); !strings.Contains(r, "5 / 20") || !strings.Contains(r, "A, B") || !strings.Contains(r, "running") {
		t.Errorf("x-new row:\n%s", r)
	}
	res, body = f.get(t, "/experiments?page=2")
	if ids := regexp.MustCompile(`<tr data-experiment="([^"]+)">`).FindAllStringSubmatch(body, -1); res.StatusCode != http.StatusOK ||
		len(ids) != 1 || ids[0][1] != "x-old" || !strings.Contains(row(t, body, "data-experiment", "x-old"), "2 / 2") {
		t.Fatalf("second page: %d %v", res.StatusCode, ids)
	}
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/experiments?page=0", http.StatusBadRequest, `Page &#34;0&#34;`},
		{"/experiments?page=x", http.StatusBadRequest, `Page &#34;x&#34;`},
		{"/experiments/nope", http.StatusNotFound, `There is no experiment &#34;nope&#34;.`},
	} {
		if res, body := f.get(t, tc.path); res.StatusCode != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s: %d, want %d saying %s\n%s", tc.path, res.StatusCode, tc.code, tc.says, body)
		}
	}
	// An empty experiment has a page too: no runs yet, intervals [0, 1].
	if res, body := f.get(t, "/experiments/x-mid"); res.StatusCode != http.StatusOK || !strings.Contains(body, `data-col="ci">[0.00, 1.00]<`) {
		t.Errorf("experiment without runs: %d\n%s", res.StatusCode, body)
	}
}

// TestNoExperimentPagesWithoutEvals: a console without Experiments has neither the pages nor
// the nav link.
func TestNoExperimentPagesWithoutEvals(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	if res, _ := f.get(t, "/experiments"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /experiments without evals: %d, want 404", res.StatusCode)
	}
	if _, body := f.get(t, "/"); strings.Contains(body, `href="/experiments"`) {
		t.Errorf("nav links to experiments without evals")
	}
}
