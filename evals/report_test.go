package evals

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tenTasks is the hand-made experiment the report tests check: 10 tasks, repeat 1, variants A
// and B.
//
//   - A closes task-0 … task-7 (8 of 10); every run costs 0.12 USD, so cost 1.20 and cost per
//     close 1.20/8 = 0.15. Task i takes 10·(i+1) s, i+1 model calls and 1000·(i+1) tokens:
//     wall times 10, 20, …, 100 s; 55 calls; 55000 tokens. Exits: task-9 ran out of budget, the
//     rest completed.
//   - B closes task-0 … task-4 (5 of 10); every run costs 0.09 USD, so cost 0.90 and cost per
//     close 0.18; 20 s, 2 calls and 500 tokens each. Exits: 5 completed, 4 budget_exhausted and
//     one unknown ("").
//
// So task-5, task-6 and task-7 are the regressions from A to B.
func tenTasks() []Run {
	var runs []Run
	for i := range 10 {
		task := fmt.Sprintf("task-%d", i)
		a := Run{Task: task, Variant: "A", Closed: i < 8, Exit: "completed", CostUSD: 0.12,
			WallTime: time.Duration(10*(i+1)) * time.Second, ModelCalls: i + 1, Tokens: 1000 * (i + 1)}
		if i == 9 {
			a.Exit = "budget_exhausted"
		}
		b := Run{Task: task, Variant: "B", Closed: i < 5, Exit: "completed", CostUSD: 0.09,
			WallTime: 20 * time.Second, ModelCalls: 2, Tokens: 500}
		switch {
		case i == 9:
			b.Exit = ""
		case i >= 5:
			b.Exit = "budget_exhausted"
		}
		runs = append(runs, a, b)
	}
	return runs
}

// decode marshals r and decodes it into generic JSON, as a consumer of --json sees it.
func decode(t *testing.T, r Report) map[string]any {
	t.Helper()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("marshal report: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("unmarshal report: %v", err)
	}
	return m
}

// num checks that m[key] is a JSON number within tol of want.
func num(t *testing.T, where string, m map[string]any, key string, want, tol float64) {
	t.Helper()
	got, ok := m[key].(float64)
	if !ok {
		t.Errorf("%s.%s = %#v, want a number %v", where, key, m[key], want)
		return
	}
	if !near(got, want, tol) {
		t.Errorf("%s.%s = %v, want %v", where, key, got, want)
	}
}

// isNull checks that m has key and its value is null.
func isNull(t *testing.T, where string, m map[string]any, key string) {
	t.Helper()
	v, ok := m[key]
	if !ok || v != nil {
		t.Errorf("%s.%s = %#v (present %v), want null", where, key, v, ok)
	}
}

func obj(t *testing.T, where string, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s = %#v, want an object", where, v)
	}
	return m
}

func arr(t *testing.T, where string, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("%s = %#v, want an array", where, v)
	}
	return a
}

