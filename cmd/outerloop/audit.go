package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"outerloop/api"
	"outerloop/internal/app"
	"outerloop/lib/shorten"
	"outerloop/waits"
)

// accessControl builds the server's Auth from the environment (api.AuthFromEnv: roles, the
// tokens file, OUTERLOOP_READ_LOGIN) on the app's clock, and its audit list, and logs which
// credentials are in force by name and role (never a token).
func accessControl(a *app.App) (*api.Auth, *api.AuditLog, error) {
	auth, err := api.AuthFromEnv(os.Getenv, api.AuthOptions{Clock: a.Store.Clock()})
	if err != nil {
		return nil, nil, fmt.Errorf("access control: %w", err)
	}
	a.Logger.Info("access control", "credentials", auth.Describe(), "read_login", auth.ReadLogin())
	return auth, auditLog(a), nil
}

// auditLog is the deployment's audit list in its Redis.
func auditLog(a *app.App) *api.AuditLog {
	return api.NewAuditLog(a.Store.Redis(), a.Store.Prefix(), 0, a.Store.Clock())
}

func auditCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit int
	var cursor string
	c := &cobra.Command{
		Use:   "audit",
		Short: "List the audit list: every action and login through the console, the API and /queues, newest first",
		Args:  cobra.NoArgs,
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, _ []string) error {
			if limit < 1 || limit > 1000 {
				return fmt.Errorf("--limit %d: want 1..1000", limit)
			}
			entries, next, err := auditLog(a).List(ctx, cursor, limit)
			if err != nil {
				return fmt.Errorf("--cursor %q: %w", cursor, err)
			}
			if asJSON {
				return writeJSON(g.out, map[string]any{"entries": entries, "next_cursor": next})
			}
			if len(entries) == 0 {
				fmt.Fprintln(g.out, "no audit entries")
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tACTOR\tCREDENTIAL\tROLE\tVIA\tACTION\tTARGET\tRESULT\tDETAIL")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s %d\t%s\n", e.At.UTC().Format("2006-01-02 15:04:05"), e.Actor,
					orDash(e.Credential), orDash(string(e.Role)), e.Via, e.Action, orDash(e.Target), e.Result, e.Status, e.Detail)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(g.out, "more: outerloop audit --cursor %s\n", next)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 50, "show at most this many (1..1000)")
	c.Flags().StringVar(&cursor, "cursor", "", "start after this entry id (the last line of the previous page)")
	return c
}

// cliReads are the commands that change nothing. Every other command run with the system open
// that is not a long-running process (enqueue, resolve, steer, gc, and commands added later)
// is recorded in the audit list, so a new action is audited without an edit here.
var cliReads = map[string]bool{"items": true, "escalations": true, "verify": true, "validate": true, "audit": true,
	"bench": true, "version": true, "templates": true, "history": true, "help": true,
	"list": true, "controls": true} // notify list, templates controls

// recordCLI records a CLI action in the audit list: the actor is --actor (or $USER), the
// target the first argument, the detail the flags given (names only, never their values) and
// the error. The CLI proves no token (it holds the Redis password), so no credential or role
// is recorded.
func recordCLI(cmd *cobra.Command, a *app.App, args []string, runErr error) {
	if cliReads[cmd.Name()] || longRunning(cmd.Name()) {
		return
	}
	actor := ""
	if f := cmd.Flags().Lookup("actor"); f != nil {
		actor = f.Value.String()
	}
	e := api.AuditEntry{Actor: actorName(actor), Via: api.ViaCLI, Action: cmd.Name(), Route: cmd.CommandPath(), Result: api.AuditOK}
	if len(args) > 0 {
		e.Target = args[0]
	}
	var flags []string
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed && f.Name != "actor" {
			flags = append(flags, "--"+f.Name)
		}
	})
	e.Detail = strings.Join(flags, " ")
	if runErr != nil {
		e.Result = api.AuditError
		e.Detail = strings.TrimSpace(e.Detail + " " + shorten.OneLine(runErr.Error(), 200))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := auditLog(a).Record(ctx, e); err != nil {
		a.Logger.Warn("audit: the CLI action was not recorded", "action", e.Action, "err", err)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// forgeAuditor records /outerloop commands from pull requests in the audit list.
type forgeAuditor struct{ log *api.AuditLog }

func (f forgeAuditor) Audit(ctx context.Context, e waits.AuditEntry) {
	if f.log == nil {
		return
	}
	res := api.AuditRefused
	if e.OK {
		res = api.AuditOK
	}
	_ = f.log.Record(ctx, api.AuditEntry{Actor: e.Actor, Via: api.ViaForge, Action: e.Action, Target: e.Target, Result: res, Detail: e.Detail})
}
