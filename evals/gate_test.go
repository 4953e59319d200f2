package evals

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// variantRuns returns n runs of variant v, one per task t000, t001, …, the first closed of them
// closed, each costing cost.
func variantRuns(v string, n, closed int, cost float64) []Run {
	runs := make([]Run, n)
	for i := range runs {
		runs[i] = Run{Task: fmt.Sprintf("t%03d", i), Variant: v, Closed: i < closed, Exit: "completed", CostUSD: cost}
	}
	return runs
}

// gateReport builds a report of A and B from variantRuns.
func gateReport(aN, aClosed int, aCost float64, bN, bClosed int, bCost float64) Report {
	runs := append(variantRuns("A", aN, aClosed, aCost), variantRuns("B", bN, bClosed, bCost)...)
	return BuildReport("exp", "suite", 1, []string{"A", "B"}, runs, ReportOptions{BootstrapSamples: 50})
}

func TestGate(t *testing.T) {
	ten := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{})
	tests := []struct {
		name string
		r    Report
		o    GateOptions
		want []string
	}{
		{
			// 0.80 − 0.50 = 0.30 > 0.05; 0.18/0.15 − 1 = 20% > 10%.
			name: "both conditions fail",
			r:    ten,
			o:    GateOptions{Baseline: "A", Candidate: "B", MinRuns: 10},
			want: []string{
				"close rate dropped 0.30 (0.80 → 0.50), more than 0.05 allowed",
				"cost per close rose 20% (0.15 → 0.18 USD), more than 10% allowed",
			},
		},
		{
			// The other way round the candidate closes more for less: 0.50 → 0.80, 0.18 → 0.15.
			name: "better candidate passes",
			r:    ten,
			o:    GateOptions{Baseline: "B", Candidate: "A"},
		},
		{
			name: "looser tolerances pass",
			r:    ten,
			o:    GateOptions{Baseline: "A", Candidate: "B", MaxCloseRateDrop: 0.3, MaxCostPerCloseIncrease: 0.25},
		},
		{
			name: "too few runs",
			r:    ten,
			o:    GateOptions{Baseline: "B", Candidate: "A", MinRuns: 20},
			want: []string{
				"baseline B has 10 runs, fewer than the 20 required",
				"candidate A has 10 runs, fewer than the 20 required",
			},
		},
		{
			// 16/20 = 0.80 → 15/20 = 0.75 drops exactly 0.05; 0.10 → 0.11 per close is exactly
			// 10% more (A: 20 × 0.08 / 16 = 0.10; B: 20 × 0.0825 / 15 = 0.11). Both at the limit
			// pass, although 0.80 − 0.75 is not 0.05 in floating point.
			name: "exactly at the limits",
			r:    gateReport(20, 16, 0.08, 20, 15, 0.0825),
			o:    GateOptions{Baseline: "A", Candidate: "B"},
		},
		{
			// 800/1000 → 749/1000 drops 0.051: two decimals would print "0.05" for both.
			name: "message shows the digits that matter",
			r:    gateReport(1000, 800, 0.1, 1000, 749, 0.1*749/800),
			o:    GateOptions{Baseline: "A", Candidate: "B"},
			want: []string{"close rate dropped 0.051 (0.800 → 0.749), more than 0.050 allowed"},
		},
		{
			// Negative tolerances mean none: 0.80 → 0.79 and 0.10 → 0.1013 per close fail.
			// (A: 100 × 0.08 / 80 = 0.10; B: 100 × 0.08 / 79 = 0.10127, 1.3% more.)
			name: "no tolerance",
			r:    gateReport(100, 80, 0.08, 100, 79, 0.08),
			o:    GateOptions{Baseline: "A", Candidate: "B", MaxCloseRateDrop: -1, MaxCostPerCloseIncrease: -1},
			want: []string{
				"close rate dropped 0.01 (0.80 → 0.79), and no drop is allowed",
				"cost per close rose 1% (0.100 → 0.101 USD), and no increase is allowed",
			},
		},
		{
			name: "candidate closes nothing",
			r:    gateReport(10, 8, 0.1, 10, 0, 0.1),
			o:    GateOptions{Baseline: "A", Candidate: "B", MaxCloseRateDrop: 1},
			want: []string{"candidate B closed nothing in 10 runs (baseline A closed 8 of 10), so it has no cost per close"},
		},
		{
			// Any price beats closing nothing.
			name: "baseline closes nothing",
			r:    gateReport(10, 0, 0.01, 10, 1, 5),
			o:    GateOptions{Baseline: "A", Candidate: "B"},
		},
		{
			name: "neither closes anything",
			r:    gateReport(10, 0, 0.1, 10, 0, 0.2),
			o:    GateOptions{Baseline: "A", Candidate: "B"},
		},
		{
			name: "free baseline",
			r:    gateReport(10, 5, 0, 10, 5, 0.02),
			o:    GateOptions{Baseline: "A", Candidate: "B"},
			want: []string{"cost per close rose from 0 to 0.04 USD, more than 10% allowed"},
		},
		{
			// A candidate without runs is reported alone: there is nothing to compare.
			name: "candidate without runs",
			r:    BuildReport("exp", "s", 1, []string{"A", "C"}, variantRuns("A", 10, 8, 0.1), ReportOptions{}),
			o:    GateOptions{Baseline: "A", Candidate: "C", MinRuns: 5},
			want: []string{"candidate C has no runs"},
		},
	}
	for _, tt := range tests {
		got, err := Gate(tt.r, tt.o)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Gate =\n  %q\nwant\n  %q", tt.name, got, tt.want)
		}
	}
}

func TestGateErrors(t *testing.T) {
	r := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{})
	tests := []struct {
		o    GateOptions
		want string
	}{
		{GateOptions{Baseline: "A", Candidate: "Z"}, `gate: unknown candidate variant "Z" (report exp-1 has A, B)`},
		{GateOptions{Baseline: "Y", Candidate: "B"}, `gate: unknown baseline variant "Y" (report exp-1 has A, B)`},
		{GateOptions{Candidate: "B"}, "gate: no baseline variant named"},
		{GateOptions{Baseline: "A", Candidate: "A"}, `gate: baseline and candidate are both variant "A"`},
	}
	for _, tt := range tests {
		failed, err := Gate(r, tt.o)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Gate(%+v) = %q, %v; want error %q", tt.o, failed, err, tt.want)
		}
	}
}

func TestGateDecodedReport(t *testing.T) {
	// CI may gate a report saved as JSON: the same failures.
	r := BuildReport("exp-1", "calc-fixes", 1, []string{"A", "B"}, tenTasks(), ReportOptions{})
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	o := GateOptions{Baseline: "A", Candidate: "B"}
	want, _ := Gate(r, o)
	got, err := Gate(back, o)
	if err != nil || !reflect.DeepEqual(got, want) || len(got) != 2 {
		t.Errorf("decoded report: %q, %v; want %q", got, err, want)
	}
	if !strings.HasPrefix(got[0], "close rate dropped 0.30") {
		t.Errorf("first failure %q", got[0])
	}
}
