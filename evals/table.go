package evals

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r as text tables, the output of `outerloop eval report ID`: the variants
// (runs, closes, close rate with its 95% interval, pass@k and pass^k, cost, cost per close, wall
// time p50/p90, model calls, tokens, exits), then the pairs (the 2×2 task counts, McNemar p, the
// change in cost per close with its interval), then the tasks, the first pair's regressions
// first and marked. Undefined numbers print as "-".
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	order := r.VariantOrder
	if len(order) == 0 {
		order = slices.Sorted(maps.Keys(r.Variants))
	}

	fmt.Fprintf(tw, "experiment %s, suite %s, repeat %d\n\n", r.ID, r.Suite, r.Repeat)

	fmt.Fprintln(tw, "VARIANT\tRUNS\tCLOSED\tCLOSE RATE\t95% CI\tPASS@K\tPASS^K\tCOST USD\tPER CLOSE\tP50 S\tP90 S\tCALLS\tTOKENS\tEXITS")
	for _, name := range order {
		v := r.Variants[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t[%.2f, %.2f]\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n",
			name, v.Runs, v.Closed, opt(v.CloseRate, rate), v.CloseRateCI95[0], v.CloseRateCI95[1],
			byK(v.PassAtK, r.Repeat), byK(v.PassHatK, r.Repeat), money(v.CostUSD), opt(v.CostPerCloseUSD, money),
			opt(v.WallTimeS.P50, seconds), opt(v.WallTimeS.P90, seconds), v.ModelCalls, v.Tokens, exits(v.Exits))
	}

	if len(r.Pairs) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "BASELINE\tCANDIDATE\tBOTH\tBASELINE ONLY\tCANDIDATE ONLY\tNEITHER\tMCNEMAR P\tΔ PER CLOSE\t95% CI")
		for _, p := range r.Pairs {
			ci := "-"
			if p.CostPerCloseDeltaCI95 != nil {
				ci = "[" + money(p.CostPerCloseDeltaCI95[0]) + ", " + money(p.CostPerCloseDeltaCI95[1]) + "]"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.3g\t%s\t%s\n",
				p.Baseline, p.Candidate, p.Both, p.BaselineOnly, p.CandidateOnly, p.Neither, p.McNemarP,
				opt(p.CostPerCloseDeltaUSD, signedMoney), ci)
		}
	}

	if v := r.Versions; v != nil {
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "VERSIONS\tconfig %s\n", v.Config)
		fmt.Fprintf(tw, "TEMPLATE\tPRODUCTION\t%s\n", strings.Join(order, "\t"))
		for _, t := range slices.Sorted(maps.Keys(v.Templates)) {
			fmt.Fprintf(tw, "%s\t%s", t, v.Templates[t])
			for _, name := range order {
				fmt.Fprintf(tw, "\t%s", orDash(v.Variants[name][t]))
			}
			fmt.Fprintln(tw)
		}
	}

	if len(r.Tasks) > 0 {
		fmt.Fprintln(tw)
		mark := ""
		if len(r.Pairs) > 0 {
			mark = "REGRESSION " + r.Pairs[0].Baseline + " → " + r.Pairs[0].Candidate
		}
		fmt.Fprintf(tw, "TASK\t%s\t%s\n", strings.Join(order, "\t"), mark)
		for _, t := range r.Tasks {
			fmt.Fprint(tw, t.ID)
			for _, v := range order {
				c := t.Cells[v]
				if c.Runs == 0 {
					fmt.Fprint(tw, "\t-")
					continue
				}
				fmt.Fprintf(tw, "\t%d/%d closed, %s USD", c.Closed, c.Runs, money(c.CostUSD))
			}
			// The mark is the last cell, written only when there is one: an empty last cell
			// would pad the line with trailing blanks.
			if r.Regressed(t) {
				fmt.Fprint(tw, "\tregression")
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// opt formats *x with f, or "-" when it is undefined.
func opt(x *float64, f func(float64) string) string {
	if x == nil {
		return "-"
	}
	return f(*x)
}

func rate(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func seconds(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// money formats an amount in USD with two decimals, or three significant digits below 0.1 so
// that small costs per close stay visible: 1.2 → "1.20", 0.15 → "0.15", 0.00345 → "0.00345".
func money(x float64) string {
	if x == 0 || math.Abs(x) >= 0.1 {
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func signedMoney(x float64) string {
	if x > 0 {
		return "+" + money(x)
	}
	return money(x)
}

// byK formats a pass@k or pass^k map as "1:0.80 2:0.91", "-" for undefined values.
func byK(m map[string]*float64, repeat int) string {
	parts := make([]string, 0, repeat)
	for k := 1; k <= repeat; k++ {
		key := strconv.Itoa(k)
		parts = append(parts, key+":"+opt(m[key], rate))
	}
	return strings.Join(parts, " ")
}

// exits formats exit counts as "budget_exhausted 1, completed 9", by name.
func exits(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+" "+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, ", ")
}
