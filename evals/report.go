package evals

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
)

// Run is one finished run of a task under a variant (one repetition).
type Run struct {
	Task       string        `json:"task"`
	Variant    string        `json:"variant"`
	Rep        int           `json:"rep"`            // 0-based repetition
	Closed     bool          `json:"closed"`         // the outer loop closed the item
	Exit       string        `json:"exit,omitempty"` // the attempt's exit reason (e.g. "completed", "budget_exhausted"); "" when unknown
	CostUSD    float64       `json:"cost_usd"`
	WallTime   time.Duration `json:"wall_time_ns"`
	ModelCalls int           `json:"model_calls"`
	Tokens     int           `json:"tokens"`
}

// UnknownExit is the key under which Report counts runs whose exit reason is unknown ("").
const UnknownExit = "unknown"

// ReportOptions tunes BuildReport.
type ReportOptions struct {
	// Seed seeds the bootstrap, so the same runs always give the same report.
	Seed int64
	// BootstrapSamples is the number of bootstrap resamples; ≤ 0 means DefaultBootstrapSamples.
	BootstrapSamples int
	// Pairs lists the (baseline, candidate) comparisons, in order. Empty means the first variant
	// as the baseline against each other one.
	Pairs [][2]string
}

// Report is the outcome of an experiment: the JSON of `outerloop eval report --json`.
//
// Fractional numbers are rounded to 12 decimal places (see round). Undefined numbers are nil
// pointers, null in JSON, never NaN: a close rate with no runs, a cost
// per close with no closes, a wall-time percentile with no runs, a pass@k or pass^k that no task
// has k runs for, a cost-per-close interval that no bootstrap sample defines.
type Report struct {
	ID     string `json:"id"`
	Suite  string `json:"suite"`
	Repeat int    `json:"repeat"`
	// VariantOrder is the variants in the order the experiment named them (JSON objects have no
	// order).
	VariantOrder []string                `json:"variant_order"`
	Variants     map[string]VariantStats `json:"variants"`
	Pairs        []Pair                  `json:"pairs"`
	// Tasks is one row per task: the regressions of the first pair first (see TaskRow.Regressed),
	// then by id.
	Tasks []TaskRow `json:"tasks"`
	// Versions is what the experiment ran under (Runner.Report fills it in).
	Versions *Versions `json:"versions,omitempty"`
}

// VariantStats is one variant's numbers over all its runs.
type VariantStats struct {
	Runs   int `json:"runs"`
	Closed int `json:"closed"` // runs that closed
	// CloseRate is Closed/Runs, nil with no runs; CloseRateCI95 is its Wilson interval at 95%
	// ([0, 1] with no runs). Runs of one task are not independent, so with repeat > 1 the
	// interval is narrower than the evidence; pass^k and the per-task rows show the spread.
	CloseRate     *float64   `json:"close_rate"`
	CloseRateCI95 [2]float64 `json:"close_rate_ci95"`
	// PassAtK maps k = "1".."repeat" to PassAtK averaged over the tasks with at least k runs.
	PassAtK map[string]*float64 `json:"pass_at_k"`
	// PassHatK maps k = "1".."repeat" to pass^k: the share of the tasks with at least k runs
	// whose first k runs (by Rep) all closed. At k = repeat it is the share of tasks that closed
	// in every run; it measures reliability where pass@k measures reach.
	PassHatK map[string]*float64 `json:"pass_hat_k"`
	CostUSD  float64             `json:"cost_usd"` // all runs, closed or not
	// CostPerCloseUSD is CostUSD/Closed: what one close costs, paying for the failures too. Nil
	// when nothing closed.
	CostPerCloseUSD *float64       `json:"cost_per_close_usd"`
	WallTimeS       Quantiles      `json:"wall_time_s"`
	ModelCalls      int            `json:"model_calls"`
	Tokens          int            `json:"tokens"`
	Exits           map[string]int `json:"exits"`        // runs by exit reason; UnknownExit for ""
	Tasks           int            `json:"tasks"`        // tasks with at least one run
	TasksClosed     int            `json:"tasks_closed"` // tasks closed by the majority rule (MajorityClosed)
}

