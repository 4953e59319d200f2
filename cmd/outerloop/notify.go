package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/lib/shorten"
	"outerloop/notify"
)

func notifyCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "notify",
		Short: "Inspect the notification outbox: pending, in-flight, delivered and dead deliveries",
	}
	c.AddCommand(notifyListCmd(g), notifyRetryCmd(g))
	return c
}

func notifyListCmd(g *globals) *cobra.Command {
	var state string
	var limit int64
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [--state pending|inflight|delivered|dead]",
		Short: "List deliveries (default: every state), newest first, with attempts and the last error",
		Args:  cobra.NoArgs,
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, _ []string) error {
			states := notify.AllStates()
			if state != "" {
				if !slices.Contains(states, notify.State(state)) {
					return fmt.Errorf("--state %q: want one of pending, inflight, delivered, dead", state)
				}
				states = []notify.State{notify.State(state)}
			}
			var all []notify.Delivery
			for _, s := range states {
				ds, err := a.Outbox.List(ctx, s, limit)
				if err != nil {
					return err
				}
				all = append(all, ds...)
			}
			if asJSON {
				return writeJSON(g.out, all)
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "STATE\tSINK\tEVENT\tITEM\tATTEMPTS\tUPDATED\tLAST ERROR\tID")
			for _, d := range all {
				item := d.Item
				if item == "" {
					item = d.Template
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.State, d.Sink, d.Event, item, d.Attempts,
					d.Updated.Format("2006-01-02 15:04:05"), shorten.OneLine(strings.TrimSpace(d.LastError), 80), d.ID)
			}
			return tw.Flush()
		}),
	}
	c.Flags().StringVar(&state, "state", "", "only this state")
	c.Flags().Int64Var(&limit, "limit", 50, "at most this many per state")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func notifyRetryCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "retry ID",
		Short: "Send a dead delivery again (with a fresh count of attempts)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, args []string) error {
			if err := a.Outbox.Requeue(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "re-queued %s\n", args[0])
			return nil
		}),
	}
}
