package execloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"outerloop/worker/execloop"
	"outerloop/worker/execloop/agenttest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// claudeSetup points the real Claude Code CLI at a scripted Messages server through the
// template's provider, with permissions skipped (IS_SANDBOX=1 lets root do that).
func claudeSetup(t *testing.T, script agenttest.Script, budget workitems.Budget) (*attempt, *agenttest.Server, *execloop.Loop) {
	t.Helper()
	bin := agentBin(t, "OUTERLOOP_CLAUDE_BIN", "claude")
	srv := agenttest.NewMessages(t, script)
	a := newAttempt(t, "claude", budget)
	sampleRepo(t, a.Workspace)
	a.Config.Providers["local"] = config.ProviderConfig{Kind: "anthropic", BaseURL: srv.URL,
		APIKeyEnv: "TEST_ANTHROPIC_KEY", Model: "test-model",
		Prices: config.Prices{InputPerMTok: 10, OutputPerMTok: 50}}
	a.Template.Loop.Provider = "local"
	a.Template.Loop.Env = []string{"IS_SANDBOX"}
	a.Template.Loop.Args = []string{"--dangerously-skip-permissions"}
	a.env["TEST_ANTHROPIC_KEY"] = "sk-ant-test-not-a-real-key"
	a.env["IS_SANDBOX"] = "1"
	return a, srv, execloop.New(execloop.WithLookupEnv(a.lookup), execloop.WithBinary("claude", bin))
}

func bash(cmd string) agenttest.Call {
	b, _ := json.Marshal(map[string]any{"command": cmd, "description": "run a command"})
	return agenttest.Call{Name: "Bash", Arguments: string(b)}
}

