package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"outerloop/evals"
	"outerloop/internal/app"
	"outerloop/workitems"
)

// evalCmd groups the experiments: re-run many tasks under named variants of their templates
// and compare the variants on what the outer loop closed (package evals).
func evalCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "eval",
		Short: "Judge a configuration by re-running many tasks under variants: run, status, report, gate, list",
	}
	c.AddCommand(evalRunCmd(g), evalStatusCmd(g), evalReportCmd(g), evalGateCmd(g), evalListCmd(g))
	return c
}

// evalEvery is how often a driver looks at its runs.
const evalEvery = time.Second

func evalRunCmd(g *globals) *cobra.Command {
	var variants, states []string
	var repeat int
	var budget, resume, actor, template, since, until, ids string
	var fromItems bool
	c := &cobra.Command{
		Use:   "run SUITE.yaml --variant NAME=FILE [--variant ...] [--repeat K] [--budget cost_usd=USD]",
		Short: "Run every task × variant × repetition as real items in the eval namespace and drive them to the end",
		Long: `Run every task of a suite (or of past items, --from-items) under each variant, K times, as
real items through the workers, sandbox and verifier, apart from production: no production list,
inbox, notification or daily cap sees them, and delivery is a patch in the run's record (nothing
is pushed, no pull request, no comment). The experiment id is printed alone on the first line at
once; progress follows. A killed eval process loses nothing: eval run --resume ID goes on, and
re-runs nothing that finished.`,
		Args: cobra.MaximumNArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			r := a.EvalRunner()
			var id string
			if resume != "" {
				if len(args) > 0 || len(variants) > 0 || fromItems {
					return errors.New("eval run --resume ID takes no suite, --variant or --from-items: the experiment keeps its own")
				}
				e, err := r.Exps.Get(ctx, resume)
				if err != nil {
					return err
				}
				usd, err := parseEvalBudget(budget)
				if err != nil {
					return err
				}
				switch {
				case e.State == evals.StateRunning && budget != "":
					// Applied, never ignored: the next round enqueues against the new budget.
					if e, err = r.Exps.SetBudget(ctx, e.ID, usd); err != nil {
						return err
					}
					fmt.Fprintf(g.errw, "experiment %s: budget set to %.2f USD\n", e.ID, usd)
				case e.State != evals.StateRunning && budget == "":
					return fmt.Errorf("experiment %s is %s (%s): give --budget to raise its budget and go on", e.ID, e.State, e.Reason)
				case e.State != evals.StateRunning:
					e.BudgetUSD = usd
					if err := r.Exps.Reopen(ctx, e); err != nil {
						return err
					}
				}
				id = e.ID
			} else {
				p := evals.Plan{Repeat: repeat, Actor: actorName(actor)}
				var err error
				if p.BudgetUSD, err = parseEvalBudget(budget); err != nil {
					return err
				}
				switch {
				case fromItems && len(args) > 0:
					return errors.New("eval run: give a suite file or --from-items, not both")
				case fromItems:
					f, err := itemFilter(template, states, since, until, ids)
					if err != nil {
						return err
					}
					tasks, skipped, err := evals.TasksFromItems(ctx, a.Store, f)
					if err != nil {
						return err
					}
					if len(skipped) > 0 {
						fmt.Fprintf(g.errw, "skipped %d %s without a recorded base commit: %s\n", len(skipped), plural(len(skipped), "item", "items"), strings.Join(skipped, ", "))
					}
					p.Suite = &evals.Suite{Name: "from-items", Tasks: tasks}
				case len(args) == 1:
					if p.Suite, err = evals.LoadSuite(args[0]); err != nil {
						return err
					}
				default:
					return errors.New("eval run: give a suite file (SUITE.yaml) or --from-items")
				}
				for _, spec := range variants {
					v, err := evals.LoadVariant(spec)
					if err != nil {
						return err
					}
					p.Variants = append(p.Variants, v)
				}
				e, err := r.Prepare(p)
				if err != nil {
					return err
				}
				if err := r.Start(ctx, e); err != nil {
					return err
				}
				id = e.ID
			}
			fmt.Fprintln(g.out, id)
			pr, err := r.Drive(ctx, id, evalEvery, func(pr evals.Progress) {
				fmt.Fprintln(g.out, progressLine(pr))
			})
			if err != nil {
				if ctx.Err() != nil {
					fmt.Fprintf(g.errw, "stopped driving %s; its runs go on: outerloop eval run --resume %s\n", id, id)
				}
				return err
			}
			if pr.State == evals.StateStopped {
				fmt.Fprintf(g.out, "stopped: %s\n", pr.Reason)
			}
			fmt.Fprintf(g.out, "report: outerloop eval report %s\n", id)
			return nil
		}),
	}
	f := c.Flags()
	f.StringArrayVar(&variants, "variant", nil, "NAME=FILE: a YAML overlay of template fields (an empty file: the template as it is); repeatable")
	f.IntVar(&repeat, "repeat", 1, "runs of every task under every variant")
	f.StringVar(&budget, "budget", "", "cost_usd=USD: the experiment's budget (a run starts only while its cap fits in what is left)")
	f.StringVar(&resume, "resume", "", "go on driving experiment ID (with --budget: set its budget, a stopped one goes on)")
	f.StringVar(&actor, "actor", "", "who runs it (default $USER)")
	f.BoolVar(&fromItems, "from-items", false, "take the tasks from past items (filters: --template, --state, --since, --until, --ids)")
	f.StringVar(&template, "template", "", "--from-items: of this template")
	f.StringArrayVar(&states, "state", nil, "--from-items: in this state (repeatable)")
	f.StringVar(&since, "since", "", "--from-items: created at or after (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&until, "until", "", "--from-items: created before (RFC 3339 or YYYY-MM-DD)")
	f.StringVar(&ids, "ids", "", "--from-items: these item ids (comma-separated)")
	return c
}

