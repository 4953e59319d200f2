package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/lib/shorten"
	"outerloop/scheduler"
)

// templatesCmd groups the template controls: the same scheduler.Queue operations as the
// API's /api/templates/{name}/… and the console's template page.
func templatesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "templates",
		Short: "Control a template: pause, resume, run now, history, controls, fleet status",
	}
	c.AddCommand(pauseCmd(g), resumeCmd(g), runNowCmd(g), historyCmd(g), controlsCmd(g), statusCmd(g))
	return c
}

func pauseCmd(g *globals) *cobra.Command {
	var reason, actor string
	c := &cobra.Command{
		Use:   "pause NAME [--reason TEXT]",
		Short: "Stop a template's cron ticks until resumed (each skipped tick is counted; manual runs still work)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withTemplateApp(func(ctx context.Context, a *app.App, args []string) error {
			p, err := a.Queue.Pause(ctx, args[0], actorName(actor), reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "paused %s by %s\n", p.Template, p.Actor)
			return nil
		}),
	}
	c.Flags().StringVar(&reason, "reason", "", "why (shown with the pause)")
	c.Flags().StringVar(&actor, "actor", "", "who pauses (default $USER)")
	return c
}

func resumeCmd(g *globals) *cobra.Command {
	var actor string
	c := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a paused template's cron ticks",
		Args:  cobra.ExactArgs(1),
		RunE: g.withTemplateApp(func(ctx context.Context, a *app.App, args []string) error {
			p, err := a.Queue.Resume(ctx, args[0], actorName(actor))
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "resumed %s by %s (paused by %s %s, %d %s skipped)\n", p.Template, actorName(actor), p.Actor,
				age(p.At)+" ago", p.Skipped, plural(int(p.Skipped), "tick", "ticks"))
			return nil
		}),
	}
	c.Flags().StringVar(&actor, "actor", "", "who resumes (default $USER)")
	return c
}

func runNowCmd(g *globals) *cobra.Command {
	var input, actor string
	var force bool
	c := &cobra.Command{
		Use:   "run NAME [--input TEXT]",
		Short: "Run a template now, as a manual tick (the same path as enqueue; a paused template runs too)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			if t, ok := a.Queue.Config().Template(args[0]); ok && t.IsFleet() {
				return runFleetNow(ctx, g, a, args[0], actorName(actor), input)
			}
			it, err := a.Queue.RunNow(ctx, args[0], actorName(actor), input, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "enqueued %s (attempt 1 of at most %d)\n", it.ID, it.MaxAttempts)
			if p, err := a.Queue.PauseOf(ctx, args[0]); err == nil && p != nil {
				fmt.Fprintf(g.out, "note: %s is paused by %s; only its schedule is stopped\n", args[0], p.Actor)
			}
			return nil
		}),
	}
	c.Flags().StringVar(&input, "input", "", "extra context for the first attempt")
	c.Flags().StringVar(&actor, "actor", "", "who asks (default $USER)")
	c.Flags().BoolVar(&force, "force", false, "run even when the template has max_open items open (recorded)")
	return c
}

// runFleetNow runs a fleet template's manual tick and prints every item it made, one per line
// after a summary (a script reads the ids from the lines that follow).
func runFleetNow(ctx context.Context, g *globals, a *app.App, name, actor, input string) error {
	ft, err := a.Queue.RunFleet(ctx, name, actor, input)
	if ft != nil {
		var skipped []string
		for _, reason := range slices.Sorted(maps.Keys(ft.Skipped)) {
			if n := ft.Skipped[reason]; n > 0 {
				skipped = append(skipped, fmt.Sprintf("%d %s", n, reason))
			}
		}
		line := fmt.Sprintf("enqueued %d %s over %d %s", ft.Created, plural(ft.Created, "item", "items"), ft.Repos,
			plural(ft.Repos, "repository", "repositories"))
		if len(skipped) > 0 {
			line += " (skipped: " + strings.Join(skipped, ", ") + ")"
		}
		if ft.Failed > 0 {
			line += fmt.Sprintf("; %d not made (see the log)", ft.Failed)
		}
		fmt.Fprintln(g.out, line)
		for _, id := range ft.Items {
			fmt.Fprintln(g.out, id)
		}
	}
	if err != nil {
		return err
	}
	if ft.Created == 0 {
		return fmt.Errorf("run %s: no item made (%d repositories, %d skipped, %d existing)", name, ft.Repos, ft.SkippedCount(), ft.Existing)
	}
	if p, err := a.Queue.PauseOf(ctx, name); err == nil && p != nil {
		fmt.Fprintf(g.out, "note: %s is paused by %s; its items wait in line until it is resumed\n", name, p.Actor)
	}
	return nil
}

func historyCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit, offset int
	c := &cobra.Command{
		Use:   "history NAME",
		Short: "A template's last items, newest first: outcome, spend, pull request",
		Args:  cobra.ExactArgs(1),
		RunE: g.withTemplateApp(func(ctx context.Context, a *app.App, args []string) error {
			if limit < 1 || limit > scheduler.MaxHistory {
				return fmt.Errorf("--limit %d: want 1..%d", limit, scheduler.MaxHistory)
			}
			if offset < 0 {
				return fmt.Errorf("--offset %d: want a number ≥ 0", offset)
			}
			h, err := a.Queue.History(ctx, args[0], offset, limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.out, h)
			}
			if p := h.Paused; p != nil {
				fmt.Fprintf(g.out, "%s is PAUSED by %s since %s", h.Template, p.Actor, p.At.Format(time.RFC3339))
				if p.Reason != "" {
					fmt.Fprintf(g.out, ": %s", shorten.OneLine(p.Reason, 120))
				}
				fmt.Fprintf(g.out, " (%d %s skipped)\n", p.Skipped, plural(int(p.Skipped), "tick", "ticks"))
			}
			if len(h.Items) == 0 {
				fmt.Fprintf(g.out, "no items of %s (%d in all)\n", h.Template, h.Total)
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tOUTCOME\tATTEMPTS\tCOST\tWALL\tPR\tAGE\tRERUN")
			for _, e := range h.Items {
				pr := "-"
				if e.PR != nil {
					pr = e.PR.URL
				}
				link := "-"
				switch {
				case e.RerunOf != "":
					link = "of " + e.RerunOf
				case len(e.Reruns) > 0:
					link = "as " + e.Reruns[len(e.Reruns)-1]
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t$%.2f\t%s\t%s\t%s\t%s\n", e.ID, e.Outcome, e.Attempts, e.Spend.CostUSD,
					e.Spend.WallTime.D().Round(time.Second), pr, age(e.CreatedAt), link)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "%d–%d of %d\n", h.Offset+1, h.Offset+len(h.Items), h.Total)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (as GET /api/templates/NAME/items)")
	c.Flags().IntVar(&limit, "limit", 20, "at most this many items")
	c.Flags().IntVar(&offset, "offset", 0, "skip this many of the newest")
	return c
}

func controlsCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit int
	c := &cobra.Command{
		Use:   "controls NAME",
		Short: "Who paused, resumed, ran or re-ran a template, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: g.withTemplateApp(func(ctx context.Context, a *app.App, args []string) error {
			if _, ok := a.Queue.Config().Template(args[0]); !ok {
				return fmt.Errorf("template %q: %w", args[0], scheduler.ErrUnknownTemplate)
			}
			recs, err := a.Queue.Controls(ctx, args[0], limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(g.out, recs)
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "AT\tACTION\tACTOR\tITEM\tREASON")
			for _, r := range recs {
				item := r.Item
				if r.RerunOf != "" {
					item += " (re-run of " + r.RerunOf + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.At.Format(time.RFC3339), r.Action, r.Actor, item, shorten.OneLine(r.Reason, 80))
			}
			return tw.Flush()
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 20, "at most this many (up to 100)")
	return c
}

func rerunCmd(g *globals) *cobra.Command {
	var actor string
	c := &cobra.Command{
		Use:   "rerun ID",
		Short: "Run a closed, failed or cancelled item again as a new item with the same input and template",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			it, err := a.Queue.Rerun(ctx, args[0], actorName(actor))
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "re-ran %s as %s (attempt 1 of at most %d)\n", args[0], it.ID, it.MaxAttempts)
			return nil
		}),
	}
	c.Flags().StringVar(&actor, "actor", "", "who asks (default $USER)")
	return c
}
