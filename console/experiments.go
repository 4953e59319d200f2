package console

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"outerloop/api"
	"outerloop/evals"
)

// Experiments of the eval namespace: a list page and one page per experiment with its report
// (the numbers of `outerloop eval report`), its progress while it runs, and a chart drawn on
// the server as inline SVG, so that it needs no script. The reads are api.Experiments', the
// same as GET /api/experiments.

// registerExperiments adds the experiment pages when experiments are wired.
func (c *Console) registerExperiments(mux *http.ServeMux) {
	if c.o.Experiments == nil {
		return
	}
	mux.HandleFunc("GET /experiments", c.page(c.experiments))
	mux.HandleFunc("GET /experiments/{id}", c.page(c.experiment))
}

type experimentsPage struct {
	Rows                 []experimentRow
	Total, PageNo, Pages int
	Prev, Next           string
}

type experimentRow struct {
	api.ExperimentView
	StateClass string
	Variants   string
}

func (c *Console) experiments(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	v.Title, v.Nav = "Experiments", "experiments"
	pageNo, ok := pageNumber(r)
	if !ok {
		return c.badPage(v, r, "/experiments")
	}
	list, total, err := c.o.Experiments.List(r.Context(), (pageNo-1)*c.o.PageSize, c.o.PageSize)
	if err != nil {
		return c.internal(v, err)
	}
	p := experimentsPage{Total: int(total), Pages: max(1, (int(total)+c.o.PageSize-1)/c.o.PageSize)}
	p.PageNo = pageNo
	if pageNo > p.Pages {
		// Past the end (the list shrank): show the last page rather than an empty one.
		p.PageNo = p.Pages
		if list, _, err = c.o.Experiments.List(r.Context(), (p.PageNo-1)*c.o.PageSize, c.o.PageSize); err != nil {
			return c.internal(v, err)
		}
	}
	for _, l := range list {
		ev := api.NewExperimentView(l.Experiment, l.Done)
		p.Rows = append(p.Rows, experimentRow{ExperimentView: ev, StateClass: expStateClass(ev.State),
			Variants: strings.Join(l.VariantNames(), ", ")})
	}
	link := func(n int) string {
		if n <= 1 {
			return "/experiments"
		}
		return "/experiments?page=" + strconv.Itoa(n)
	}
	if p.PageNo > 1 {
		p.Prev = link(p.PageNo - 1)
	}
	if p.PageNo < p.Pages {
		p.Next = link(p.PageNo + 1)
	}
	v.Page = p
	return "experiments", http.StatusOK
}

// expStateClass is the badge colour of an experiment's state.
func expStateClass(s evals.State) string {
	switch s {
	case evals.StateFinished:
		return "st-good"
	case evals.StateStopped:
		return "st-bad"
	}
	return "st-busy"
}

type experimentPage struct {
	Exp        api.ExperimentView
	StateClass string
	Variants   string
	Progress   *progressView
	// ProgressError says why the progress could not be read (the report still shows).
	ProgressError string
	Order         []string
	Rows          []variantRow
	Pairs         []pairRow
	Tasks         []taskRow
	Regression    string // "A → B": the pair the task rows mark regressions of
	Chart         chart
	Versions      []versionRow
}

// versionRow is one template's versions: in production and under each variant (in Order).
type versionRow struct {
	Template, Production string
	Variants             []string
}

type progressView struct {
	evals.Progress
	Running bool
	Closed  []nameCount // per variant, in the experiment's order
	Budget  string
}

type nameCount struct {
	Name  string
	Count int
}

// variantRow is one variant's numbers, formatted as `eval report` prints them.
type variantRow struct {
	Name, CloseRate, CI, PassAtK, PassHatK, Cost, PerClose, P50, P90, Exits string
	Runs, Closed, ModelCalls, Tokens                                        int
}