// Quantiles are percentiles of run wall time in seconds, by Percentile's linear interpolation;
// nil with no runs.
type Quantiles struct {
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
}

// Pair compares a candidate with a baseline on the tasks both ran (a task with runs under only
// one of them is left out of the pair). A task counts as closed for a variant by the majority
// rule (MajorityClosed).
type Pair struct {
	Baseline      string `json:"baseline"`
	Candidate     string `json:"candidate"`
	Both          int    `json:"both"`
	BaselineOnly  int    `json:"baseline_only"` // regressions
	CandidateOnly int    `json:"candidate_only"`
	Neither       int    `json:"neither"`
	// McNemarP is McNemarExact(BaselineOnly, CandidateOnly): how likely a split of the
	// discordant tasks at least this uneven is when the variants are equally good.
	McNemarP float64 `json:"mcnemar_p"`
	// CostPerCloseDeltaUSD is the candidate's cost per close minus the baseline's on the paired
	// tasks; CostPerCloseDeltaCI95 its bootstrap interval over tasks
	// (BootstrapCostPerCloseDelta). Each is nil when undefined: when either variant closed
	// nothing, or no bootstrap sample had closes under both.
	CostPerCloseDeltaUSD  *float64    `json:"cost_per_close_delta_usd"`
	CostPerCloseDeltaCI95 *[2]float64 `json:"cost_per_close_delta_ci95"`
}

// TaskRow is one task's outcome under each variant. It marshals as
// {"id": "...", "A": {...}, "B": {...}}: the cells are keyed by variant name beside the id, so
// a variant must not be named "id".
type TaskRow struct {
	ID string
	// Cells holds a cell for every variant of the report; a variant that never ran the task has
	// a zero cell.
	Cells map[string]TaskCell
}

// TaskCell is one task's runs under one variant.
type TaskCell struct {
	Closed  int     `json:"closed"` // runs that closed
	Runs    int     `json:"runs"`
	CostUSD float64 `json:"cost_usd"`
}

// MajorityClosed reports whether the task counts as closed for the variant: MajorityClosed of its
// runs.
func (c TaskCell) MajorityClosed() bool { return MajorityClosed(c.Closed, c.Runs) }

// Regressed reports whether the task is a regression from baseline to candidate: both ran it,
// the baseline closed it by the majority rule and the candidate did not.
func (t TaskRow) Regressed(baseline, candidate string) bool {
	b, c := t.Cells[baseline], t.Cells[candidate]
	return b.Runs > 0 && c.Runs > 0 && b.MajorityClosed() && !c.MajorityClosed()
}

// Regressed reports whether t is a regression for the report's first pair, the one the task
// rows are ordered by; false when the report has no pairs.
func (r Report) Regressed(t TaskRow) bool {
	if len(r.Pairs) == 0 {
		return false
	}
	return t.Regressed(r.Pairs[0].Baseline, r.Pairs[0].Candidate)
}

// MarshalJSON writes {"id": ..., "<variant>": {...}, ...} with the variants in name order.
func (t TaskRow) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	id, err := json.Marshal(t.ID)
	if err != nil {
		return nil, err
	}
	buf.WriteString(`{"id":`)
	buf.Write(id)
	for _, v := range slices.Sorted(maps.Keys(t.Cells)) {
		if v == "id" {
			return nil, fmt.Errorf("task %q: a variant named %q collides with the task id", t.ID, v)
		}
		name, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		cell, err := json.Marshal(t.Cells[v])
		if err != nil {
			return nil, err
		}
		buf.WriteByte(',')
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(cell)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes, so a saved report can be gated or printed again.
func (t *TaskRow) UnmarshalJSON(data []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	raw, ok := fields["id"]
	if !ok {
		return errors.New("task row: no id")
	}
	*t = TaskRow{Cells: make(map[string]TaskCell, len(fields)-1)}
	if err := json.Unmarshal(raw, &t.ID); err != nil {
		return fmt.Errorf("task row id: %w", err)
	}
	for k, raw := range fields {
		if k == "id" {
			continue
		}
		var c TaskCell
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("task %q variant %q: %w", t.ID, k, err)
		}
		t.Cells[k] = c
	}
	return nil
}

