package evals

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The gate's defaults, those of `outerloop eval gate`.
const (
	DefaultMaxCloseRateDrop        = 0.05 // absolute: 5 points of close rate
	DefaultMaxCostPerCloseIncrease = 0.10 // relative: 10% more per close
)

// gateSlack absorbs float rounding in the gate's comparisons, so that a drop of exactly the
// allowed amount (0.80 → 0.75 with 0.05 allowed) passes, although in float64 0.80 − 0.75 is
// 0.050000000000000044.
const gateSlack = 1e-9

// GateOptions are the conditions a candidate variant must meet against a baseline.
//
// As with net.Dialer's KeepAlive, a zero tolerance means its default and a negative one means
// none at all: the candidate must then be at least as good as the baseline.
type GateOptions struct {
	Baseline, Candidate string
	// MaxCloseRateDrop is how far the candidate's close rate may fall below the baseline's, in
	// absolute terms (0.05: from 0.80 to 0.75). Default DefaultMaxCloseRateDrop.
	MaxCloseRateDrop float64
	// MaxCostPerCloseIncrease is how much more the candidate may pay per close, relative to the
	// baseline (0.10: from 0.15 to 0.165 USD). Default DefaultMaxCostPerCloseIncrease.
	MaxCostPerCloseIncrease float64
	// MinRuns is the fewest runs each of the two variants must have; ≤ 0 means one. A gate
	// over a handful of runs judges noise, so CI should set it to the suite's size × repeat.
	MinRuns int
}

// Gate checks the candidate against the baseline in r and returns every condition it fails, as
// a sentence naming the numbers, in a fixed order: runs, close rate, cost per close. The
// candidate passes when none fails. The error is for a gate that cannot be asked: a variant
// the report does not have, or a candidate that is its own baseline.
//
// The conditions:
//
//   - runs: each variant has at least MinRuns runs (and at least one). When either has no runs
//     at all nothing else can be compared, and only this is reported;
//   - close rate: the candidate's close rate (closed runs / runs, the report's close_rate) is at
//     least the baseline's minus MaxCloseRateDrop;
//   - cost per close: the candidate's cost per close is at most the baseline's ×
//     (1 + MaxCostPerCloseIncrease). A candidate that closes nothing fails this when the
//     baseline closed something (it spends without buying anything); when the baseline closed
//     nothing, any candidate passes it (closing something at any price is better than nothing,
//     and nothing against nothing is no change; the close-rate check sees the rest).
//
// The conditions compare point estimates, not intervals: a gate in CI must be predictable, and
// the report's intervals and McNemar p tell a reviewer how much to trust a pass. MinRuns is the
// guard against judging too few runs.
func Gate(r Report, o GateOptions) ([]string, error) {
	if err := checkVariant(r, "baseline", o.Baseline); err != nil {
		return nil, err
	}
	if err := checkVariant(r, "candidate", o.Candidate); err != nil {
		return nil, err
	}
	if o.Baseline == o.Candidate {
		return nil, fmt.Errorf("gate: baseline and candidate are both variant %q", o.Baseline)
	}
	drop := tolerance(o.MaxCloseRateDrop, DefaultMaxCloseRateDrop)
	increase := tolerance(o.MaxCostPerCloseIncrease, DefaultMaxCostPerCloseIncrease)
	minRuns := max(1, o.MinRuns)
	base, cand := r.Variants[o.Baseline], r.Variants[o.Candidate]

	var failed []string
	for _, v := range []struct {
		role, name string
		runs       int
	}{{"baseline", o.Baseline, base.Runs}, {"candidate", o.Candidate, cand.Runs}} {
		switch {
		case v.runs == 0:
			failed = append(failed, fmt.Sprintf("%s %s has no runs", v.role, v.name))
		case v.runs < minRuns:
			failed = append(failed, fmt.Sprintf("%s %s has %d runs, fewer than the %d required", v.role, v.name, v.runs, minRuns))
		}
	}
	if base.Runs == 0 || cand.Runs == 0 {
		return failed, nil
	}

	// Recomputed from the counts rather than read from CloseRate: a report decoded from JSON
	// has them too, and they cannot be null here.
	baseRate := float64(base.Closed) / float64(base.Runs)
	candRate := float64(cand.Closed) / float64(cand.Runs)
	if baseRate-candRate > drop+gateSlack {
		d := decimals(baseRate-candRate, drop)
		allowed := "more than " + strconv.FormatFloat(drop, 'f', d, 64) + " allowed"
		if drop == 0 {
			allowed = "and no drop is allowed"
		}
		failed = append(failed, fmt.Sprintf("close rate dropped %.*f (%.*f → %.*f), %s",
			d, baseRate-candRate, d, baseRate, d, candRate, allowed))
	}

	switch {
	case base.Closed == 0:
		// Nothing to pay more than.
	case cand.Closed == 0:
		failed = append(failed, fmt.Sprintf("candidate %s closed nothing in %d runs (baseline %s closed %d of %d), so it has no cost per close",
			o.Candidate, cand.Runs, o.Baseline, base.Closed, base.Runs))
	default:
		basePer := base.CostUSD / float64(base.Closed)
		candPer := cand.CostUSD / float64(cand.Closed)
		limit := basePer * (1 + increase)
		if candPer > limit+gateSlack {
			rise := candPer/basePer - 1
			d := percentDecimals(rise, increase)
			allowed := "more than " + percent(increase, d) + " allowed"
			if increase == 0 {
				allowed = "and no increase is allowed"
			}
			if basePer > 0 {
				failed = append(failed, fmt.Sprintf("cost per close rose %s (%s → %s USD), %s",
					percent(rise, d), usd(basePer, decimals(basePer, candPer)), usd(candPer, decimals(basePer, candPer)), allowed))
			} else {
				failed = append(failed, fmt.Sprintf("cost per close rose from 0 to %s USD, %s", usd(candPer, decimals(0, candPer)), allowed))
			}
		}
	}
	return failed, nil
}