func TestReportJSONShape(t *testing.T) {
	r := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{Seed: 7})
	m := decode(t, r)

	if m["id"] != "exp-1" || m["suite"] != "calc-fixes" {
		t.Errorf("id, suite = %v, %v", m["id"], m["suite"])
	}
	num(t, "report", m, "repeat", 1, 0)

	variants := obj(t, "variants", m["variants"])
	if len(variants) != 2 {
		t.Errorf("variants has %d entries, want 2", len(variants))
	}
	a := obj(t, "variants.A", variants["A"])
	num(t, "A", a, "runs", 10, 0)
	num(t, "A", a, "closed", 8, 0)
	num(t, "A", a, "close_rate", 0.8, 1e-12)
	// Wilson 8/10 at 95%: [0.4902, 0.9433] (arithmetic in TestWilson).
	ci := arr(t, "A.close_rate_ci95", a["close_rate_ci95"])
	if len(ci) != 2 || !near(ci[0].(float64), 0.4902, 5e-5) || !near(ci[1].(float64), 0.9433, 5e-5) {
		t.Errorf("A.close_rate_ci95 = %v, want [0.4902, 0.9433]", ci)
	}
	// repeat 1: pass@1 = mean of c/n = 8/10; pass^1 = share of tasks whose one run closed.
	num(t, "A.pass_at_k", obj(t, "A.pass_at_k", a["pass_at_k"]), "1", 0.8, 1e-12)
	num(t, "A.pass_hat_k", obj(t, "A.pass_hat_k", a["pass_hat_k"]), "1", 0.8, 1e-12)
	if n := len(obj(t, "A.pass_at_k", a["pass_at_k"])); n != 1 {
		t.Errorf("A.pass_at_k has %d keys, want 1 (k = 1..repeat)", n)
	}
	num(t, "A", a, "cost_usd", 1.20, 1e-9)
	num(t, "A", a, "cost_per_close_usd", 0.15, 1e-9)
	// Wall times 10, 20, …, 100 s: p50 at h = 9·0.5 = 4.5 → 50 + 0.5·10 = 55;
	// p90 at h = 9·0.9 = 8.1 → 90 + 0.1·10 = 91.
	wall := obj(t, "A.wall_time_s", a["wall_time_s"])
	num(t, "A.wall_time_s", wall, "p50", 55, 1e-9)
	num(t, "A.wall_time_s", wall, "p90", 91, 1e-9)
	num(t, "A", a, "model_calls", 55, 0) // 1 + 2 + … + 10
	num(t, "A", a, "tokens", 55000, 0)
	if exits := obj(t, "A.exits", a["exits"]); len(exits) != 2 {
		t.Errorf("A.exits = %v, want completed and budget_exhausted", exits)
	} else {
		num(t, "A.exits", exits, "completed", 9, 0)
		num(t, "A.exits", exits, "budget_exhausted", 1, 0)
	}
	num(t, "A", a, "tasks", 10, 0)
	num(t, "A", a, "tasks_closed", 8, 0)

	b := obj(t, "variants.B", variants["B"])
	num(t, "B", b, "runs", 10, 0)
	num(t, "B", b, "closed", 5, 0)
	num(t, "B", b, "close_rate", 0.5, 1e-12)
	// Wilson 5/10 at 95%: [0.2366, 0.7634] (arithmetic in TestWilson).
	ci = arr(t, "B.close_rate_ci95", b["close_rate_ci95"])
	if len(ci) != 2 || !near(ci[0].(float64), 0.2366, 5e-5) || !near(ci[1].(float64), 0.7634, 5e-5) {
		t.Errorf("B.close_rate_ci95 = %v, want [0.2366, 0.7634]", ci)
	}
	num(t, "B.pass_at_k", obj(t, "B.pass_at_k", b["pass_at_k"]), "1", 0.5, 1e-12)
	num(t, "B.pass_hat_k", obj(t, "B.pass_hat_k", b["pass_hat_k"]), "1", 0.5, 1e-12)
	num(t, "B", b, "cost_usd", 0.90, 1e-9)
	num(t, "B", b, "cost_per_close_usd", 0.18, 1e-9) // 0.90 / 5
	wall = obj(t, "B.wall_time_s", b["wall_time_s"])
	num(t, "B.wall_time_s", wall, "p50", 20, 1e-9)
	num(t, "B.wall_time_s", wall, "p90", 20, 1e-9)
	num(t, "B", b, "model_calls", 20, 0)
	num(t, "B", b, "tokens", 5000, 0)
	exits := obj(t, "B.exits", b["exits"])
	num(t, "B.exits", exits, "completed", 5, 0)
	num(t, "B.exits", exits, "budget_exhausted", 4, 0)
	num(t, "B.exits", exits, UnknownExit, 1, 0)

	pairs := arr(t, "pairs", m["pairs"])
	if len(pairs) != 1 {
		t.Fatalf("pairs = %v, want one (A against B)", pairs)
	}
	p := obj(t, "pairs[0]", pairs[0])
	if p["baseline"] != "A" || p["candidate"] != "B" {
		t.Errorf("pair = %v → %v, want A → B", p["baseline"], p["candidate"])
	}
	num(t, "pair", p, "both", 5, 0)          // task-0 … task-4
	num(t, "pair", p, "baseline_only", 3, 0) // task-5 … task-7
	num(t, "pair", p, "candidate_only", 0, 0)
	num(t, "pair", p, "neither", 2, 0) // task-8, task-9
	// McNemar exact, b = 3, c = 0: 2·C(3,0)/2³ = 0.25.
	num(t, "pair", p, "mcnemar_p", 0.25, 1e-12)
	// Cost per close delta: 0.18 − 0.15 = 0.03; its interval must hold it.
	num(t, "pair", p, "cost_per_close_delta_usd", 0.03, 1e-9)
	dci := arr(t, "pair.cost_per_close_delta_ci95", p["cost_per_close_delta_ci95"])
	if len(dci) != 2 || !(dci[0].(float64) < 0.03 && 0.03 < dci[1].(float64)) {
		t.Errorf("cost_per_close_delta_ci95 = %v, want an interval around 0.03", dci)
	}

	tasks := arr(t, "tasks", m["tasks"])
	if len(tasks) != 10 {
		t.Fatalf("tasks has %d rows, want 10", len(tasks))
	}
	// Regressions first (task-5, -6, -7), then the rest by id.
	want := []string{"task-5", "task-6", "task-7", "task-0", "task-1", "task-2", "task-3", "task-4", "task-8", "task-9"}
	for i, row := range tasks {
		row := obj(t, "task row", row)
		if row["id"] != want[i] {
			t.Errorf("tasks[%d].id = %v, want %v", i, row["id"], want[i])
		}
		if len(row) != 3 {
			t.Errorf("tasks[%d] has keys %v, want id, A, B", i, row)
		}
	}
	first := obj(t, "tasks[0]", tasks[0])
	ta := obj(t, "tasks[0].A", first["A"])
	num(t, "tasks[0].A", ta, "closed", 1, 0)
	num(t, "tasks[0].A", ta, "runs", 1, 0)
	num(t, "tasks[0].A", ta, "cost_usd", 0.12, 1e-12)
	tb := obj(t, "tasks[0].B", first["B"])
	num(t, "tasks[0].B", tb, "closed", 0, 0)
	num(t, "tasks[0].B", tb, "runs", 1, 0)
	num(t, "tasks[0].B", tb, "cost_usd", 0.09, 1e-12)
}

