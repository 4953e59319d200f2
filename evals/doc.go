// Package evals judges a configuration by evidence: an experiment re-runs many tasks of a suite
// as real work items under named variants (a model, a template, a budget, ...), and the
// statistics here compare the variants on what the outer loop actually closed.
//
// This package owns experiments, their runs, and the statistics that compare variants.
// BuildReport turns the finished runs of an experiment into a Report: per variant the close rate
// with its Wilson interval, pass@k and pass^k, cost, cost per close, wall time and exits; per
// pair of variants the paired task outcomes with McNemar's exact test and a bootstrap interval
// for the change in cost per close; and per task the counts under each variant, regressions
// first. A Report marshals to the JSON of `outerloop eval report --json`, prints as a table
// (WriteTable), and is what Gate checks before a configuration change ships.
//
// Undefined numbers (a rate with no runs, a cost per close with no closes, an interval no
// bootstrap sample defines) are nil pointers in the Report and null in its JSON: NaN never
// reaches JSON.
package evals
