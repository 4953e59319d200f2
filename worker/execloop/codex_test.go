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

// codexSetup points the real Codex CLI at a scripted Responses server through the template's
// provider.
func codexSetup(t *testing.T, script agenttest.Script, budget workitems.Budget) (*attempt, *agenttest.Server, *execloop.Loop) {
	t.Helper()
	bin := agentBin(t, "OUTERLOOP_CODEX_BIN", "codex")
	srv := agenttest.NewResponses(t, script)
	a := newAttempt(t, "codex", budget)
	sampleRepo(t, a.Workspace)
	a.Config.Providers["local"] = config.ProviderConfig{Kind: "openai-responses", BaseURL: srv.URL + "/v1",
		APIKeyEnv: "TEST_OPENAI_KEY", Model: "test-model",
		Prices: config.Prices{InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8}}
	a.Template.Loop.Provider = "local"
	a.env["TEST_OPENAI_KEY"] = "sk-test-not-a-real-key"
	return a, srv, execloop.New(execloop.WithLookupEnv(a.lookup), execloop.WithBinary("codex", bin))
}

func execCommand(cmd string) agenttest.Call {
	b, _ := json.Marshal(map[string]any{"cmd": cmd, "yield_time_ms": 30000})
	return agenttest.Call{Name: "exec_command", Arguments: string(b)}
}

func TestCodex(t *testing.T) {
	t.Parallel()

	t.Run("the agent fixes the failing test and the run exits completed", func(t *testing.T) {
		t.Parallel()
		a, srv, loop := codexSetup(t, agenttest.Sequence(
			agenttest.Reply{Calls: []agenttest.Call{execCommand("sed -i 's/a - b/a + b/' calc.go")},
				Usage: agenttest.Usage{InputTokens: 1000, CachedInputTokens: 400, OutputTokens: 50}},
			agenttest.Reply{Text: "Fixed Add: it subtracted.", Usage: agenttest.Usage{InputTokens: 1200, OutputTokens: 20}},
		), workitems.Budget{})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "Fixed Add: it subtracted." {
			t.Fatalf("exit = %+v, want completed with the agent's last message", exit)
		}
		if !goTestPasses(t, a.Workspace) {
			t.Fatal("the sample repo's tests still fail after the agent's edit")
		}
		reqs := srv.Requests()
		if len(reqs) != 2 || !reqs[0].Contains("Make the tests in this module pass.") {
			t.Fatalf("got %d requests; the first must carry the item's goal", len(reqs))
		}
		if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test-not-a-real-key" {
			t.Fatalf("Authorization = %q, want the provider key from its env variable", got)
		}
		spent := a.Meter.Spent()
		if spent.InputTokens != 2200 || spent.OutputTokens != 70 || spent.ToolCalls != 1 || spent.ModelCalls != 1 {
			t.Fatalf("spent = %+v, want 2200 in, 70 out, 1 tool call, 1 turn", spent)
		}
		// 1800 uncached × $2 + 400 cached × $0.5 + 70 out × $8, per million.
		if want := (1800*2 + 400*0.5 + 70*8) / 1e6; spent.CostUSD < want*0.999 || spent.CostUSD > want*1.001 {
			t.Fatalf("cost = %v, want %v (usage × price table)", spent.CostUSD, want)
		}
		var st execloop.State
		if err := json.Unmarshal(a.cp.State(), &st); err != nil || st.Session == "" || st.Offset == 0 {
			t.Fatalf("checkpoint = %s (%v), want the thread id and an offset", a.cp.State(), err)
		}
		for _, k := range []string{"started", "thread_started", "turn_started", "command", "agent_message", "turn_completed", "exited"} {
			if !strings.Contains(strings.Join(a.ev.kinds(), " "), k) {
				t.Fatalf("events %v lack %q", a.ev.kinds(), k)
			}
		}
	})

	t.Run("the agent claims success while the tests still fail and the run exits completed with its claim", func(t *testing.T) {
		t.Parallel()
		a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Text: "All tests pass now."}), workitems.Budget{})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "All tests pass now." {
			t.Fatalf("exit = %+v, want completed with the claim", exit)
		}
		if goTestPasses(t, a.Workspace) {
			t.Fatal("the sample repo's tests pass, but the agent changed nothing")
		}
	})

	t.Run("commands past the tool-call budget kill the process group and exit budget_exhausted", func(t *testing.T) {
		t.Parallel()
		a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Calls: []agenttest.Call{execCommand("true")}}),
			workitems.Budget{ToolCalls: 2})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetToolCalls {
			t.Fatalf("exit = %+v, want budget_exhausted tool_calls", exit)
		}
		if m := groupMembers(startedPID(t, a.ev)); len(m) > 0 {
			t.Fatalf("processes %v of the agent's group still run", m)
		}
	})

	t.Run("usage priced past the cost budget exits budget_exhausted", func(t *testing.T) {
		t.Parallel()
		a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Text: "done",
			Usage: agenttest.Usage{InputTokens: 1_000_000, OutputTokens: 10}}), workitems.Budget{CostUSD: 1})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetCostUSD {
			t.Fatalf("exit = %+v, want budget_exhausted cost_usd ($2 of usage against a $1 cap)", exit)
		}
	})

	t.Run("cancelling mid-command kills the agent and its command and exits aborted", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Calls: []agenttest.Call{
			execCommand("echo started > ready.fifo; exec sleep " + marker)}}), workitems.Budget{})
		ready := readFIFO(mkfifo(t, a.Workspace, "ready.fifo"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan workitems.Exit, 1)
		go func() { done <- loop.Run(ctx, a.Attempt) }()
		within(t, ready, "the agent's command to start")
		pids := awaitByArg(t, marker)
		if len(pids) == 0 {
			t.Fatal("the agent's command is not running before the cancel")
		}
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
		a, _, _ := codexSetup(t, agenttest.Sequence(agenttest.Reply{Text: "unused"}), workitems.Budget{})
		loop := execloop.New(execloop.WithLookupEnv(a.lookup), execloop.WithBinary("codex", "/nonexistent/bin/codex"))
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitFailed || exit.Class != workitems.ClassNotFound || !strings.Contains(exit.Message, "/nonexistent/bin/codex") {
			t.Fatalf("exit = %+v, want failed not_found naming the binary", exit)
		}
	})

	t.Run("a binary that fails to start its run exits failed with its error", func(t *testing.T) {
		t.Parallel()
		a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Text: "unused"}), workitems.Budget{})
		a.Template.Loop.Args = []string{"--no-such-flag"}
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitFailed || !strings.Contains(exit.Message, "codex exited with status") ||
			!strings.Contains(exit.Message, "no-such-flag") {
			t.Fatalf("exit = %+v, want failed with codex's complaint", exit)
		}
	})
}

func TestCodexProviderErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		want   workitems.Exit
	}{
		{"a rejected key exits failed with class permission", 401,
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission}},
		{"a provider outage exits transient_error", 503,
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, _, loop := codexSetup(t, agenttest.Sequence(agenttest.Reply{Status: tc.status, Error: "scripted failure"}), workitems.Budget{})
			// No retries with backoff in a test.
			a.Template.Loop.Args = []string{"-c", "model_providers.outerloop.request_max_retries=0",
				"-c", "model_providers.outerloop.stream_max_retries=0"}
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