func TestReportRoundTrip(t *testing.T) {
	r := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{Seed: 7})
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !reflect.DeepEqual(r, back) {
		t.Errorf("round trip changed the report:\n got %+v\nwant %+v", back, r)
	}
}

func TestReportDeterministic(t *testing.T) {
	runs := tenTasks()
	one, _ := json.Marshal(BuildReport("e", "s", 1, nil, runs, ReportOptions{Seed: 3}))
	// Reversed input order must not matter either: tasks are resampled in id order.
	rev := make([]Run, len(runs))
	for i, r := range runs {
		rev[len(runs)-1-i] = r
	}
	two, _ := json.Marshal(BuildReport("e", "s", 1, nil, rev, ReportOptions{Seed: 3}))
	if string(one) != string(two) {
		t.Errorf("same runs and seed, different reports:\n%s\n%s", one, two)
	}
}

func TestReportRepeat(t *testing.T) {
	// Variant A, repeat 3, runs given out of Rep order:
	//   t1: reps 0,1,2 = ✓✓✓ (c = 3 of 3)
	//   t2: ✓✗✓ (c = 2 of 3)
	//   t3: ✗✗✓ (c = 1 of 3)
	//   t4: ✓✓ (2 runs only: left out of k = 3)
	// pass@1 = mean c/n = (1 + 2/3 + 1/3 + 1)/4 = 0.75
	// pass@2 = (1 [c = n] + 1 [n−c = 1 < 2] + (1 − C(2,2)/C(3,2) = 2/3) + 1)/4 = (11/3)/4 = 11/12
	// pass@3 over t1..t3 = (1 + 1 + 1)/3 = 1 (n − c < 3 for each)
	// pass^1: first run closed in t1, t2, t4 → 3/4
	// pass^2: first two closed in t1, t4 → 2/4
	// pass^3: all three closed in t1 only, of t1..t3 → 1/3
	// Variant B ran each task once: pass@2, pass@3, pass^2, pass^3 are undefined (null).
	closes := map[string][]bool{
		"t1": {true, true, true},
		"t2": {true, false, true},
		"t3": {false, false, true},
		"t4": {true, true},
	}
	var runs []Run
	for task, cs := range closes {
		for rep := len(cs) - 1; rep >= 0; rep-- {
			runs = append(runs, Run{Task: task, Variant: "A", Rep: rep, Closed: cs[rep], CostUSD: 1})
		}
		runs = append(runs, Run{Task: task, Variant: "B", Closed: true, CostUSD: 1})
	}
	r := BuildReport("e", "s", 3, []string{"A", "B"}, runs, ReportOptions{})
	m := decode(t, r)
	a := obj(t, "A", obj(t, "variants", m["variants"])["A"])
	at, hat := obj(t, "A.pass_at_k", a["pass_at_k"]), obj(t, "A.pass_hat_k", a["pass_hat_k"])
	num(t, "A.pass_at_k", at, "1", 0.75, 1e-12)
	num(t, "A.pass_at_k", at, "2", 11.0/12, 1e-12)
	num(t, "A.pass_at_k", at, "3", 1, 1e-12)
	num(t, "A.pass_hat_k", hat, "1", 0.75, 1e-12)
	num(t, "A.pass_hat_k", hat, "2", 0.5, 1e-12)
	num(t, "A.pass_hat_k", hat, "3", 1.0/3, 1e-12)
	num(t, "A", a, "closed", 8, 0) // 3 + 2 + 1 + 2
	num(t, "A", a, "runs", 11, 0)
	num(t, "A", a, "tasks_closed", 3, 0) // t1, t2 (2 of 3), t4; not t3 (1 of 3)

	b := obj(t, "B", obj(t, "variants", m["variants"])["B"])
	bat, bhat := obj(t, "B.pass_at_k", b["pass_at_k"]), obj(t, "B.pass_hat_k", b["pass_hat_k"])
	num(t, "B.pass_at_k", bat, "1", 1, 0)
	isNull(t, "B.pass_at_k", bat, "2")
	isNull(t, "B.pass_at_k", bat, "3")
	isNull(t, "B.pass_hat_k", bhat, "3")

	// Majority pairs: t3 is closed by B and not A (1 of 3); the rest are closed by both.
	p := obj(t, "pair", arr(t, "pairs", m["pairs"])[0])
	num(t, "pair", p, "both", 3, 0)
	num(t, "pair", p, "candidate_only", 1, 0)
	num(t, "pair", p, "mcnemar_p", 1, 0) // 2·C(1,0)/2 = 1
}