// parseEvalBudget reads --budget cost_usd=USD ("" is none).
func parseEvalBudget(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) != "cost_usd" {
		return 0, fmt.Errorf("--budget %q: want cost_usd=USD", s)
	}
	usd, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || usd <= 0 {
		return 0, fmt.Errorf("--budget %q: want a positive amount of USD", s)
	}
	return usd, nil
}

func itemFilter(template string, states []string, since, until, ids string) (evals.ItemFilter, error) {
	f := evals.ItemFilter{Template: template}
	for _, s := range states {
		st := workitems.State(s)
		if !st.Valid() {
			return f, fmt.Errorf("--state %q: not a state", s)
		}
		f.States = append(f.States, st)
	}
	var err error
	if f.CreatedFrom, err = parseDay(since, "--since"); err != nil {
		return f, err
	}
	if f.CreatedTo, err = parseDay(until, "--until"); err != nil {
		return f, err
	}
	for _, id := range strings.Split(ids, ",") {
		if id = strings.TrimSpace(id); id != "" {
			f.IDs = append(f.IDs, id)
		}
	}
	return f, nil
}

func parseDay(s, flag string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want RFC 3339 or YYYY-MM-DD", flag, s)
}

// progressLine is one line of a driver's progress.
func progressLine(pr evals.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d done, %d started", pr.State, pr.Done, pr.Total, pr.Created)
	names := make([]string, 0, len(pr.Closed))
	for v := range pr.Closed {
		names = append(names, v)
	}
	slices.Sort(names)
	for _, v := range names {
		fmt.Fprintf(&b, ", %s closed %d", v, pr.Closed[v])
	}
	fmt.Fprintf(&b, ", spent %.2f USD", pr.SpentUSD)
	if pr.BudgetUSD > 0 {
		fmt.Fprintf(&b, " of %.2f", pr.BudgetUSD)
	}
	return b.String()
}

func evalStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status ID",
		Short: "Where an experiment stands: runs done of all, closes per variant, spend (records runs that ended)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			pr, err := a.EvalRunner().Status(ctx, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(g.out).Encode(pr)
			}
			fmt.Fprintln(g.out, progressLine(pr))
			if pr.Reason != "" {
				fmt.Fprintln(g.out, "reason:", pr.Reason)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func evalReportCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "report ID [--json]",
		Short: "The experiment's report: close rate with its 95% interval, pass@k, cost per close, paired comparison",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			r := a.EvalRunner()
			if _, err := r.Status(ctx, args[0]); err != nil { // records runs that ended since the driver last looked
				return err
			}
			rep, e, err := r.Report(ctx, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(g.out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(g.out, "experiment %s (suite %s, %s, config %s)\n\n", e.ID, e.Suite.Name, e.State, e.ConfigVersion)
			return rep.WriteTable(g.out)
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func evalGateCmd(g *globals) *cobra.Command {
	var o evals.GateOptions
	c := &cobra.Command{
		Use:   "gate ID --baseline A --candidate B [--max-close-rate-drop 0.05] [--max-cost-per-close-increase 0.10] [--min-runs N]",
		Short: "Exit 0 when the candidate variant passes against the baseline, 1 naming every failed condition (for CI)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			r := a.EvalRunner()
			pr, err := r.Status(ctx, args[0])
			if err != nil {
				return err
			}
			rep, _, err := r.Report(ctx, args[0])
			if err != nil {
				return err
			}
			// A flag given as 0 means no drop (no rise) allowed; GateOptions reads 0 as its default.
			for _, fl := range []struct {
				name string
				v    *float64
			}{{"max-close-rate-drop", &o.MaxCloseRateDrop}, {"max-cost-per-close-increase", &o.MaxCostPerCloseIncrease}} {
				if *fl.v < 0 {
					return fmt.Errorf("--%s %g: want 0 or more", fl.name, *fl.v)
				}
				if *fl.v == 0 {
					*fl.v = -1
				}
			}
			failed, err := evals.Gate(rep, o)
			if err != nil {
				return err
			}
			if pr.State == evals.StateRunning {
				failed = append(failed, fmt.Sprintf("experiment %s is still running (%d of %d runs done)", pr.ID, pr.Done, pr.Total))
			}
			if len(failed) == 0 {
				fmt.Fprintf(g.out, "pass: %s against %s\n", o.Candidate, o.Baseline)
				return nil
			}
			fmt.Fprintf(g.out, "fail: %s against %s\n", o.Candidate, o.Baseline)
			for _, f := range failed {
				fmt.Fprintln(g.out, "  -", f)
			}
			return exitError{code: 1}
		}),
	}
	f := c.Flags()
	f.StringVar(&o.Baseline, "baseline", "", "the variant to compare against (required)")
	f.StringVar(&o.Candidate, "candidate", "", "the variant that would ship (required)")
	f.Float64Var(&o.MaxCloseRateDrop, "max-close-rate-drop", evals.DefaultMaxCloseRateDrop, "largest allowed drop of the close rate (absolute)")
	f.Float64Var(&o.MaxCostPerCloseIncrease, "max-cost-per-close-increase", evals.DefaultMaxCostPerCloseIncrease, "largest allowed rise of the cost per close (relative: 0.10 = 10%)")
	f.IntVar(&o.MinRuns, "min-runs", 1, "fewest runs each variant needs")
	_ = c.MarkFlagRequired("baseline")
	_ = c.MarkFlagRequired("candidate")
	return c
}

func evalListCmd(g *globals) *cobra.Command {
	var limit, offset int
	c := &cobra.Command{
		Use:   "list",
		Short: "List experiments, newest first, with the config they ran under",
		Args:  cobra.NoArgs,
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			exps, total, err := a.Evals().Exps.List(ctx, offset, limit)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSUITE\tVARIANTS\tRUNS\tSTATE\tCONFIG\tCREATED")
			for _, e := range exps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.ID, e.Suite.Name, strings.Join(e.VariantNames(), ","), e.Total(), e.State,
					e.ConfigVersion, e.CreatedAt.UTC().Format(time.RFC3339))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if int64(offset+len(exps)) < total {
				fmt.Fprintf(g.out, "%d of %d shown: --offset %d for more\n", len(exps), total, offset+len(exps))
			}
			return nil
		}),
	}
	c.Flags().IntVar(&limit, "limit", 50, "experiments per page")
	c.Flags().IntVar(&offset, "offset", 0, "skip this many")
	return c
}
