package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
)

func gcCmd(g *globals) *cobra.Command {
	var dry bool
	c := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Delete the items and eval experiments whose retention passed now (what the workers' janitor does every 10 minutes), and print them",
		Args:  cobra.NoArgs,
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, _ []string) error {
			removed, err := a.Janitor().Run(ctx, dry)
			verb := "deleted"
			if dry {
				verb = "would delete"
			}
			if len(removed) > 0 {
				tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tSINCE\tWORKSPACES")
				for _, r := range removed {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", r.ID, r.State, r.Since.Format("2006-01-02 15:04"), r.Workspaces)
				}
				if ferr := tw.Flush(); ferr != nil && err == nil {
					err = ferr
				}
			}
			fmt.Fprintf(g.out, "%s %d items\n", verb, len(removed))
			if dry && len(removed) > 0 {
				fmt.Fprintln(g.out, "(a dry run lists the first batch of each state)")
			}
			if err != nil {
				return err
			}
			exps, err := a.EvalJanitor().Run(ctx, dry)
			for _, id := range exps {
				fmt.Fprintf(g.out, "%s experiment %s\n", verb, id)
			}
			fmt.Fprintf(g.out, "%s %d experiments\n", verb, len(exps))
			return err
		}),
	}
	c.Flags().BoolVar(&dry, "dry-run", false, "only list what would be deleted")
	return c
}