type pairRow struct {
	Baseline, Candidate, McNemarP, Delta, DeltaCI string
	Both, BaselineOnly, CandidateOnly, Neither    int
}

type taskRow struct {
	ID        string
	Cells     []string
	Regressed bool
}

func (c *Console) experiment(w http.ResponseWriter, r *http.Request, v *view) (string, int) {
	id := r.PathValue("id")
	v.Nav = "experiments"
	d, err := api.LoadExperiment(r.Context(), c.o.Experiments, id)
	if errors.Is(err, api.ErrUnknownExperiment) {
		return c.message(v, http.StatusNotFound, "No such experiment", fmt.Sprintf("There is no experiment %q.", id), "/experiments")
	}
	if err != nil {
		return c.internal(v, err)
	}
	rep := d.Report
	order := rep.VariantOrder
	p := experimentPage{Exp: d.Experiment, StateClass: expStateClass(d.Experiment.State), Order: order,
		ProgressError: d.ProgressError, Chart: newChart(rep)}
	names := make([]string, 0, len(d.Experiment.Variants))
	for _, vr := range d.Experiment.Variants {
		names = append(names, vr.Name)
	}
	p.Variants = strings.Join(names, ", ")
	if pr := d.Progress; pr != nil {
		pv := &progressView{Progress: *pr, Running: pr.State == evals.StateRunning, Budget: "no budget"}
		for _, n := range order {
			pv.Closed = append(pv.Closed, nameCount{n, pr.Closed[n]})
		}
		if pr.BudgetUSD > 0 {
			pv.Budget = "of " + usd(pr.BudgetUSD) + " budget"
		}
		p.Progress = pv
	}
	for _, n := range order {
		s := rep.Variants[n]
		p.Rows = append(p.Rows, variantRow{Name: n, Runs: s.Runs, Closed: s.Closed, CloseRate: opt(s.CloseRate, rate),
			CI:      "[" + rate(s.CloseRateCI95[0]) + ", " + rate(s.CloseRateCI95[1]) + "]",
			PassAtK: byK(s.PassAtK, rep.Repeat), PassHatK: byK(s.PassHatK, rep.Repeat), Cost: usd(s.CostUSD),
			PerClose: opt(s.CostPerCloseUSD, usd), P50: opt(s.WallTimeS.P50, seconds), P90: opt(s.WallTimeS.P90, seconds),
			ModelCalls: s.ModelCalls, Tokens: s.Tokens, Exits: exitsText(s.Exits)})
	}
	for _, pr := range rep.Pairs {
		row := pairRow{Baseline: pr.Baseline, Candidate: pr.Candidate, Both: pr.Both, BaselineOnly: pr.BaselineOnly,
			CandidateOnly: pr.CandidateOnly, Neither: pr.Neither, McNemarP: strconv.FormatFloat(pr.McNemarP, 'g', 3, 64),
			Delta: opt(pr.CostPerCloseDeltaUSD, signedUSD), DeltaCI: "—"}
		if ci := pr.CostPerCloseDeltaCI95; ci != nil {
			row.DeltaCI = "[" + signedUSD(ci[0]) + ", " + signedUSD(ci[1]) + "]"
		}
		p.Pairs = append(p.Pairs, row)
	}
	if len(rep.Pairs) > 0 {
		p.Regression = rep.Pairs[0].Baseline + " → " + rep.Pairs[0].Candidate
	}
	// rep.Tasks is already in the CLI's order: the first pair's regressions first, then by id.
	for _, t := range rep.Tasks {
		row := taskRow{ID: t.ID, Regressed: rep.Regressed(t)}
		for _, n := range order {
			cell := t.Cells[n]
			if cell.Runs == 0 {
				row.Cells = append(row.Cells, "—")
				continue
			}
			row.Cells = append(row.Cells, fmt.Sprintf("%d/%d closed, %s", cell.Closed, cell.Runs, usd(cell.CostUSD)))
		}
		p.Tasks = append(p.Tasks, row)
	}
	if vs := d.Experiment.Versions; vs != nil {
		for _, t := range slices.Sorted(maps.Keys(vs.Templates)) {
			row := versionRow{Template: t, Production: vs.Templates[t]}
			for _, n := range order {
				row.Variants = append(row.Variants, vs.Variants[n][t])
			}
			p.Versions = append(p.Versions, row)
		}
	}
	v.Title, v.Page = "Experiment "+d.Experiment.ID, p
	return "experiment", http.StatusOK
}

