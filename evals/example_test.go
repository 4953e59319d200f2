package evals_test

import (
	"fmt"
	"os"
	"time"

	"outerloop/evals"
)

// An experiment of four tasks, once each under the current configuration ("base") and a
// cheaper model ("cheap"): the cheap one closes fewer tasks, and the gate says so.
func Example() {
	var runs []evals.Run
	for i, task := range []string{"add-overflow", "div-zero", "parse-neg", "round-half"} {
		runs = append(runs,
			evals.Run{Task: task, Variant: "base", Closed: i < 3, Exit: "completed",
				CostUSD: 0.20, WallTime: 40 * time.Second, ModelCalls: 6, Tokens: 9000},
			evals.Run{Task: task, Variant: "cheap", Closed: i < 2, Exit: "completed",
				CostUSD: 0.05, WallTime: 30 * time.Second, ModelCalls: 8, Tokens: 12000},
		)
	}
	r := evals.BuildReport("exp-7", "calc-fixes", 1, []string{"base", "cheap"}, runs, evals.ReportOptions{Seed: 1})
	if err := r.WriteTable(os.Stdout); err != nil {
		fmt.Println(err)
	}

	failed, err := evals.Gate(r, evals.GateOptions{Baseline: "base", Candidate: "cheap", MinRuns: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println()
	for _, f := range failed {
		fmt.Println("gate:", f)
	}
	// Output:
	// experiment exp-7, suite calc-fixes, repeat 1
	//
	// VARIANT  RUNS  CLOSED  CLOSE RATE  95% CI        PASS@K  PASS^K  COST USD  PER CLOSE  P50 S  P90 S  CALLS  TOKENS  EXITS
	// base     4     3       0.75        [0.30, 0.95]  1:0.75  1:0.75  0.80      0.27       40.0   40.0   24     36000   completed 4
	// cheap    4     2       0.50        [0.15, 0.85]  1:0.50  1:0.50  0.20      0.10       30.0   30.0   32     48000   completed 4
	//
	// BASELINE  CANDIDATE  BOTH  BASELINE ONLY  CANDIDATE ONLY  NEITHER  MCNEMAR P  Δ PER CLOSE  95% CI
	// base      cheap      2     1              0               1        1          -0.17        [-0.60, 0.00]
	//
	// TASK          base                  cheap                 REGRESSION base → cheap
	// parse-neg     1/1 closed, 0.20 USD  0/1 closed, 0.05 USD  regression
	// add-overflow  1/1 closed, 0.20 USD  1/1 closed, 0.05 USD
	// div-zero      1/1 closed, 0.20 USD  1/1 closed, 0.05 USD
	// round-half    0/1 closed, 0.20 USD  0/1 closed, 0.05 USD
	//
	// gate: close rate dropped 0.25 (0.75 → 0.50), more than 0.05 allowed
}
