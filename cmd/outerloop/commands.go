package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"outerloop/api"
	"outerloop/internal/app"
	"outerloop/lib/shorten"
	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func enqueueCmd(g *globals) *cobra.Command {
	var input, actor string
	var force bool
	c := &cobra.Command{
		Use:   "enqueue TEMPLATE",
		Short: "Create an item of a template now (the same path as a cron tick)",
		Args:  cobra.ExactArgs(1),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			it, err := a.Queue.Submit(ctx, scheduler.Request{Template: args[0], Input: input, Force: force,
				Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: actorName(actor)}})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.out, "enqueued %s (attempt 1 of at most %d)\n", it.ID, it.MaxAttempts)
			return nil
		}),
	}
	c.Flags().StringVar(&input, "input", "", "extra context for the first attempt")
	c.Flags().StringVar(&actor, "actor", "", "who asks (default $USER)")
	c.Flags().BoolVar(&force, "force", false, "create it even when the template has max_open items open (recorded with the actor)")
	return c
}

func actorName(a string) string {
	if a != "" {
		return a
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

func itemsCmd(g *globals) *cobra.Command {
	var asJSON, follow, diff bool
	var state, template, attempt string
	var limit int
	c := &cobra.Command{
		Use:   "items [ID]",
		Short: "List items, or show one with its attempts, decisions and events",
		Args:  cobra.MaximumNArgs(1),
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, args []string) error {
			if (diff || attempt != "") && len(args) == 0 {
				return errors.New("--diff and --attempt go with an item ID")
			}
			if attempt != "" && !diff {
				return errors.New("--attempt goes with --diff")
			}
			if len(args) == 1 {
				it, err := a.Store.Get(ctx, args[0])
				if err != nil {
					return err
				}
				if diff {
					return printPatch(ctx, a.Store, it, attempt, g.out)
				}
				evs, err := a.Store.Events(ctx, it.ID, "", 2000, 0)
				if err != nil {
					return err
				}
				if follow {
					return followItem(ctx, a.Store, it.ID, g.out)
				}
				view := api.ItemView{Item: it, Events: evs, ReviewRounds: api.ReviewRounds(it)}
				if it.State == workitems.StateWaiting {
					if np, err := a.Store.NextPoll(ctx, it.ID); err == nil && !np.IsZero() {
						view.NextPoll = &np
					}
				}
				if asJSON {
					return writeJSON(g.out, view)
				}
				printItem(g.out, view)
				return nil
			}
			if state != "" && !workitems.State(state).Valid() {
				return fmt.Errorf("--state %q: want one of %v", state, workitems.AllStates())
			}
			items, err := a.Store.List(ctx, itemstore.ListOptions{State: workitems.State(state), Template: template, Limit: limit})
			if err != nil {
				return err
			}
			if asJSON {
				if items == nil {
					items = []*workitems.Item{}
				}
				return writeJSON(g.out, items)
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tATTEMPT\tLAST EXIT\tCOST\tAGE")
			for _, it := range items {
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t$%.2f\t%s\n", it.ID, it.State, it.Attempt, it.MaxAttempts, lastExit(it),
					it.Spend.CostUSD, age(it.CreatedAt))
			}
			return tw.Flush()
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().BoolVar(&diff, "diff", false, "with ID: print the patch of the item's delivered change (as GET /api/items/ID/diff)")
	c.Flags().StringVar(&attempt, "attempt", "", "with --diff: the patch of this attempt (default: the latest delivery's)")
	c.Flags().BoolVar(&follow, "follow", false, "with ID: print the item's events as they happen until it is closed, escalated, failed or cancelled")
	c.Flags().StringVar(&state, "state", "", "only items in this state")
	c.Flags().StringVar(&template, "template", "", "only items of this template")
	c.Flags().IntVar(&limit, "limit", 50, "at most this many items")
	return c
}

// printPatch writes an attempt's stored patch exactly as kept (the same choice of attempt as
// the HTTP endpoint).
func printPatch(ctx context.Context, s *itemstore.Store, it *workitems.Item, attempt string, w io.Writer) error {
	n, err := api.DiffAttempt(it, attempt)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	if n == 0 {
		return fmt.Errorf("item %s has no delivered change", it.ID)
	}
	patch, err := s.Patch(ctx, it.ID, n)
	if err != nil {
		return err
	}
	_, err = w.Write(patch)
	return err
}

// printDelivery writes what became of an attempt's change: outcome, commit, files, and what
// a forge made of it.
func printDelivery(w io.Writer, indent string, d *workitems.Delivery) {
	fmt.Fprintf(w, "%sdelivery: %s, mode %s", indent, d.Outcome, d.Mode)
	if d.Commit != "" {
		fmt.Fprintf(w, ", commit %s on %s", shorten.SHA(d.Commit), shorten.SHA(d.Base))
	}
	if d.FileCount > 0 {
		fmt.Fprintf(w, ", %d %s +%d -%d, patch %d bytes", d.FileCount, plural(d.FileCount, "file", "files"), d.Added, d.Deleted, d.PatchBytes)
		if d.PatchTruncated {
			fmt.Fprint(w, " (stored truncated)")
		}
	}
	fmt.Fprintln(w)
	if d.SameAs != nil {
		fmt.Fprintf(w, "%s  same result as %s attempt %d", indent, d.SameAs.Item, d.SameAs.Attempt)
		if d.SameAs.PR != nil {
			fmt.Fprintf(w, " (%s)", d.SameAs.PR.URL)
		}
		fmt.Fprintln(w)
	}
	if d.Error != "" {
		fmt.Fprintf(w, "%s  error (%s): %s\n", indent, d.ErrorClass, shorten.OneLine(d.Error, 300))
	}
	if d.Branch != "" {
		fmt.Fprintf(w, "%s  branch %s", indent, d.Branch)
		if d.PushedSHA != "" {
			fmt.Fprintf(w, " pushed %s", shorten.SHA(d.PushedSHA))
		}
		fmt.Fprintln(w)
	}
	if pr := d.PR; pr != nil {
		state := string(pr.State)
		if pr.Draft {
			state += ", draft"
		}
		fmt.Fprintf(w, "%s  pull request #%d [%s] %s\n", indent, pr.Number, state, pr.URL)
	}
	if h := d.Held; h != nil {
		if d.Outcome == workitems.DeliveryHeld {
			fmt.Fprintf(w, "%s  held: %s\n", indent, h)
		} else {
			fmt.Fprintf(w, "%s  built on: %s\n", indent, h)
		}
	}
	for _, c := range d.Checks {
		fmt.Fprintf(w, "%s  check %s: %s", indent, c.Name, c.State)
		if c.Summary != "" {
			fmt.Fprintf(w, " — %s", shorten.OneLine(c.Summary, 120))
		}
		if c.URL != "" {
			fmt.Fprintf(w, " %s", c.URL)
		}
		fmt.Fprintln(w)
	}
	if d.MergeCommit != "" {
		fmt.Fprintf(w, "%s  merged as %s\n", indent, d.MergeCommit)
	}
	for i, f := range d.Files {
		if i == 20 {
			fmt.Fprintf(w, "%s  … and %d more files (outerloop items ID --diff)\n", indent, d.FileCount-20)
			break
		}
		name := pathText(f.Path)
		if f.From != "" {
			name = pathText(f.From) + " → " + name
		}
		if f.Binary {
			fmt.Fprintf(w, "%s  %s (binary)\n", indent, name)
		} else {
			fmt.Fprintf(w, "%s  %s +%d -%d\n", indent, name, f.Added, f.Deleted)
		}
	}
}

// pathText shows a file name as it is, or quoted when it holds spaces or characters a
// terminal would act on (a file name may hold anything, newlines and escapes included).
func pathText(p string) string {
	if q := strconv.Quote(p); q != `"`+p+`"` || strings.ContainsAny(p, " \t") {
		return q
	}
	return p
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func lastExit(it *workitems.Item) string {
	for i := len(it.Attempts) - 1; i >= 0; i-- {
		if e := it.Attempts[i].Exit; e != nil {
			if e.Budget != "" {
				return string(e.Reason) + "(" + string(e.Budget) + ")"
			}
			return string(e.Reason)
		}
	}
	return "-"
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return clock.Now().Sub(t).Round(time.Second).String()
}

// startedBy says what made an item: its origin, who, and for a trigger call how the caller
// proved itself, its idempotency key and the names of the fields it sent.
func startedBy(o workitems.Origin) string {
	s := string(o.Kind)
	if o.Actor != "" {
		s += " (" + o.Actor + ")"
	}
	if !o.Tick.IsZero() {
		s += " tick " + o.Tick.UTC().Format(time.RFC3339)
	}
	if o.Forced {
		s += ", forced past max_open"
	}
	if c := o.Caller; c != nil {
		s += ", authenticated by " + string(c.Auth)
		if c.IdempotencyKey != "" {
			s += fmt.Sprintf(", idempotency key %q", c.IdempotencyKey)
		}
		if len(c.Fields) > 0 {
			s += ", fields " + strings.Join(c.Fields, ", ")
		}
	}
	return s
}

// printAlertOrigin says what started an alert's item: each alert's name, labels and link, and
// when the group resolved.
func printAlertOrigin(w io.Writer, al *workitems.AlertOrigin) {
	fmt.Fprintf(w, "started by: Alertmanager receiver %s, %d alert(s)", al.Receiver, len(al.Alerts))
	if al.Truncated > 0 {
		fmt.Fprintf(w, " (+%d not recorded)", al.Truncated)
	}
	fmt.Fprintln(w)
	for _, a := range al.Alerts {
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			if k != "alertname" {
				labels = append(labels, k+"="+a.Labels[k])
			}
		}
		fmt.Fprintf(w, "  alert %s {%s}", a.Name(), shorten.OneLine(strings.Join(labels, ", "), 300))
		if !a.StartsAt.IsZero() {
			fmt.Fprintf(w, " since %s", a.StartsAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		if s := a.Annotations["summary"]; s != "" {
			fmt.Fprintf(w, "    summary: %s\n", shorten.OneLine(s, 300))
		}
		if a.GeneratorURL != "" {
			fmt.Fprintf(w, "    source: %s\n", a.GeneratorURL)
		}
	}
	if !al.ResolvedAt.IsZero() {
		fmt.Fprintf(w, "  resolved at %s\n", al.ResolvedAt.UTC().Format(time.RFC3339))
	}
}

// printItem writes an item for a terminal: summary, its wait, attempts, decisions, review
// rounds, events.
func printItem(w io.Writer, v api.ItemView) {
	it, evs := v.Item, v.Events
	fmt.Fprintf(w, "%s  [%s]  template %s  attempt %d/%d\n", it.ID, it.State, it.Template, it.Attempt, it.MaxAttempts)
	fmt.Fprintf(w, "goal: %s\n", it.Goal)
	fmt.Fprintf(w, "started by: %s\n", startedBy(it.Origin))
	if al := it.Origin.Alert; al != nil {
		printAlertOrigin(w, al)
	}
	if it.RerunOf != "" {
		fmt.Fprintf(w, "re-run of %s\n", it.RerunOf)
	}
	if len(it.Reruns) > 0 {
		fmt.Fprintf(w, "re-run as %s\n", strings.Join(it.Reruns, ", "))
	}
	if p := it.Pin; p != nil {
		fmt.Fprintf(w, "created under: config %s, template version %s\n", p.Config, p.Template)
	}
	fmt.Fprintf(w, "spend: $%.4f, %d steps, %s, %d model calls, %d tool calls, %d in / %d out tokens\n",
		it.Spend.CostUSD, it.Spend.Steps, it.Spend.WallTime.D().Round(time.Millisecond), it.Spend.ModelCalls,
		it.Spend.ToolCalls, it.Spend.InputTokens, it.Spend.OutputTokens)
	if it.Escalation != nil {
		fmt.Fprintf(w, "ESCALATED %s ago: %s — %s\n", age(it.Escalation.At), it.Escalation.Reason, it.Escalation.Summary)
	}
	if it.Wait != nil {
		printWait(w, it.Wait, v.NextPoll)
	}
	for _, a := range it.Attempts {
		fmt.Fprintf(w, "\nattempt %d [%s]", a.N, a.State)
		if len(a.Changed) > 0 {
			fmt.Fprintf(w, " changed: %s", strings.Join(a.Changed, ", "))
		}
		fmt.Fprintln(w)
		if a.Condition.Input != "" {
			fmt.Fprintf(w, "  input: %s\n", shorten.OneLine(a.Condition.Input, 300))
		}
		if a.Exit != nil {
			fmt.Fprintf(w, "  exit: %s %s %s\n", a.Exit.Reason, a.Exit.Budget, shorten.OneLine(a.Exit.Message, 200))
		}
		if v := a.Verified; v != nil {
			fmt.Fprintf(w, "  evidence: %s\n", shorten.OneLine(v.Summary, 300))
		}
		if d := a.Decision; d != nil {
			fmt.Fprintf(w, "  decision: %s (%s) %s\n", d.Outcome, d.Rule, shorten.OneLine(strings.Join(d.Reasons, "; "), 300))
		}
		if d := a.Delivery; d != nil {
			printDelivery(w, "  ", d)
		}
	}
	for _, r := range v.ReviewRounds {
		fmt.Fprintf(w, "\nreview round %d (%s)", r.N, r.At.UTC().Format(time.RFC3339))
		if len(r.Reviewers) > 0 {
			fmt.Fprintf(w, ": changes requested by %s", strings.Join(r.Reviewers, ", "))
		}
		if r.PR != 0 {
			fmt.Fprintf(w, " on #%d", r.PR)
		}
		fmt.Fprintln(w)
		for _, l := range strings.Split(strings.TrimRight(r.Review, "\n"), "\n") {
			fmt.Fprintf(w, "  | %s\n", l)
		}
	}
	fmt.Fprintln(w, "\nevents:")
	for _, e := range evs {
		line := string(e.Type)
		if e.Type == workitems.EventState {
			line += " " + string(e.From) + " → " + string(e.To)
		}
		if k := e.Data["kind"]; k != "" {
			line += " " + k
		}
		if st := e.Data["step"]; e.Type == workitems.EventDelivery && st != "" {
			line += " " + st
		}
		if e.Message != "" {
			line += ": " + shorten.OneLine(e.Message, 160)
		}
		fmt.Fprintf(w, "  %s  #%d  %s\n", e.At.Format("15:04:05.000"), e.Attempt, line)
	}
}

// printWait writes what a waiting item waits for: kind, commit, pull request, since, deadline,
// the next poll (the poller's index when known, else the wait's own) and why.
func printWait(w io.Writer, wt *workitems.Wait, nextPoll *time.Time) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	np := wt.NextPoll
	if nextPoll != nil {
		np = *nextPoll
	}
	fmt.Fprintf(w, "WAITING for %s (wait %d, attempt %d)\n", wt.Kind, wt.Seq, wt.Attempt)
	if wt.SHA != "" {
		fmt.Fprintf(w, "  sha: %s\n", wt.SHA)
	}
	if wt.PR != 0 {
		fmt.Fprintf(w, "  pr: #%d", wt.PR)
		if wt.Repo != "" {
			fmt.Fprintf(w, " of %s", wt.Repo)
		}
		if wt.Forge != "" {
			fmt.Fprintf(w, " on %s", wt.Forge)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  since: %s (%s ago)\n", ts(wt.Since), age(wt.Since))
	fmt.Fprintf(w, "  deadline: %s\n", ts(wt.Deadline))
	fmt.Fprintf(w, "  next poll: %s", ts(np))
	if wt.Polls > 0 {
		fmt.Fprintf(w, " (polled %d×)", wt.Polls)
	}
	fmt.Fprintln(w)
	if wt.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", shorten.OneLine(wt.Reason, 300))
	}
}

func escalationsCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit, offset int
	c := &cobra.Command{
		Use:   "escalations",
		Short: "List items waiting for a person, oldest first",
		Args:  cobra.NoArgs,
		RunE: g.withStoreApp(func(ctx context.Context, a *app.App, _ []string) error {
			items, err := a.Store.Escalated(ctx, offset, limit)
			if err != nil {
				return err
			}
			if asJSON {
				if items == nil {
					items = []*workitems.Item{}
				}
				return writeJSON(g.out, items)
			}
			if len(items) == 0 {
				fmt.Fprintln(g.out, "no escalations")
				return nil
			}
			tw := tabwriter.NewWriter(g.out, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAGE\tREASON\tSUMMARY")
			for _, it := range items {
				e := it.Escalation
				if e == nil {
					e = &workitems.Escalation{At: it.UpdatedAt}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", it.ID, age(e.At), e.Reason, shorten.OneLine(e.Summary, 100))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printWhy(g.out, items)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.Flags().IntVar(&limit, "limit", 100, "show at most this many")
	c.Flags().IntVar(&offset, "offset", 0, "skip this many of the oldest")
	return c
}

func resolveCmd(g *globals) *cobra.Command {
	var doClose, doRetry, doCancel bool
	var input, actor string
	var budgets []string
	c := &cobra.Command{
		Use:   "resolve ID --close | --retry [--input TEXT] [--budget KIND=N]... | --cancel",
		Short: "Move an escalated item on: close it, retry it with your input or a raised budget, or cancel it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := resolveRequest(doClose, doRetry, doCancel, input, budgets)
			if err != nil {
				return err
			}
			res, err := req.Resolution(actorName(actor))
			if err != nil {
				return err
			}
			// Through withApp as every action, so the resolve is in the audit list.
			return g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
				it, err := a.Queue.Resolve(ctx, args[0], res)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "%s: %s by %s → %s (attempt %d)\n", it.ID, res.Action, res.Actor, it.State, it.Attempt)
				return nil
			})(cmd, args)
		},
	}
	c.Flags().BoolVar(&doClose, string(workitems.ResolveClose), false, "close the item as done")
	c.Flags().BoolVar(&doRetry, string(workitems.ResolveRetry), false, "run another attempt")
	c.Flags().BoolVar(&doCancel, string(workitems.ResolveCancel), false, "cancel the item")
	c.Flags().StringVar(&input, "input", "", "with --retry: your answer or hint for the next attempt")
	c.Flags().StringArrayVar(&budgets, "budget", nil, "with --retry: raise a cap, KIND=VALUE in the config's units (cost_usd=2.5, wall_time=1h, item.cost_usd=30)")
	c.Flags().StringVar(&actor, "actor", "", "who resolves (default $USER)")
	return c
}

// resolveRequest checks the flags and builds the same request the HTTP API takes.
func resolveRequest(doClose, doRetry, doCancel bool, input string, budgets []string) (api.ResolveRequest, error) {
	n := 0
	req := api.ResolveRequest{Input: input}
	for action, set := range map[workitems.ResolutionAction]bool{workitems.ResolveClose: doClose, workitems.ResolveRetry: doRetry, workitems.ResolveCancel: doCancel} {
		if set {
			n++
			req.Action = string(action)
		}
	}
	if n != 1 {
		return req, errors.New("give exactly one of --close, --retry, --cancel")
	}
	for _, kv := range budgets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return req, fmt.Errorf("--budget %q: want KIND=VALUE (wall_time=1h, cost_usd=2.5)", kv)
		}
		item, isItem := strings.CutPrefix(k, "item.")
		if isItem {
			k = item
		}
		f, err := workitems.ParseBudgetValue(workitems.BudgetKind(k), v)
		if err != nil {
			return req, fmt.Errorf("--budget %q: %w", kv, err)
		}
		if isItem {
			if req.ItemBudget == nil {
				req.ItemBudget = map[string]float64{}
			}
			req.ItemBudget[item] = f
			continue
		}
		if req.Budget == nil {
			req.Budget = map[string]float64{}
		}
		req.Budget[k] = f
	}
	return req, nil
}

func steerCmd(g *globals) *cobra.Command {
	var actor string
	c := &cobra.Command{
		Use:   "steer ID TEXT",
		Short: "Queue input for an item's running agent; it appears in the agent's next model request",
		Args:  cobra.ExactArgs(2),
		RunE: g.withApp(false, func(ctx context.Context, a *app.App, args []string) error {
			if err := a.Queue.Steer(ctx, args[0], args[1], actorName(actor)); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "steer input queued for %s\n", args[0])
			return nil
		}),
	}
	c.Flags().StringVar(&actor, "actor", "", "who steers (default $USER)")
	return c
}

func verifyCmd(g *globals) *cobra.Command {
	var reports []string
	var format, template, ciFile, diffFile, replayDir string
	var exitCode int
	var asJSON bool
	c := &cobra.Command{
		Use: "verify [--report FILE]... [--format " + strings.ReplaceAll(workitems.JoinKinds(workitems.AllReportFormats()), ", ", "|") + "] [--template NAME] " +
			"[--exit-code N] [--ci FILE] [--diff FILE] [--replay DIR] [--json]",
		Short: "Decide on evidence files as the verifier would (exit 0 only for close); replays an item's decision offline",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt := verify.CLIOptions{Format: workitems.ReportFormat(format), CIFile: ciFile, DiffFile: diffFile, JSON: asJSON}
			if cmd.Flags().Changed("exit-code") {
				if exitCode < 0 || exitCode > 255 {
					return fmt.Errorf("--exit-code %d: want 0..255", exitCode)
				}
				opt.ExitCode = &exitCode
			}
			if replayDir != "" && (len(reports) > 0 || opt.ExitCode != nil || ciFile != "" || diffFile != "") {
				return errors.New("--replay DIR takes its evidence from DIR/replay.json: give no --report, --exit-code, --ci or --diff with it")
			}
			if replayDir == "" && len(reports) == 0 && opt.ExitCode == nil && ciFile == "" {
				return errors.New("give at least one --report FILE (or --exit-code / --ci, or --replay DIR)")
			}
			if template != "" {
				cfg, err := g.loadConfig()
				if err != nil {
					return err
				}
				t, ok := cfg.Template(template)
				if !ok {
					names := make([]string, 0, len(cfg.Templates))
					for _, t := range cfg.Templates {
						names = append(names, t.Name)
					}
					sort.Strings(names)
					return fmt.Errorf("--template %q: not in %s (have: %s)", template, g.config, strings.Join(names, ", "))
				}
				opt.Template = t
			}
			var code int
			var err error
			if replayDir != "" {
				code, err = verify.ReplayDir(cmd.Context(), g.out, replayDir, opt)
			} else {
				code, err = verify.RunCLI(cmd.Context(), g.out, reports, opt)
			}
			if err != nil {
				return err
			}
			if code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	c.Flags().StringArrayVar(&reports, "report", nil, "report file (repeatable)")
	c.Flags().StringVar(&format, "format", "auto", "the reports' format: "+workitems.JoinKinds(workitems.AllReportFormats()))
	c.Flags().StringVar(&template, "template", "", "decide as this template would (its diff limits and required CI checks; default: a plain done check)")
	c.Flags().IntVar(&exitCode, "exit-code", 0, "the test command's exit status: non-zero never closes")
	c.Flags().StringVar(&ciFile, "ci", "", "CI checks as a POST /api/evidence body (JSON)")
	c.Flags().StringVar(&diffFile, "diff", "", "the attempt's diff against its base commit (git diff output), for the scope and secret rules")
	c.Flags().StringVar(&replayDir, "replay", "", "replay an attempt's decision from its downloaded evidence files (DIR/replay.json; pass its --template)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the whole verdict (decision, evidence, parsed reports) as JSON")
	return c
}

// followItem prints an item's events from the start and then as they happen, until the item
// settles (terminal or waiting for a person) or ctx ends.
func followItem(ctx context.Context, s *itemstore.Store, id string, w io.Writer) error {
	after := "0"
	for {
		evs, err := s.Events(ctx, id, after, 200, time.Second)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range evs {
			after = e.ID
			fmt.Fprintln(w, formatEvent(e))
		}
		if len(evs) > 0 {
			continue
		}
		it, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		if it.State.Terminal() || it.State == workitems.StateEscalated {
			fmt.Fprintf(w, "%s is %s\n", it.ID, it.State)
			return nil
		}
	}
}

// printWhy prints, below the escalations table, each escalation's cause (the sandbox's doing)
// and the failing command's last output lines.
func printWhy(w io.Writer, items []*workitems.Item) {
	for _, it := range items {
		e := it.Escalation
		if e == nil || (e.Cause == "" && e.Output == "") {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", it.ID)
		if e.Cause != "" {
			fmt.Fprintf(w, "  sandbox: %s\n", e.Cause)
		}
		for _, l := range strings.Split(e.Output, "\n") {
			if l != "" {
				fmt.Fprintf(w, "  | %s\n", l)
			}
		}
	}
}
