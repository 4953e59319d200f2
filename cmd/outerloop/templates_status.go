package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/lib/shorten"
	"outerloop/scheduler/fleetview"
)

// statusCmd prints a fleet template as a table of its repositories (package scheduler/fleetview: the
// same rows as GET /api/templates/NAME/fleet and the console's fleet page).
func statusCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit, offset int
	c := &cobra.Command{
		Use:   "status NAME [--offset N --limit N] [--json]",
		Short: "A fleet template's repositories: newest item, pull request, CI, review, spend; next run and limits",
		Args:  cobra.ExactArgs(1),
		RunE: g.withTemplateApp(func(ctx context.Context, a *app.App, args []string) error {
			if limit < 1 || limit > fleetview.MaxLimit {
				return fmt.Errorf("--limit %d: want 1..%d", limit, fleetview.MaxLimit)
			}
			if offset < 0 {
				return fmt.Errorf("--offset %d: want a number ≥ 0", offset)
			}
			r := &fleetview.Reader{Queue: a.Queue, Gate: a.Fleet}
			// The next run is the schedule's: a scheduler is planned, never started.
			if s, err := a.Scheduler(nil); err == nil {
				r.NextRun = s.NextRun
			}
			f, err := r.Page(ctx, args[0], offset, limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.out, f)
			}
			return printFleet(g.out, f)
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (as GET /api/templates/NAME/fleet)")
	c.Flags().IntVar(&limit, "limit", fleetview.DefaultLimit, "at most this many repositories")
	c.Flags().IntVar(&offset, "offset", 0, "skip this many repositories (sorted by name)")
	return c
}

func printFleet(w io.Writer, f *fleetview.Fleet) error {
	next := "none (no schedule)"
	if !f.NextRun.IsZero() {
		next = f.NextRun.Format(time.RFC3339)
	}
	paused := "no"
	if p := f.Paused; p != nil {
		paused = fmt.Sprintf("PAUSED by %s since %s", p.Actor, p.At.Format(time.RFC3339))
		if p.Reason != "" {
			paused += ": " + shorten.OneLine(p.Reason, 120)
		}
	}
	u := f.Usage
	fmt.Fprintf(w, "%s: %d %s; next run %s; paused %s\n", f.Template, f.Total, plural(f.Total, "repository", "repositories"), next, paused)
	fmt.Fprintf(w, "usage: %d held, %d running, %d open PRs, %d opened in the last hour, failure streak %d\n",
		u.Held, u.Running, u.OpenPRs, u.OpenedLastHour, u.Streak)
	if len(f.Rows) == 0 {
		fmt.Fprintf(w, "no repositories from %d (%d in all)\n", f.Offset, f.Total)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "REPOSITORY\tITEM\tSTATE\tPR\tCI\tREVIEW\tSPEND")
	for _, r := range f.Rows {
		repo := r.Slug
		if repo == "" {
			repo = r.Repo
		}
		pr := "-"
		if r.PR != nil {
			pr = fmt.Sprintf("#%d %s", r.PR.Number, r.PR.State)
		}
		if r.Held != nil {
			pr += " held: " + r.Held.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t$%.2f\n", repo, dash(r.Item), dash(r.Outcome), pr, r.CI, dash(r.Review), r.CostUSD)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d–%d of %d; page spend $%.2f; %d open pull requests, %d held by people", f.Offset+1, f.Offset+len(f.Rows), f.Total, f.Totals.CostUSD,
		f.Totals.OpenPRs, f.Totals.HeldPRs)
	if f.Next != nil {
		fmt.Fprintf(w, "; next page: --offset %d", *f.Next)
	}
	fmt.Fprintln(w)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
