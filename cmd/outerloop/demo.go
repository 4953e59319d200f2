package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/scheduler"
	"outerloop/worker/agentloop/demo"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func demoCmd(g *globals) *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run three items end to end on an embedded Redis (no setup): a retry that fixes, a budget escalation, a recorded agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), g, keep)
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the demo's temp directory (sample repos, workspaces, events)")
	return c
}

// fixScriptFiles is the demo's fix script for the calc module (internal/sample). It reads the previous failure
// from OUTERLOOP_INPUT: the first attempt knows none and changes nothing useful; the verifier
// retries with the failing test in the input (a changed condition) and the second attempt fixes it.
var fixScriptFiles = map[string]string{
	"fix.sh": `#!/bin/sh
# A "fix" that only knows what the verifier told it.
if echo "$OUTERLOOP_INPUT" | grep -q TestAdd; then
  echo "previous failure mentions TestAdd: fixing the sign in Add"
  ` + sample.FixCommand + `
else
  echo "no failure known yet: formatting only"
  gofmt -w calc.go
fi
`,
}

func writeFiles(dir string, files map[string]string) error {
	for name, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			return err
		}
	}
	return nil
}

// demoSandbox decides the demo's sandbox: bubblewrap when it starts here, else mode off for
// the demo's own sample commands (a fresh machine must run the demo; a worker would refuse).
// It returns the YAML line for the config and what to tell the user ("" when sandboxed).
func demoSandbox(ctx context.Context) (yaml, notice string) {
	if _, err := proc.Probe(ctx, os.Getenv("OUTERLOOP_BWRAP")); err != nil {
		return "sandbox: {mode: off}\n", fmt.Sprintf("sandbox: OFF — %v.\n"+
			"  The demo runs its own sample commands unsandboxed. A worker would refuse items here: %s\n", err, proc.SandboxHint)
	}
	// The sample repositories are the demo's own, so their commands may share the machine's
	// warm Go build cache (an explicit opt-in; the default keeps one per repository, which
	// would compile the standard library afresh in every demo's new work dir).
	return "sandbox: {build_cache: shared}\n", ""
}

func demoConfig(dir, sandbox string) (*config.Config, error) {
	calc, payment := filepath.Join(dir, "calc"), filepath.Join(dir, "payment")
	for _, d := range []string{calc, payment} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := sample.Write(calc); err != nil {
		return nil, err
	}
	if err := writeFiles(calc, fixScriptFiles); err != nil {
		return nil, err
	}
	if err := demo.WriteModule(payment); err != nil {
		return nil, err
	}
	rec := filepath.Join(dir, "recorded-model.jsonl")
	if err := demo.WriteRecording(rec); err != nil {
		return nil, err
	}
	y := sandbox + fmt.Sprintf(`
defaults:
  max_attempts: 3
  budget: {wall_time: 5m, verify_reserve: 2m}
  item_budget: {cost_usd: 5}
providers:
  %[4]s:
    kind: replay
    file: %[3]s
    prices: {input_per_mtok: 1.25, cached_input_per_mtok: 0.125, output_per_mtok: 10}
templates:
  - name: fix-calc
    repo: %[1]s
    goal: Make TestAdd pass.
    loop: {kind: script, commands: ["./fix.sh"]}
    done_check: {commands: ["go test -json ./..."]}
  - name: slow-bump
    repo: %[1]s
    goal: Bump dependencies (a step that takes longer than its budget).
    budget: {wall_time: 2m3s, verify_reserve: 2m}
    loop: {kind: script, commands: ["echo resolving modules; sleep 30"]}
    done_check: {commands: ["go test -json ./..."]}
  - name: payment-agent
    repo: %[2]s
    goal: %[5]q
    loop: {kind: agent, provider: %[4]s, context_limit_tokens: 100000}
    budget: {model_calls: 20, tool_calls: 40, cost_usd: 1}
    done_check: {commands: ["go test -json ./..."]}
`, calc, payment, rec, demo.ProviderName, demo.Goal)
	return config.ParseConfig([]byte(y))
}

