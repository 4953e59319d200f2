package execloop

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// feed runs every line of text through p and returns the steps.
func feed(t *testing.T, p parser, text string) []step {
	t.Helper()
	var steps []step
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if s, ok := p.Line(sc.Bytes()); ok {
			steps = append(steps, s)
		}
	}
	return steps
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func kinds(steps []step) string {
	var ks []string
	for _, s := range steps {
		ks = append(ks, string(s.Kind))
	}
	return strings.Join(ks, " ")
}

func total(steps []step) workitems.Spend {
	var sp workitems.Spend
	for _, s := range steps {
		sp = sp.Add(s.Spend)
	}
	return sp
}

func TestCodexParser(t *testing.T) {
	t.Parallel()

	t.Run("a recorded run parses into steps, usage priced by the table, and a completed exit", func(t *testing.T) {
		t.Parallel()
		p := &codexParser{prices: config.Prices{InputPerMTok: 1, CachedInputPerMTok: 0.1, OutputPerMTok: 4}}
		steps := feed(t, p, recorded(t, "codex-exec.jsonl"))
		if got, want := kinds(steps), "thread_started item_error turn_started command command agent_message turn_completed"; got != want {
			t.Fatalf("kinds = %q, want %q", got, want)
		}
		if steps[0].Session == "" {
			t.Fatal("thread.started gave no session id")
		}
		sp := total(steps)
		if sp.InputTokens != 150 || sp.CachedInputTokens != 10 || sp.OutputTokens != 25 || sp.ToolCalls != 1 || sp.ModelCalls != 1 {
			t.Fatalf("spend = %+v", sp)
		}
		if want := (140*1 + 10*0.1 + 25*4) / 1e6; sp.CostUSD < want*0.999 || sp.CostUSD > want*1.001 {
			t.Fatalf("cost = %v, want %v", sp.CostUSD, want)
		}
		// Codex may exit non-zero after a completed turn: the final event decides.
		if e := p.Exit(1, "some shutdown noise"); e.Reason != workitems.ExitCompleted || e.LastMessage != "Hello from probe" {
			t.Fatalf("exit = %+v, want completed with the last agent message", e)
		}
	})

	for _, tc := range []struct {
		name   string
		lines  string
		code   int
		stderr string
		want   workitems.Exit
		kinds  string
	}{
		{"a malformed line is a warning and not fatal",
			"not json\n{\"type\":\"turn.completed\",\"usage\":{}}", 0, "",
			workitems.Exit{Reason: workitems.ExitCompleted}, "malformed turn_completed"},
		{"an unknown event type is kept as a step",
			"{\"type\":\"session.configured\",\"x\":1}\n{\"type\":\"turn.completed\"}", 0, "",
			workitems.Exit{Reason: workitems.ExitCompleted}, "unknown turn_completed"},
		{"a failed turn with a rate limit is transient",
			`{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`, 1, "",
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}, "turn_failed"},
		{"a stream that ends on an error event exits from that error",
			`{"type":"error","message":"stream disconnected before completion"}`, 1, "",
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}, "error"},
		{"a run with no final event fails with the exit status",
			`{"type":"thread.started","thread_id":"t1"}`, 2, "error: unexpected argument '--bogus'\nUsage: codex",
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown}, "thread_started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &codexParser{}
			steps := feed(t, p, tc.lines)
			if got := kinds(steps); got != tc.kinds {
				t.Fatalf("kinds = %q, want %q", got, tc.kinds)
			}
			e := p.Exit(tc.code, tc.stderr)
			if e.Reason != tc.want.Reason || e.Class != tc.want.Class {
				t.Fatalf("exit = %+v, want %s %s", e, tc.want.Reason, tc.want.Class)
			}
			if steps[0].Kind == "malformed" && !steps[0].Warning {
				t.Fatal("a malformed line must be a warning")
			}
		})
	}
}

