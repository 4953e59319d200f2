package execloop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"outerloop/worker/execloop"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// shell makes a `command` attempt that runs script with sh.
func shell(t *testing.T, script string, budget workitems.Budget) (*attempt, *execloop.Loop) {
	t.Helper()
	a := newAttempt(t, "command", budget)
	a.Template.Loop.Command = "sh"
	a.Template.Loop.Args = []string{"-c", script}
	return a, execloop.New(execloop.WithLookupEnv(a.lookup))
}

func TestCommand(t *testing.T) {
	t.Parallel()

	t.Run("the environment holds only PATH, HOME, the template's names and the provider key", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, "env | sort | tr '\\n' ' '", workitems.Budget{})
		a.env["ALLOWED"], a.env["SECRET_TOKEN"], a.env["PROVIDER_KEY"] = "yes", "leak", "sk-provider-key" // the key is set, and redacted in output
		a.Template.Loop.Env = []string{"ALLOWED", "UNSET_NAME"}
		a.Config.Providers["p"] = config.ProviderConfig{Kind: "openai-responses", APIKeyEnv: "PROVIDER_KEY"}
		a.Template.Loop.Provider = "p"
		exit := loop.Run(context.Background(), a.Attempt)
		got := exit.LastMessage
		for _, want := range []string{"ALLOWED=yes", "PROVIDER_KEY=[redacted]", "HOME=", "PATH=", execloop.UsageFDEnv + "=3"} {
			if !strings.Contains(got, want) {
				t.Fatalf("environment %q lacks %q", got, want)
			}
		}
		if strings.Contains(got, "SECRET_TOKEN") || strings.Contains(got, "UNSET_NAME") {
			t.Fatalf("environment %q holds names the template did not allow", got)
		}
	})

	t.Run("secret values the agent prints reach no event, checkpoint or exit", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, `echo "{\"message\":\"key $PROVIDER_KEY\"}" >&3; echo "token $MY_TOKEN"; echo "oops $PROVIDER_KEY" >&2; exit 1`, workitems.Budget{})
		a.env["PROVIDER_KEY"], a.env["MY_TOKEN"] = "sk-provider-secret", "tok-very-secret"
		a.Template.Loop.Env = []string{"MY_TOKEN"}
		a.Config.Providers["p"] = config.ProviderConfig{Kind: "openai-responses", APIKeyEnv: "PROVIDER_KEY"}
		a.Template.Loop.Provider = "p"
		exit := loop.Run(context.Background(), a.Attempt)
		seen := exit.Message + exit.LastMessage + string(a.cp.State())
		for _, h := range a.cp.History() {
			seen += string(h)
		}
		for _, e := range a.ev.all() {
			seen += e.Message
			for _, v := range e.Data {
				seen += v
			}
		}
		if strings.Contains(seen, "sk-provider-secret") || strings.Contains(seen, "tok-very-secret") {
			t.Fatalf("a secret leaked: %s", seen)
		}
		if !strings.Contains(exit.LastMessage, "token [redacted]") {
			t.Fatalf("last message = %q, want the token redacted", exit.LastMessage)
		}
	})

	t.Run("the prompt on stdin is the goal plus the condition's input", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, "cat", workitems.Budget{})
		a.Condition.Input = "Last failure: TestAdd: got -1, want 5"
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || !strings.Contains(exit.LastMessage, "Make the tests in this module pass.") ||
			!strings.Contains(exit.LastMessage, "Last failure: TestAdd") {
			t.Fatalf("exit = %+v, want the prompt echoed", exit)
		}
	})

	t.Run("usage on the side channel is charged and a malformed line is only a warning", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, `echo '{"model_calls":1,"input_tokens":100,"cost_usd":0.5}' >&3; echo 'oops' >&3; echo done`, workitems.Budget{})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "done" {
			t.Fatalf("exit = %+v", exit)
		}
		if sp := a.Meter.Spent(); sp.ModelCalls != 1 || sp.InputTokens != 100 || sp.CostUSD != 0.5 {
			t.Fatalf("spent = %+v", sp)
		}
		var warned bool
		for _, e := range a.ev.all() {
			warned = warned || e.Type == workitems.EventWarning
		}
		if !warned {
			t.Fatal("the malformed usage line was not reported")
		}
	})

	t.Run("side-channel spend past the budget kills the command and exits budget_exhausted", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, loop := shell(t, `for i in 1 2 3 4 5; do echo '{"input_tokens":100}' >&3; done; exec sleep `+marker,
			workitems.Budget{InputTokens: 300})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetInputTokens {
			t.Fatalf("exit = %+v, want budget_exhausted input_tokens", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("pids %v survived", left)
		}
	})

	t.Run("the wall-time budget kills a command that runs past it", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, loop := shell(t, "sleep "+marker+" & wait", workitems.Budget{WallTime: workitems.Duration(time.Second)})
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetWallTime {
			t.Fatalf("exit = %+v, want budget_exhausted wall_time", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("pids %v survived", left)
		}
	})

	t.Run("a command that escapes into its own session is still killed", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, loop := shell(t, "setsid sleep "+marker+" & echo started > ready.fifo; wait", workitems.Budget{})
		ready := readFIFO(mkfifo(t, a.Workspace, "ready.fifo"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan workitems.Exit, 1)
		go func() { done <- loop.Run(ctx, a.Attempt) }()
		within(t, ready, "the command to start")
		if len(awaitByArg(t, marker)) == 0 {
			t.Fatal("the escaped sleep is not running")
		}
		cancel()
		if exit := within(t, done, "Run to return"); exit.Reason != workitems.ExitAborted {
			t.Fatalf("exit = %+v, want aborted", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("pids %v survived", left)
		}
	})

	t.Run("a background process left holding the output open is killed when the agent exits", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, loop := shell(t, "sleep "+marker+" & echo bye", workitems.Budget{})
		done := make(chan workitems.Exit, 1)
		go func() { done <- loop.Run(context.Background(), a.Attempt) }()
		exit := within(t, done, "Run to return")
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "bye" {
			t.Fatalf("exit = %+v", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("pids %v survived", left)
		}
	})

	for _, tc := range []struct {
		name   string
		script string
		want   workitems.Exit
	}{
		{"exit status 75 is transient_error", "echo 'try later' >&2; exit 75",
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}},
		{"another non-zero status fails with stderr", "echo 'error: broken' >&2; exit 3",
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, loop := shell(t, tc.script, workitems.Budget{})
			exit := loop.Run(context.Background(), a.Attempt)
			if exit.Reason != tc.want.Reason || exit.Class != tc.want.Class || exit.Message == "" {
				t.Fatalf("exit = %+v, want %s %s", exit, tc.want.Reason, tc.want.Class)
			}
		})
	}

	t.Run("a lost lease stops the agent and writes nothing more", func(t *testing.T) {
		t.Parallel()
		marker := sleepMarker(t)
		a, loop := shell(t, `echo '{"tool_calls":1}' >&3; exec sleep `+marker, workitems.Budget{})
		a.cp.LoseAt = 1 // fenced out: every save fails
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitAborted || exit.Class != workitems.ClassConflict {
			t.Fatalf("exit = %+v, want aborted conflict", exit)
		}
		if left := findByArg(marker); len(left) > 0 {
			t.Fatalf("pids %v survived", left)
		}
	})

	t.Run("an unknown agent fails with invalid_input", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, "true", workitems.Budget{})
		a.Template.Loop.Agent = "devin"
		if exit := loop.Run(context.Background(), a.Attempt); exit.Reason != workitems.ExitFailed || exit.Class != workitems.ClassInvalidInput {
			t.Fatalf("exit = %+v", exit)
		}
	})

	t.Run("a provider key that is not set fails with permission before starting", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, "true", workitems.Budget{})
		a.Config.Providers["p"] = config.ProviderConfig{Kind: "anthropic", APIKeyEnv: "MISSING_KEY"}
		a.Template.Loop.Provider = "p"
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitFailed || exit.Class != workitems.ClassPermission || !strings.Contains(exit.Message, "MISSING_KEY") {
			t.Fatalf("exit = %+v", exit)
		}
	})

	t.Run("a file that is not executable fails with permission naming it", func(t *testing.T) {
		t.Parallel()
		a, loop := shell(t, "", workitems.Budget{})
		a.Template.Loop.Command = "./calc.go"
		sampleRepo(t, a.Workspace)
		exit := loop.Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitFailed || exit.Class != workitems.ClassPermission || !strings.Contains(exit.Message, "calc.go") {
			t.Fatalf("exit = %+v", exit)
		}
	})
}
