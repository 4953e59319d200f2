package console

import (
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"outerloop/workitems"
)

// bar is a spend-against-cap bar: Pct of the cap used (capped at 100 for drawing).
type bar struct {
	Label  string
	Pct    int
	Capped bool // there is a cap to draw against
	Level  string
}

// fractionBar draws used against limit (0: no cap), labelling values with format.
func fractionBar(used, limit float64, format func(float64) string) bar {
	if limit <= 0 {
		return bar{Label: format(used) + " (no cap)"}
	}
	f := used / limit
	b := bar{Label: format(used) + " / " + format(limit), Pct: int(math.Round(math.Min(f, 1) * 100)), Capped: true, Level: "ok"}
	switch {
	case f >= 1:
		b.Level = "over"
	case f >= 0.8:
		b.Level = "near"
	}
	return b
}

// spendBar draws the kind of spend closest to its cap; with no caps, the spend alone.
func spendBar(s workitems.Spend, caps workitems.Budget) bar {
	best, bestF := workitems.BudgetKind(""), -1.0
	for _, k := range workitems.AllBudgetKinds() {
		if c := caps.Cap(k); c > 0 && s.Of(k)/c > bestF {
			best, bestF = k, s.Of(k)/c
		}
	}
	if best == "" {
		if s.CostUSD > 0 {
			return fractionBar(s.CostUSD, 0, money)
		}
		return fractionBar(s.WallTime.D().Seconds(), 0, seconds)
	}
	b := fractionBar(s.Of(best), caps.Cap(best), kindFormat(best))
	b.Label = string(best) + " " + b.Label
	return b
}

// kindFormat formats a value of a budget kind for people.
func kindFormat(k workitems.BudgetKind) func(float64) string {
	switch k {
	case workitems.BudgetCostUSD:
		return money
	case workitems.BudgetWallTime:
		return seconds
	}
	return func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
}

func money(v float64) string { return fmt.Sprintf("$%.2f", v) }

func seconds(v float64) string {
	return (time.Duration(v * float64(time.Second))).Round(time.Second).String()
}

type spendRow struct {
	Kind       workitems.BudgetKind
	Spent      string
	AttemptCap string
	ItemCap    string
	Bar        bar
}

// spendRows lists the item's spend of every kind against the per-attempt and item caps.
func spendRows(it *workitems.Item) []spendRow {
	var out []spendRow
	for _, k := range workitems.AllBudgetKinds() {
		f := kindFormat(k)
		used, ac, ic := it.Spend.Of(k), it.Budget.Cap(k), it.ItemBudget.Cap(k)
		if used == 0 && ac == 0 && ic == 0 {
			continue
		}
		row := spendRow{Kind: k, Spent: f(used), AttemptCap: "—", ItemCap: "—", Bar: fractionBar(used, ic, f)}
		if ac > 0 {
			row.AttemptCap = f(ac)
		}
		if ic > 0 {
			row.ItemCap = f(ic)
		}
		out = append(out, row)
	}
	return out
}

type attemptView struct {
	workitems.Attempt
	Prev    int      // the attempt this one is compared with (0: none)
	EnvKeys []string // names only: values may be secrets
	Budget  string
	// EvidenceURL lists the files the verifier's decision used (GET .../evidence), so an
	// operator can replay it offline with `outerloop verify`; "" before a verdict.
	EvidenceURL string
}

// attemptViews is the item's attempts, newest first, each with what changed from the previous.
func attemptViews(it *workitems.Item) []attemptView {
	out := make([]attemptView, 0, len(it.Attempts))
	for i, a := range it.Attempts {
		v := attemptView{Attempt: a, EnvKeys: slices.Sorted(maps.Keys(a.Condition.Env)), Budget: budgetText(it.AttemptBudget(a.Condition))}
		if a.Verified != nil {
			v.EvidenceURL = "/api/items/" + url.PathEscape(it.ID) + "/attempts/" + strconv.Itoa(a.N) + "/evidence"
		}
		if i > 0 {
			v.Prev = it.Attempts[i-1].N
			if len(v.Changed) == 0 {
				v.Changed = a.Condition.Changes(it.Attempts[i-1].Condition)
			}
		}
		out = append(out, v)
	}
	slices.Reverse(out)
	return out
}

// budgetText is a budget's caps in one line.
func budgetText(b workitems.Budget) string {
	var parts []string
	for _, k := range workitems.AllBudgetKinds() {
		if c := b.Cap(k); c > 0 {
			parts = append(parts, string(k)+" "+kindFormat(k)(c))
		}
	}
	if len(parts) == 0 {
		return "no caps"
	}
	return strings.Join(parts, ", ")
}

// ago says how long before now t was, coarsely.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < 0 {
		return "just now"
	}
	return coarse(d) + " ago"
}

// until says how long after now t is.
func until(now, t time.Time) string {
	d := t.Sub(now)
	if d <= 0 {
		return "due"
	}
	return "in " + coarse(d)
}

func coarse(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// stamp formats a time for tables (UTC, seconds).
func stamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// eventData renders an event's data as sorted key=value pairs.
func eventData(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

// stateClass is the CSS class of a state badge.
func stateClass(s workitems.State) string {
	switch s {
	case workitems.StateClosed:
		return "st-good"
	case workitems.StateEscalated, workitems.StateFailed:
		return "st-bad"
	case workitems.StateCancelled:
		return "st-muted"
	case workitems.StateRunning, workitems.StateVerifying:
		return "st-busy"
	}
	return "st-wait"
}

// attemptClass is the CSS class of an attempt's state badge.
func attemptClass(state workitems.AttemptState) string {
	switch state {
	case workitems.AttemptRunning, workitems.AttemptVerifying:
		return "st-busy"
	case workitems.AttemptDone:
		return "st-muted"
	}
	return "st-wait"
}

// outcomeClass is the CSS class of a decision outcome.
func outcomeClass(o workitems.Outcome) string {
	switch o {
	case workitems.OutcomeClose:
		return "st-good"
	case workitems.OutcomeEscalate:
		return "st-bad"
	case workitems.OutcomeCancel:
		return "st-muted"
	}
	return "st-wait"
}

// actionLabel is how a suggested action reads in the inbox.
func actionLabel(a workitems.EscalationAction) string {
	switch a {
	case workitems.SuggestClose:
		return "close as done"
	case workitems.SuggestRetry:
		return "retry with input"
	case workitems.SuggestRaiseBudget:
		return "raise a budget"
	case workitems.SuggestCancel:
		return "cancel the item"
	}
	return string(a)
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"ago":           ago,
		"until":         until,
		"stamp":         stamp,
		"eventData":     eventData,
		"stateClass":    stateClass,
		"outcomeClass":  outcomeClass,
		"attemptClass":  attemptClass,
		"actionLabel":   actionLabel,
		"deliveryClass": deliveryClass,
		"checkClass":    checkClass,
		"short": func(s string) string {
			if len(s) > 12 {
				return s[:12]
			}
			return s
		},
		"join":       strings.Join,
		"money":      money,
		"usd":        usd,
		"seconds":    seconds,
		"spendBar":   spendBar,
		"budgetText": budgetText,
		"dict":       dict,
		"firstLine": func(s string) string {
			l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
			return l
		},
	}
}

// dict builds a map from key, value pairs, to pass several values to a sub-template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