// BuildReport computes the report of experiment id over runs.
//
// variants names and orders the variants; runs of other variants are left out. Empty variants
// means every variant in runs, by name. repeat is the experiment's repetitions per task and
// bounds k in pass@k and pass^k; repeat < 1 means the most runs any task has under any variant.
// A pair naming a variant without runs compares against empty: no paired tasks, p = 1, null
// intervals.
func BuildReport(id, suite string, repeat int, variants []string, runs []Run, opts ReportOptions) Report {
	if len(variants) == 0 {
		seen := map[string]bool{}
		for _, r := range runs {
			seen[r.Variant] = true
		}
		variants = append([]string{}, slices.Sorted(maps.Keys(seen))...) // [] in JSON, not null
	} else {
		variants = dedupe(variants)
	}
	listed := make(map[string]bool, len(variants))
	for _, v := range variants {
		listed[v] = true
	}

	// byTask[task][variant] holds the runs, sorted by Rep for pass^k.
	byTask := map[string]map[string][]Run{}
	for _, r := range runs {
		if !listed[r.Variant] {
			continue
		}
		if byTask[r.Task] == nil {
			byTask[r.Task] = map[string][]Run{}
		}
		byTask[r.Task][r.Variant] = append(byTask[r.Task][r.Variant], r)
	}
	taskIDs := slices.Sorted(maps.Keys(byTask))
	for _, t := range taskIDs {
		for _, rs := range byTask[t] {
			slices.SortStableFunc(rs, func(a, b Run) int { return cmp.Compare(a.Rep, b.Rep) })
		}
	}
	if repeat < 1 {
		repeat = 1
		for _, t := range taskIDs {
			for _, rs := range byTask[t] {
				repeat = max(repeat, len(rs))
			}
		}
	}

	rep := Report{
		ID:           id,
		Suite:        suite,
		Repeat:       repeat,
		VariantOrder: variants,
		Variants:     make(map[string]VariantStats, len(variants)),
		Pairs:        []Pair{},
		Tasks:        make([]TaskRow, 0, len(taskIDs)),
	}
	for _, v := range variants {
		rep.Variants[v] = variantStats(v, taskIDs, byTask, repeat)
	}

	pairs := opts.Pairs
	if len(pairs) == 0 {
		for _, v := range variants[min(1, len(variants)):] {
			pairs = append(pairs, [2]string{variants[0], v})
		}
	}
	for _, p := range pairs {
		rep.Pairs = append(rep.Pairs, pairStats(p[0], p[1], taskIDs, byTask, opts))
	}

	for _, t := range taskIDs {
		row := TaskRow{ID: t, Cells: make(map[string]TaskCell, len(variants))}
		for _, v := range variants {
			var c TaskCell
			for _, r := range byTask[t][v] {
				c.Runs++
				c.CostUSD += r.CostUSD
				if r.Closed {
					c.Closed++
				}
			}
			c.CostUSD = round(c.CostUSD)
			row.Cells[v] = c
		}
		rep.Tasks = append(rep.Tasks, row)
	}
	// Regressions first: they are what a reviewer of a configuration change must read.
	slices.SortStableFunc(rep.Tasks, func(a, b TaskRow) int {
		ra, rb := rep.Regressed(a), rep.Regressed(b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return rep
}

func variantStats(v string, taskIDs []string, byTask map[string]map[string][]Run, repeat int) VariantStats {
	s := VariantStats{
		PassAtK:  make(map[string]*float64, repeat),
		PassHatK: make(map[string]*float64, repeat),
		Exits:    map[string]int{},
	}
	var walls []float64
	for _, t := range taskIDs {
		rs := byTask[t][v]
		if len(rs) == 0 {
			continue
		}
		s.Tasks++
		closed := 0
		for _, r := range rs {
			s.Runs++
			if r.Closed {
				closed++
			}
			s.CostUSD += r.CostUSD
			s.ModelCalls += r.ModelCalls
			s.Tokens += r.Tokens
			walls = append(walls, r.WallTime.Seconds())
			exit := r.Exit
			if exit == "" {
				exit = UnknownExit
			}
			s.Exits[exit]++
		}
		s.Closed += closed
		if MajorityClosed(closed, len(rs)) {
			s.TasksClosed++
		}
	}
	s.CostUSD = round(s.CostUSD)
	if s.Runs > 0 {
		s.CloseRate = ptr(float64(s.Closed) / float64(s.Runs))
		slices.Sort(walls)
		s.WallTimeS = Quantiles{P50: ptr(percentileSorted(walls, 0.5)), P90: ptr(percentileSorted(walls, 0.9))}
	}
	lo, hi := Wilson(s.Closed, s.Runs, Z95)
	s.CloseRateCI95 = [2]float64{round(lo), round(hi)}
	if s.Closed > 0 {
		s.CostPerCloseUSD = ptr(s.CostUSD / float64(s.Closed))
	}

	for k := 1; k <= repeat; k++ {
		var at, hat float64
		tasks := 0
		for _, t := range taskIDs {
			rs := byTask[t][v]
			if len(rs) < k {
				continue
			}
			tasks++
			at += PassAtK(len(rs), countClosed(rs), k)
			if countClosed(rs[:k]) == k {
				hat++
			}
		}
		key := strconv.Itoa(k)
		s.PassAtK[key], s.PassHatK[key] = nil, nil
		if tasks > 0 {
			s.PassAtK[key] = ptr(at / float64(tasks))
			s.PassHatK[key] = ptr(hat / float64(tasks))
		}
	}
	return s
}

func pairStats(baseline, candidate string, taskIDs []string, byTask map[string]map[string][]Run, opts ReportOptions) Pair {
	p := Pair{Baseline: baseline, Candidate: candidate}
	var paired []PairedTask
	for _, t := range taskIDs {
		b, c := byTask[t][baseline], byTask[t][candidate]
		if len(b) == 0 || len(c) == 0 {
			continue
		}
		bc, cc := countClosed(b), countClosed(c)
		switch bm, cm := MajorityClosed(bc, len(b)), MajorityClosed(cc, len(c)); {
		case bm && cm:
			p.Both++
		case bm:
			p.BaselineOnly++
		case cm:
			p.CandidateOnly++
		default:
			p.Neither++
		}
		paired = append(paired, PairedTask{
			Baseline:  TaskCost{CostUSD: sumCost(b), Closed: bc},
			Candidate: TaskCost{CostUSD: sumCost(c), Closed: cc},
		})
	}
	p.McNemarP = McNemarExact(p.BaselineOnly, p.CandidateOnly)
	if d, ok := CostPerCloseDelta(paired); ok {
		p.CostPerCloseDeltaUSD = ptr(d)
	}
	if lo, hi, ok := BootstrapCostPerCloseDelta(paired, opts.BootstrapSamples, opts.Seed); ok {
		p.CostPerCloseDeltaCI95 = &[2]float64{round(lo), round(hi)}
	}
	return p
}

func countClosed(rs []Run) int {
	n := 0
	for _, r := range rs {
		if r.Closed {
			n++
		}
	}
	return n
}

func sumCost(rs []Run) float64 {
	var c float64
	for _, r := range rs {
		c += r.CostUSD
	}
	return c
}

func dedupe(xs []string) []string {
	seen := make(map[string]bool, len(xs))
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// ptr returns a pointer to round(x), or nil when x is NaN or infinite, so that no such value
// reaches JSON (encoding/json refuses them).
func ptr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	x = round(x)
	return &x
}

// round rounds x to 12 decimal places: it removes the noise of float sums (ten runs at 0.12 USD
// cost 1.2000000000000002) from the report, far below anything a cost, rate or time means.
func round(x float64) float64 {
	return math.Round(x*1e12) / 1e12
}