func checkVariant(r Report, role, name string) error {
	if name == "" {
		return fmt.Errorf("gate: no %s variant named", role)
	}
	if _, ok := r.Variants[name]; !ok {
		names := r.VariantOrder
		if len(names) == 0 {
			names = slices.Sorted(maps.Keys(r.Variants))
		}
		return fmt.Errorf("gate: unknown %s variant %q (report %s has %s)", role, name, r.ID, strings.Join(names, ", "))
	}
	return nil
}

// tolerance applies the zero-means-default, negative-means-none rule of GateOptions.
func tolerance(x, def float64) float64 {
	switch {
	case x == 0:
		return def
	case x < 0:
		return 0
	}
	return x
}

// decimals returns how many decimals (2 to 6) tell x from y, so that a message never says
// "dropped 0.05, more than 0.05 allowed" or "0.10 → 0.10 USD".
func decimals(x, y float64) int {
	for d := 2; d < 6; d++ {
		if strconv.FormatFloat(x, 'f', d, 64) != strconv.FormatFloat(y, 'f', d, 64) {
			return d
		}
	}
	return 6
}

// percentDecimals is decimals for percentages: 0 to 3 decimals, as few as tell x from limit.
func percentDecimals(x, limit float64) int {
	for d := 0; d < 3; d++ {
		if percent(x, d) != percent(limit, d) {
			return d
		}
	}
	return 3
}

// percent formats a ratio as a percentage with d decimals: percent(0.2, 0) is "20%".
func percent(x float64, d int) string {
	return strconv.FormatFloat(x*100, 'f', d, 64) + "%"
}

// usd formats an amount with d decimals, at least two.
func usd(x float64, d int) string {
	return strconv.FormatFloat(x, 'f', max(2, d), 64)
}