func TestReportMajorityTie(t *testing.T) {
	// The baseline closes 1 of 2 runs: a tie, not closed. The candidate closes 2 of 2.
	runs := []Run{
		{Task: "x", Variant: "A", Rep: 0, Closed: true},
		{Task: "x", Variant: "A", Rep: 1},
		{Task: "x", Variant: "B", Rep: 0, Closed: true},
		{Task: "x", Variant: "B", Rep: 1, Closed: true},
	}
	r := BuildReport("e", "s", 2, []string{"A", "B"}, runs, ReportOptions{})
	if p := r.Pairs[0]; p.CandidateOnly != 1 || p.Both != 0 {
		t.Errorf("pair = %+v, want the tie counted as not closed for A", p)
	}
}

func TestReportUndefined(t *testing.T) {
	// A closes nothing; C is listed but never ran. Nothing undefined may become NaN: the report
	// must marshal, with nulls.
	runs := []Run{
		{Task: "x", Variant: "A", CostUSD: 0.5, Exit: "failed"},
		{Task: "x", Variant: "B", CostUSD: 0.5, Closed: true, Exit: "completed"},
	}
	r := BuildReport("e", "s", 1, []string{"A", "B", "C"}, runs, ReportOptions{})
	m := decode(t, r)
	variants := obj(t, "variants", m["variants"])
	a := obj(t, "A", variants["A"])
	isNull(t, "A", a, "cost_per_close_usd")
	num(t, "A", a, "close_rate", 0, 0)
	c := obj(t, "C", variants["C"])
	isNull(t, "C", c, "close_rate")
	isNull(t, "C", c, "cost_per_close_usd")
	isNull(t, "C.wall_time_s", obj(t, "C.wall_time_s", c["wall_time_s"]), "p50")
	isNull(t, "C.pass_at_k", obj(t, "C.pass_at_k", c["pass_at_k"]), "1")
	if ci := arr(t, "C.close_rate_ci95", c["close_rate_ci95"]); ci[0] != 0.0 || ci[1] != 1.0 {
		t.Errorf("C.close_rate_ci95 = %v, want [0, 1]", ci)
	}
	pairs := arr(t, "pairs", m["pairs"])
	if len(pairs) != 2 {
		t.Fatalf("pairs = %v, want A→B and A→C", pairs)
	}
	ab := obj(t, "A→B", pairs[0])
	isNull(t, "A→B", ab, "cost_per_close_delta_usd")
	isNull(t, "A→B", ab, "cost_per_close_delta_ci95")
	num(t, "A→B", ab, "candidate_only", 1, 0)
	ac := obj(t, "A→C", pairs[1])
	if ac["candidate"] != "C" {
		t.Errorf("second pair = %v, want A→C", ac)
	}
	num(t, "A→C", ac, "mcnemar_p", 1, 0)
	num(t, "A→C", ac, "both", 0, 0)
	num(t, "A→C", ac, "neither", 0, 0) // x has no runs under C: not paired
	isNull(t, "A→C", ac, "cost_per_close_delta_ci95")
	// Every variant has a cell in every row, with zeros where it never ran.
	row := obj(t, "tasks[0]", arr(t, "tasks", m["tasks"])[0])
	num(t, "tasks[0].C", obj(t, "tasks[0].C", row["C"]), "runs", 0, 0)
}