func runDemo(ctx context.Context, g *globals, keep bool) error {
	start := clock.Now()
	dir, err := os.MkdirTemp("", "outerloop-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	sandboxYAML, notice := demoSandbox(ctx)
	cfg, err := demoConfig(dir, sandboxYAML)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	cfg.Dir = dir
	g.logLevel = "warn" // the demo prints events itself
	if g.logFormat == "auto" {
		g.logFormat = "text"
	}
	log, err := g.logger()
	if err != nil {
		return err
	}
	a, err := app.Open(ctx, app.Options{Config: cfg, Workdir: filepath.Join(dir, "work"), Logger: log, KeepWorkspaces: keep})
	if err != nil {
		return err
	}
	defer a.Close()
	out := g.out
	fmt.Fprintf(out, "outerloop demo — embedded Redis (in-process miniredis), files in %s\n", dir)
	if notice != "" {
		fmt.Fprint(out, notice)
	} else {
		fmt.Fprintf(out, "sandbox: %s\n", a.Runner.Describe())
	}
	logPrivilege(a.Logger, g.euid(), a.Config, a.Runner) // the demo's worker runs in this process
	fmt.Fprintln(out, "  fix-calc:      a script loop; its first try does not fix the failing test, the retry (with the failure as input) does")
	fmt.Fprintln(out, "  slow-bump:     a script that outlasts its 3s wall-time budget → budget_exhausted → escalated to a person")
	fmt.Fprintln(out, "  payment-agent: the native agent loop driven by a RECORDED model (replay of a real session, no API key)")
	fmt.Fprintln(out)

	eventsPath := filepath.Join(dir, "events.jsonl")
	ef, err := os.Create(eventsPath)
	if err != nil {
		return err
	}
	defer ef.Close()
	w := a.Worker(3, "demo-worker")
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Shutdown(context.WithoutCancel(ctx))

	var ids []string
	for _, name := range []string{"fix-calc", "slow-bump", "payment-agent"} {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: name, Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "demo"}})
		if err != nil {
			return err
		}
		ids = append(ids, it.ID)
	}
	if err := followUntilSettled(ctx, a, ids, out, ef, 90*time.Second); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nsummary")
	for _, id := range ids {
		it, err := a.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %-40s %-9s after %d attempt(s); spend $%.4f, %d steps, %d model calls, %d tool calls, %s\n",
			it.ID, it.State, len(it.Attempts), it.Spend.CostUSD, it.Spend.Steps, it.Spend.ModelCalls, it.Spend.ToolCalls,
			it.Spend.WallTime.D().Round(time.Millisecond))
		if last := it.Decisions; len(last) > 0 {
			d := last[len(last)-1]
			fmt.Fprintf(out, "  %-40s decision %s (%s)\n", "", d.Outcome, d.Rule)
		}
	}
	if err := printDelivered(ctx, a, ids, out, dir, keep); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nevents: %s (one JSON event per line)\n", eventsPath)
	if !keep {
		fmt.Fprintln(out, "        (removed at exit; run with --keep to look at them, the workspaces and the sample repos)")
	}
	fmt.Fprintln(out, "escalated items wait for a person: with a real Redis, `outerloop escalations` and `outerloop resolve ID --retry --input ...`")
	fmt.Fprintf(out, "demo finished in %s\n", clock.Now().Sub(start).Round(100*time.Millisecond))
	return nil
}

// followUntilSettled prints every event as it happens until every item is closed, escalated,
// failed or cancelled.
func followUntilSettled(ctx context.Context, a *app.App, ids []string, out io.Writer, ef io.Writer, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	after := "0"
	for {
		evs, err := a.Store.AllEvents(ctx, after, 200, 500*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("demo: items not settled within %s", limit)
		}
		if err != nil {
			return err
		}
		for _, e := range evs {
			after = e.ID
			b, _ := json.Marshal(e)
			fmt.Fprintf(ef, "%s\n", b)
			fmt.Fprintln(out, formatEvent(e))
		}
		settled := 0
		for _, id := range ids {
			it, err := a.Store.Get(ctx, id)
			if err == nil && (it.State.Terminal() || it.State == workitems.StateEscalated) {
				settled++
			}
		}
		if settled == len(ids) && len(evs) == 0 {
			return nil
		}
	}
}

func formatEvent(e workitems.Event) string {
	item := e.Item
	if i := strings.IndexByte(item, '@'); i > 0 {
		item = item[:i]
	}
	what := string(e.Type)
	switch e.Type {
	case workitems.EventState:
		what = fmt.Sprintf("%s → %s", e.From, e.To)
	case workitems.EventStep:
		what = e.Data["kind"]
		if e.Data["kind"] == "tool_call" && e.Data["tool"] != "" {
			what += " " + e.Data["tool"]
		}
	case workitems.EventAttemptExited:
		what = "exit " + e.Data["reason"]
		if b := e.Data["budget"]; b != "" {
			what += "(" + b + ")"
		}
	case workitems.EventDecision:
		what = fmt.Sprintf("decision %s [%s]", e.Data["outcome"], e.Data["rule"])
	case workitems.EventDelivery:
		what = "delivery " + e.Data["step"]
	}
	msg := shorten.OneLine(e.Message, 110)
	if e.Type == workitems.EventDecision && e.Data["reasons"] != "" {
		msg = shorten.OneLine(e.Data["reasons"], 110)
	}
	if msg != "" {
		msg = "  " + msg
	}
	return fmt.Sprintf("%s  %-14s #%d %-28s%s", e.At.Local().Format("15:04:05.000"), item, e.Attempt, what, msg)
}

// demoPatchLines is how much of each delivered patch the demo prints.
const demoPatchLines = 16

// printDelivered shows what the closed items delivered: the record and the head of the patch
// kept with the item (written to DIR/patches with --keep).
func printDelivered(ctx context.Context, a *app.App, ids []string, out io.Writer, dir string, keep bool) error {
	fmt.Fprintln(out, "\ndelivered results (mode patch: the change is one commit on the attempt's base, its patch kept with the item)")
	for _, id := range ids {
		it, err := a.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		d := it.Delivery
		if it.State != workitems.StateClosed || d == nil {
			continue
		}
		fmt.Fprintf(out, "  %s\n", it.ID)
		printDelivery(out, "    ", d)
		if d.Commit == "" {
			continue
		}
		patch, err := a.Store.Patch(ctx, it.ID, d.Attempt)
		if err != nil {
			return err
		}
		lines := strings.SplitAfter(string(patch), "\n")
		for i, l := range lines {
			if i == demoPatchLines {
				fmt.Fprintf(out, "    | … %d more lines\n", len(lines)-i-1)
				break
			}
			if l != "" {
				fmt.Fprintf(out, "    | %s", l)
			}
		}
		if keep {
			p := filepath.Join(dir, "patches", strings.NewReplacer("@", "_", "/", "_").Replace(it.ID)+".patch")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, patch, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(out, "    patch: %s (%d bytes)\n", p, len(patch))
		}
	}
	fmt.Fprintln(out, "  with a real Redis: `outerloop items ID` shows the delivery, `outerloop items ID --diff` prints the patch, GET /api/items/ID/diff serves it")
	return nil
}