func TestClaude(t *testing.T) {
	t.Parallel()

	t.Run("the agent fixes the failing test and the run exits completed", func(t *testing.T) {
		t.Parallel()
		a, srv, loop := claudeSetup(t, agenttest.Sequence(
			agenttest.Reply{Calls: []agenttest.Call{bash("sed -i 's/a - b/a + b/' calc.go")},
				Usage: agenttest.Usage{InputTokens: 1000, OutputTokens: 40}},
			agenttest.Reply{Text: "Fixed Add: it subtracted.", Usage: agenttest.Usage{InputTokens: 1100, OutputTokens: 20}},
		), workitems.Budget{})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "Fixed Add: it subtracted." {
			t.Fatalf("exit = %+v, want completed with the agent's last message", exit)
		}
		if !goTestPasses(t, a.Workspace) {
			t.Fatal("the sample repo's tests still fail after the agent's edit")
		}
		reqs := srv.Requests()
		if len(reqs) < 2 || !reqs[0].Contains("Make the tests in this module pass.") {
			t.Fatalf("got %d requests; the first must carry the item's goal", len(reqs))
		}
		if got := reqs[0].Header.Get("X-Api-Key"); got != "sk-ant-test-not-a-real-key" {
			t.Fatalf("x-api-key = %q, want the provider key from its env variable", got)
		}
		spent := a.Meter.Spent()
		if spent.InputTokens != 2100 || spent.OutputTokens != 60 || spent.ToolCalls != 1 || spent.ModelCalls != 2 || spent.CostUSD <= 0 {
			t.Fatalf("spent = %+v, want the result's 2100 in, 60 out, its cost, 1 tool call, 2 model calls", spent)
		}
		var st execloop.State
		if err := json.Unmarshal(a.cp.State(), &st); err != nil || st.Session == "" {
			t.Fatalf("checkpoint = %s (%v), want the session id", a.cp.State(), err)
		}
		for _, k := range []string{"init", "tool_use", "tool_result", "agent_message", "result", "exited"} {
			if !strings.Contains(strings.Join(a.ev.kinds(), " "), k) {
				t.Fatalf("events %v lack %q", a.ev.kinds(), k)
			}
		}
	})

	t.Run("the agent claims success while the tests still fail and the run exits completed with its claim", func(t *testing.T) {
		t.Parallel()
		a, _, loop := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Text: "All tests pass now."}), workitems.Budget{})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "All tests pass now." {
			t.Fatalf("exit = %+v, want completed with the claim", exit)
		}
		if goTestPasses(t, a.Workspace) {
			t.Fatal("the sample repo's tests pass, but the agent changed nothing")
		}
	})

	t.Run("spend past the cost budget kills the process group and exits budget_exhausted", func(t *testing.T) {
		t.Parallel()
		// Each reply costs 1000 × $10/M = $0.01 by the price table; the cap is $0.025.
		a, _, loop := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Calls: []agenttest.Call{bash("true")},
			Usage: agenttest.Usage{InputTokens: 1000}}), workitems.Budget{CostUSD: 0.025})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetCostUSD {
			t.Fatalf("exit = %+v, want budget_exhausted cost_usd", exit)
		}
		if m := groupMembers(startedPID(t, a.ev)); len(m) > 0 {
			t.Fatalf("processes %v of the agent's group still run", m)
		}
		if !strings.Contains(strings.Join(a.ev.kinds(), " "), "killed") {
			t.Fatalf("events %v: the agent was not killed", a.ev.kinds())
		}
	})

	t.Run("the model-call budget is passed as --max-turns and its result exits budget_exhausted", func(t *testing.T) {
		t.Parallel()
		a, _, loop := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Calls: []agenttest.Call{bash("true")}}),
			workitems.Budget{ModelCalls: 2})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetModelCalls {
			t.Fatalf("exit = %+v, want budget_exhausted model_calls", exit)
		}
	})

	t.Run("a tool denied permission exits needs_approval", func(t *testing.T) {
		t.Parallel()
		a, _, loop := claudeSetup(t, agenttest.Sequence(
			agenttest.Reply{Calls: []agenttest.Call{bash("sed -i 's/a - b/a + b/' calc.go")}},
			agenttest.Reply{Text: "I could not run the command."}), workitems.Budget{})
		a.Template.Loop.Args = nil // default permission mode: Bash needs approval
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitNeedsApproval || !strings.Contains(exit.Message, "Bash") {
			t.Fatalf("exit = %+v, want needs_approval naming Bash", exit)
		}
	})

	t.Run("cancelling mid-command kills the agent and its command and exits aborted", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, _, loop := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Calls: []agenttest.Call{
			bash("echo started > ready.fifo; exec sleep " + marker)}}), workitems.Budget{})
		ready := readFIFO(mkfifo(t, a.Workspace, "ready.fifo"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan workitems.Exit, 1)
		go func() { done <- loop.Run(ctx, a.Attempt) }()
		within(t, ready, "the agent's command to start")
		// The FIFO opens before `exec sleep` replaces the shell: wait for the exec.
		awaitProcess(t, marker)
		cancel()
		exit := within(t, done, "Run to return")
		if exit.Reason != workitems.ExitAborted {
			t.Fatalf("exit = %+v, want aborted", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("the agent's command (pids %v) survived the cancel", left)
		}
		if m := groupMembers(startedPID(t, a.ev)); len(m) > 0 {
			t.Fatalf("processes %v of the agent's group still run", m)
		}
	})

	t.Run("a missing binary fails with not_found naming it", func(t *testing.T) {
		t.Parallel()
		a, _, _ := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Text: "unused"}), workitems.Budget{})
		a.Template.Loop.Command = "claude-not-installed"
		loop := execloop.New(execloop.WithLookupEnv(a.lookup))
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitFailed || exit.Class != workitems.ClassNotFound || !strings.Contains(exit.Message, "claude-not-installed") {
			t.Fatalf("exit = %+v, want failed not_found naming the binary", exit)
		}
	})

	for _, tc := range []struct {
		name   string
		status int
		msg    string
		want   workitems.Exit
	}{
		{"a rejected key exits failed with class permission", 401, "invalid x-api-key",
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission}},
		{"an overloaded provider exits transient_error", 529, "Overloaded",
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, _, loop := claudeSetup(t, agenttest.Sequence(agenttest.Reply{Status: tc.status, Error: tc.msg}), workitems.Budget{})
			a.Template.Loop.Env = append(a.Template.Loop.Env, "CLAUDE_CODE_MAX_RETRIES")
			a.env["CLAUDE_CODE_MAX_RETRIES"] = "0" // no backoff in a test
			exit := loop.Run(context.Background(), a.Attempt)
			t.Logf("exit: %+v", exit)
			if exit.Reason != tc.want.Reason || exit.Class != tc.want.Class {
				for _, e := range a.ev.all() {
					t.Logf("event %s %s: %s", e.Type, e.Data["kind"], e.Message)
				}
				t.Fatalf("exit = %+v, want %s %s", exit, tc.want.Reason, tc.want.Class)
			}
		})
	}
}