func TestReportVariantsAndPairs(t *testing.T) {
	runs := tenTasks()
	// Runs of unlisted variants are left out; listed order is kept.
	r := BuildReport("e", "s", 1, []string{"B"}, runs, ReportOptions{})
	if len(r.Variants) != 1 || len(r.Pairs) != 0 || !reflect.DeepEqual(r.VariantOrder, []string{"B"}) {
		t.Errorf("variants B only: order %v, variants %d, pairs %d", r.VariantOrder, len(r.Variants), len(r.Pairs))
	}
	if data, _ := json.Marshal(r); !strings.Contains(string(data), `"pairs":[]`) {
		t.Errorf("no pairs must marshal as [], got %s", data)
	}
	// No variants named: every variant in the runs, by name.
	r = BuildReport("e", "s", 0, nil, runs, ReportOptions{})
	if !reflect.DeepEqual(r.VariantOrder, []string{"A", "B"}) || r.Repeat != 1 {
		t.Errorf("derived variants %v, repeat %d; want [A B], 1", r.VariantOrder, r.Repeat)
	}
	// Explicit pairs: B as the baseline. Then A's closes of task-5..7 are improvements, and the
	// task rows have no regressions: plain id order.
	r = BuildReport("e", "s", 1, []string{"A", "B"}, runs, ReportOptions{Pairs: [][2]string{{"B", "A"}}})
	if p := r.Pairs[0]; p.Baseline != "B" || p.CandidateOnly != 3 || p.BaselineOnly != 0 {
		t.Errorf("pair B→A = %+v", p)
	}
	if r.Tasks[0].ID != "task-0" {
		t.Errorf("first task %q, want task-0 (no regressions B→A)", r.Tasks[0].ID)
	}
}

func TestTaskRowVariantNamedID(t *testing.T) {
	r := BuildReport("e", "s", 1, nil, []Run{{Task: "x", Variant: "id"}}, ReportOptions{})
	if _, err := json.Marshal(r); err == nil || !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("marshal with a variant named id: err = %v, want one naming it", err)
	}
}

func TestReportEmpty(t *testing.T) {
	data, err := json.Marshal(BuildReport("e", "s", 0, nil, nil, ReportOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"e","suite":"s","repeat":1,"variant_order":[],"variants":{},"pairs":[],"tasks":[]}`
	if string(data) != want {
		t.Errorf("empty report = %s, want %s", data, want)
	}
}