func TestClaudeParser(t *testing.T) {
	t.Parallel()

	t.Run("a recorded run parses into steps and the result's totals replace the estimates", func(t *testing.T) {
		t.Parallel()
		p := &claudeParser{prices: config.Prices{InputPerMTok: 3, OutputPerMTok: 15}}
		steps := feed(t, p, recorded(t, "claude-stream.jsonl"))
		if got, want := kinds(steps), "init tool_use tool_result agent_message result"; got != want {
			t.Fatalf("kinds = %q, want %q", got, want)
		}
		sp := total(steps)
		if sp.InputTokens != 200 || sp.OutputTokens != 40 || sp.CostUSD != 0.0016 || sp.ModelCalls != 2 || sp.ToolCalls != 1 {
			t.Fatalf("spend = %+v, want the result's totals", sp)
		}
		if e := p.Exit(0, ""); e.Reason != workitems.ExitCompleted || e.LastMessage != "Done from probe" {
			t.Fatalf("exit = %+v", e)
		}
	})

	t.Run("one message split over several lines is charged once", func(t *testing.T) {
		t.Parallel()
		p := &claudeParser{}
		line := `{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":100,"output_tokens":5}}}`
		sp := total(feed(t, p, line+"\n"+line))
		if sp.InputTokens != 100 || sp.ModelCalls != 1 {
			t.Fatalf("spend = %+v, want one message of 100 input tokens", sp)
		}
	})

	result := func(fields string) string { return `{"type":"result",` + fields + `}` }
	for _, tc := range []struct {
		name  string
		lines string
		code  int
		want  workitems.Exit
	}{
		{"an is_error result exits by its API status even when claude exits 0",
			result(`"subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429"`), 0,
			workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient}},
		{"an is_error result without a status exits by its text",
			result(`"subtype":"success","is_error":true,"result":"Invalid API key"`), 1,
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission}},
		{"the turn cap exits budget_exhausted model_calls",
			result(`"subtype":"error_max_turns","is_error":true,"num_turns":3`), 1,
			workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetModelCalls}},
		{"the cost cap exits budget_exhausted cost_usd",
			result(`"subtype":"error_max_budget_usd","is_error":true,"total_cost_usd":0.5`), 1,
			workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetCostUSD}},
		{"permission denials exit needs_approval",
			result(`"subtype":"success","is_error":false,"result":"I could not edit","permission_denials":[{"tool_name":"Edit","tool_input":{}}]`), 0,
			workitems.Exit{Reason: workitems.ExitNeedsApproval}},
		{"a denied question to the user exits needs_input",
			result(`"subtype":"success","permission_denials":[{"tool_name":"AskUserQuestion","tool_input":{"question":"which file?"}}]`), 0,
			workitems.Exit{Reason: workitems.ExitNeedsInput}},
		{"an error during execution fails",
			result(`"subtype":"error_during_execution","is_error":true,"errors":["tool crashed"]`), 1,
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown}},
		{"an unknown result subtype fails",
			result(`"subtype":"error_new_kind","is_error":true`), 0,
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown}},
		{"a stream without a result fails even on exit 0",
			`{"type":"system","subtype":"init","session_id":"s1"}` + "\nnot json\n" + `{"type":"stream_event","event":{}}`, 0,
			workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &claudeParser{}
			feed(t, p, tc.lines)
			e := p.Exit(tc.code, "")
			if e.Reason != tc.want.Reason || e.Class != tc.want.Class || e.Budget != tc.want.Budget {
				t.Fatalf("exit = %+v, want %+v", e, tc.want)
			}
		})
	}
}

func TestAiderParser(t *testing.T) {
	t.Parallel()

	t.Run("recorded output charges the session cost and tokens and exits completed", func(t *testing.T) {
		t.Parallel()
		p := &aiderParser{}
		steps := feed(t, p, recorded(t, "aider-output.txt"))
		if got, want := kinds(steps), "usage file_change commit usage"; got != want {
			t.Fatalf("kinds = %q, want %q", got, want)
		}
		sp := total(steps)
		if sp.CostUSD < 0.01929 || sp.CostUSD > 0.01931 || sp.ModelCalls != 2 {
			t.Fatalf("spend = %+v, want the session's $0.0193 over 2 calls", sp)
		}
		if sp.InputTokens != 2300+4200+1100+2000 || sp.CachedInputTokens != 2000 || sp.OutputTokens != 156+173 {
			t.Fatalf("tokens = %+v", sp)
		}
		e := p.Exit(0, "")
		if e.Reason != workitems.ExitCompleted || !strings.HasSuffix(e.LastMessage, "The tests should pass now.") {
			t.Fatalf("exit = %+v", e)
		}
	})

	t.Run("a provider error with no edits exits from the error, not from exit code 0", func(t *testing.T) {
		t.Parallel()
		p := &aiderParser{}
		feed(t, p, "Aider v0.86.1\nlitellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached\n")
		if e := p.Exit(0, ""); e.Reason != workitems.ExitTransientError {
			t.Fatalf("exit = %+v, want transient_error", e)
		}
	})

	t.Run("a non-zero exit without an error line fails with stderr", func(t *testing.T) {
		t.Parallel()
		p := &aiderParser{}
		feed(t, p, "Aider v0.86.1\n")
		if e := p.Exit(2, "aider: error: unrecognized arguments: --bogus"); e.Reason != workitems.ExitFailed || !strings.Contains(e.Message, "--bogus") {
			t.Fatalf("exit = %+v", e)
		}
	})
}

func TestCommandUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		line    string
		warning bool
		spend   workitems.Spend
	}{
		{"a usage line is charged as given", `{"model_calls":1,"input_tokens":100,"output_tokens":7,"cost_usd":0.25}`, false,
			workitems.Spend{ModelCalls: 1, InputTokens: 100, OutputTokens: 7, CostUSD: 0.25}},
		{"a line that is not JSON is a warning", `tokens=5`, true, workitems.Spend{}},
		{"an unknown field is a warning", `{"tokens":5}`, true, workitems.Spend{}},
		{"negative usage is a warning", `{"cost_usd":-1}`, true, workitems.Spend{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := (&commandParser{}).usage([]byte(tc.line))
			if s.Warning != tc.warning || s.Spend != tc.spend {
				t.Fatalf("step = %+v", s)
			}
		})
	}
}

func TestHasFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		flags []string
		want  bool
	}{
		{[]string{"--model", "x"}, []string{"--model"}, true},
		{[]string{"--model=x"}, []string{"--model"}, true},
		{[]string{"-c", `sandbox_mode="read-only"`}, []string{"sandbox_mode"}, true},
		{[]string{"--models"}, []string{"--model"}, false},
	} {
		if got := hasFlag(tc.args, tc.flags...); got != tc.want {
			t.Errorf("hasFlag(%q, %q) = %v, want %v", tc.args, tc.flags, got, tc.want)
		}
	}
}