// The formats of `eval report` (evals/table.go), so the page and the CLI read alike; "—" for
// an undefined number.

func opt(x *float64, f func(float64) string) string {
	if x == nil {
		return "—"
	}
	return f(*x)
}

func rate(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// usd is an amount in USD with two decimals, or three significant digits below 0.1 so that a
// small cost per close stays visible.
func usd(x float64) string {
	if x < 0 {
		return "−" + usd(-x)
	}
	if x == 0 || x >= 0.1 {
		return "$" + strconv.FormatFloat(x, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(x, 'g', 3, 64)
}

func signedUSD(x float64) string {
	if x > 0 {
		return "+" + usd(x)
	}
	return usd(x)
}

func byK(m map[string]*float64, repeat int) string {
	parts := make([]string, 0, repeat)
	for k := 1; k <= repeat; k++ {
		key := strconv.Itoa(k)
		parts = append(parts, key+": "+opt(m[key], rate))
	}
	return strings.Join(parts, " · ")
}

func exitsText(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ", ")
}

// chart is the experiment's chart: per variant its close rate with the 95% interval as an
// error bar, and its cost per close, in two panels of one SVG. The geometry is computed here
// and the template only draws it, so a test can check every coordinate against the report.
type chart struct {
	Width, Height int
	Desc          string // the values in words, for screen readers
	Panels        []panel
}

type panel struct {
	ID, Title, Axis string
	X, Y, W, H      float64 // the plot area
	Bottom, Right   float64 // Y+H, X+W
	AxisX, AxisY    float64 // the axis title, rotated a quarter turn
	Ticks           []tick
	Bars            []chartBar
}

type tick struct {
	Value string // data-tick: the value the line is at
	Label string
	Y     float64
}

type chartBar struct {
	Variant string
	Defined bool    // a value to draw (a close rate with runs, a cost per close with closes)
	Value   string  // data-value
	X, W    float64 // the bar
	Y, H    float64
	CX      float64 // its centre, where the label and the error bar go
	Label   string
	LabelY  float64
	CI      *errorBar
}

// errorBar is an interval drawn from Lo up to Hi at the bar's centre, with caps.
type errorBar struct {
	Lo, Hi       string  // data-lo, data-hi: the interval
	YLo, YHi     float64 // y of Lo (lower on screen) and of Hi
	CapX1, CapX2 float64
	LabelY       float64
	Label        string
}

// Chart geometry: each variant gets a slot of slotW in each panel; the plot area is plotH
// high, below a title and above the variant names.
const (
	slotW  = 84.0
	plotH  = 180.0
	padL   = 52.0 // room for the y labels
	padTop = 36.0
	padBot = 40.0
	gap    = 28.0 // between panels
)

func newChart(rep evals.Report) chart {
	n := max(1, len(rep.VariantOrder))
	w := max(200, slotW*float64(n))
	mk := func(i int, id, title, axis string) panel {
		x := padL + float64(i)*(w+padL+gap)
		return panel{ID: id, Title: title, Axis: axis, X: x, Y: padTop, W: w, H: plotH, Bottom: padTop + plotH, Right: x + w,
			AxisX: -(padTop + plotH/2), AxisY: x - 40}
	}
	rates := mk(0, "close-rate", "Close rate, 95% interval", "close rate")
	costs := mk(1, "cost-per-close", "Cost per close (USD)", "USD per close")
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		rates.Ticks = append(rates.Ticks, tick{Value: fmtCoord(f), Label: rate(f), Y: rates.yOf(f, 1)})
	}
	most := 0.0
	for _, n := range rep.VariantOrder {
		if c := rep.Variants[n].CostPerCloseUSD; c != nil {
			most = max(most, *c)
		}
	}
	// Round ticks (0, 0.1, 0.2, 0.3 rather than quarters of the largest value), as many as
	// reach the largest cost per close.
	step := niceCeil(most / 4)
	ticks := max(1, int(math.Ceil(most/step-1e-9)))
	top := step * float64(ticks)
	for i := range ticks + 1 {
		f := round12(step * float64(i))
		costs.Ticks = append(costs.Ticks, tick{Value: fmtCoord(f), Label: usd(f), Y: costs.yOf(f, top)})
	}
	var desc []string
	for i, n := range rep.VariantOrder {
		s := rep.Variants[n]
		rb := rates.bar(i, n, s.CloseRate, 1, rate)
		lo, hi := s.CloseRateCI95[0], s.CloseRateCI95[1]
		rb.CI = &errorBar{Lo: fmtCoord(lo), Hi: fmtCoord(hi), YLo: rates.yOf(lo, 1), YHi: rates.yOf(hi, 1),
			CapX1: rb.CX - 8, CapX2: rb.CX + 8}
		rb.CI.Label, rb.CI.LabelY = "["+rate(lo)+", "+rate(hi)+"]", rates.Bottom+30
		rb.LabelY = math.Min(rb.Y, rb.CI.YHi) - 6 // above the error bar, not under it
		rates.Bars = append(rates.Bars, rb)
		cb := costs.bar(i, n, s.CostPerCloseUSD, top, usd)
		if !cb.Defined {
			cb.Label = "no closes"
		}
		costs.Bars = append(costs.Bars, cb)
		desc = append(desc, fmt.Sprintf("%s: close rate %s (95%% interval %s to %s) over %d runs, cost per close %s",
			n, opt(s.CloseRate, rate), rate(lo), rate(hi), s.Runs, opt(s.CostPerCloseUSD, usd)))
	}
	if len(desc) == 0 {
		desc = append(desc, "no variant has runs yet")
	}
	return chart{Width: int(costs.Right + 12), Height: int(padTop + plotH + padBot + 8),
		Desc: strings.Join(desc, "; ") + ".", Panels: []panel{rates, costs}}
}

// yOf maps a value in [0, top] to the panel's y (0 at the bottom).
func (p panel) yOf(v, top float64) float64 {
	if top <= 0 {
		return p.Bottom
	}
	return round2(p.Bottom - p.H*math.Min(math.Max(v/top, 0), 1))
}

// bar is variant i's bar of value v (nil: undefined) on a scale of [0, top].
func (p panel) bar(i int, name string, v *float64, top float64, format func(float64) string) chartBar {
	x := p.X + float64(i)*slotW
	b := chartBar{Variant: name, X: round2(x + slotW*0.25), W: round2(slotW * 0.5), CX: round2(x + slotW/2), Y: p.Bottom, Label: "—", LabelY: p.Bottom - 4}
	if v == nil {
		return b
	}
	b.Defined, b.Value, b.Label = true, fmtCoord(*v), format(*v)
	b.Y = p.yOf(*v, top)
	b.H = round2(p.Bottom - b.Y)
	b.LabelY = b.Y - 4
	return b
}

// niceCeil rounds x up to 1, 2, 2.5 or 5 times a power of ten, for round axis ticks; 1 for
// nothing to draw.
func niceCeil(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// round12 removes float noise from a tick value (3 × 0.1 is 0.30000000000000004).
func round12(x float64) float64 { return math.Round(x*1e12) / 1e12 }

// fmtCoord writes a number for a data attribute: as short as it is exact.
func fmtCoord(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
