package agentloop

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func transient(msg string) error {
	return &model.Error{Provider: "scripted", Class: workitems.ClassTransient, Message: msg}
}

func TestScenario01TextCompletesTheTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("all good")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "all good" {
		t.Fatalf("exit = %+v", ex)
	}
	if n := len(p.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_completed"}) {
		t.Fatalf("terminal events %v", got)
	}
	kinds := h.ev.kinds()
	if kinds[0] != "turn_started" || kinds[len(kinds)-1] != "turn_completed" {
		t.Fatalf("events %v", kinds)
	}
	if lm := h.ev.of("turn_completed")[0].Data["last_message"]; lm != "all good" {
		t.Fatalf("last_message %q", lm)
	}
	if st := h.cp.last(); st.Phase != Completed {
		t.Fatalf("last checkpoint phase %s", st.Phase)
	}
}

func TestScenario02ToolCallThenAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("hello\n"), 0o644)
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`))),
		model.Reply(model.TextResponse("read it")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	var sawCall bool
	for _, it := range reqs[1].Input {
		sawCall = sawCall || (it.Kind == model.KindFunctionCall && it.CallID == "c1")
	}
	if out, ok := outputOf(reqs[1], "c1"); !sawCall || !ok || out != "hello\n" {
		t.Fatalf("request 2 call=%v output=%q", sawCall, out)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_completed"}) {
		t.Fatalf("terminal events %v", got)
	}
}

func TestScenario03EndTurnFalseAsksAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := model.NewScripted("scripted", model.Reply(notEnd("thinking…")), model.Reply(model.TextResponse("done")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "done" || len(p.Requests()) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
	}
}

func TestScenario04ThreeToolCallsJoinedInOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(h.dir, "c.txt"), []byte("C"), 0o644)
	var pendingAtRequest2 int
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(
			model.Call("c1", "read_file", `{"path":"a.txt"}`),
			model.Call("c2", "shell", `{"command":"printf B"}`),
			model.Call("c3", "read_file", `{"path":"c.txt"}`))),
		model.Do(func(ctx context.Context, req model.Request) (*model.Response, error) {
			pendingAtRequest2 = len(h.cp.last().Pending)
			return model.TextResponse("ok"), nil
		}))
	h.run(t.Context(), p)
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var order []string
	for _, it := range reqs[1].Input {
		if it.Kind == model.KindFunctionCallOutput {
			order = append(order, it.CallID+"="+strings.SplitN(it.Output, "\n", 2)[0])
		}
	}
	if want := []string{"c1=A", "c2=B", "c3=C"}; !slices.Equal(order, want) {
		t.Fatalf("outputs %v, want %v", order, want)
	}
	if pendingAtRequest2 != 0 {
		t.Fatalf("%d calls were still pending when request 2 was sent", pendingAtRequest2)
	}
}

func TestScenario06TransientErrorsOutlastRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var steps []model.ScriptStep
	for range 6 {
		steps = append(steps, model.Fail(transient("upstream 503")))
	}
	p := model.NewScripted("scripted", steps...)
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitTransientError || ex.Class != workitems.ClassTransient {
		t.Fatalf("exit %+v", ex)
	}
	if n := len(p.Requests()); n != 6 {
		t.Fatalf("%d requests, want 1 + 5 retries", n)
	}
	var msgs []string
	for _, e := range h.ev.of("stream_error") {
		msgs = append(msgs, e.Message)
	}
	want := []string{"reconnecting 1/5", "reconnecting 2/5", "reconnecting 3/5", "reconnecting 4/5", "reconnecting 5/5"}
	if !slices.Equal(msgs, want) {
		t.Fatalf("stream errors %v", msgs)
	}
	wantSleeps := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond}
	if !slices.Equal(h.sleeps, wantSleeps) {
		t.Fatalf("backoff %v, want %v", h.sleeps, wantSleeps)
	}
	for i, r := range p.Requests()[1:] {
		if len(r.Input) != len(p.Requests()[0].Input) || r.Input[0].Text != p.Requests()[0].Input[0].Text {
			t.Fatalf("retry %d was not rebuilt from the same history", i+1)
		}
	}
	if items := h.cp.items(t); len(items) != 1 || items[0].Role != model.RoleUser {
		t.Fatalf("history %+v: want only the goal, nothing recorded twice", items)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_error"}) {
		t.Fatalf("terminal events %v", got)
	}
}

func TestScenario07ServerDelayWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := model.NewScripted("scripted",
		model.Fail(&model.Error{Provider: "scripted", Class: workitems.ClassTransient, StatusCode: 429,
			RetryAfter: 3 * time.Second, Message: "rate limited, try again in 3s"}),
		model.Reply(model.TextResponse("ok")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", ex)
	}
	if !slices.Equal(h.sleeps, []time.Duration{3 * time.Second}) {
		t.Fatalf("waited %v, want the server's 3s", h.sleeps)
	}
}

func TestScenario08NonRetryableErrorFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     *model.Error
		ctxFull bool
	}{
		{"an invalid request fails at once", &model.Error{Class: workitems.ClassInvalidInput, StatusCode: 400, Message: "bad"}, false},
		{"an exhausted quota fails at once", &model.Error{Class: workitems.ClassPermission, StatusCode: 429, QuotaExceeded: true}, false},
		{"a full context window fails and marks the context full", &model.Error{Class: workitems.ClassInvalidInput, StatusCode: 400, ContextWindowExceeded: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			p := model.NewScripted("scripted", model.Fail(tc.err))
			ex := h.run(t.Context(), p)
			if ex.Reason != workitems.ExitFailed || ex.Class != tc.err.Class || len(p.Requests()) != 1 {
				t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
			}
			errs := h.ev.of("turn_error")
			if len(errs) != 1 || errs[0].Data["class"] != string(tc.err.Class) {
				t.Fatalf("error events %+v", errs)
			}
			if got := h.cp.last().CtxFull; got != tc.ctxFull {
				t.Fatalf("context_full = %v", got)
			}
			if len(h.ev.of("stream_error")) != 0 {
				t.Fatal("a non-retryable error was retried")
			}
		})
	}
}

// recordingHook is an in-process stop hook that remembers it ran.
type recordingHook struct{ ran chan struct{} }

func (recordingHook) Name() string { return "recording" }
func (h recordingHook) Stop(context.Context, HookInput) (HookResult, error) {
	close(h.ran)
	return HookResult{}, nil
}

func TestScenario09CancelWhileAToolRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The shell writes to a FIFO once it runs; reading it proves the tool is running when
	// the cancel comes.
	if err := syscall.Mkfifo(filepath.Join(h.dir, "ready"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		if f, err := os.Open(filepath.Join(h.dir, "ready")); err == nil {
			io.ReadAll(f)
			f.Close()
		}
		cancel()
	}()
	hook := recordingHook{ran: make(chan struct{})}
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "shell", `{"command":"echo running > ready; sleep 60 && touch finished"}`))),
		model.Reply(model.TextResponse("never")))
	ex := h.run(ctx, p, WithStopHooks(hook))
	if ex.Reason != workitems.ExitAborted {
		t.Fatalf("exit %+v", ex)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "finished")); err == nil {
		t.Fatal("the tool was not stopped: its sleep ran to its end")
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_aborted"}) {
		t.Fatalf("terminal events %v", got)
	}
	items := h.cp.items(t)
	var outIdx, markerIdx = -1, -1
	for i, it := range items {
		if it.Kind == model.KindFunctionCallOutput && it.CallID == "c1" {
			outIdx = i
			if !strings.HasPrefix(it.Output, "aborted") {
				t.Fatalf("tool output %q", it.Output)
			}
		}
		if it.Text == interruptedMarker {
			markerIdx = i
		}
	}
	if outIdx < 0 || markerIdx < outIdx {
		t.Fatalf("output at %d, marker at %d in %+v", outIdx, markerIdx, items)
	}
	if len(p.Requests()) != 1 {
		t.Fatal("a request was sent after the cancel")
	}
	select {
	case <-hook.ran:
		t.Fatal("the stop hook ran")
	default:
	}
	if h.cp.last().Phase != Aborted {
		t.Fatalf("last phase %s", h.cp.last().Phase)
	}
}

func TestScenario10CancelInAnyPhaseAborts(t *testing.T) {
	t.Parallel()
	t.Run("cancel during sampling aborts", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx, cancel := context.WithCancel(t.Context())
		started := make(chan struct{})
		go func() { <-started; cancel() }()
		p := model.NewScripted("scripted", model.ScriptStep{Block: true, Started: started})
		checkAborted(t, h, h.run(ctx, p))
	})
	t.Run("cancel during compaction aborts", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.tmpl.Loop.ContextLimitTokens = 100
		os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("A"), 0o644)
		ctx, cancel := context.WithCancel(t.Context())
		started := make(chan struct{})
		go func() { <-started; cancel() }()
		p := model.NewScripted("scripted",
			model.Reply(withUsage(model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`)), usage(500, 10))),
			model.ScriptStep{Block: true, Started: started})
		checkAborted(t, h, h.run(ctx, p))
		if reqs := p.Requests(); reqs[1].Instructions != compactInstructions {
			t.Fatal("the blocked request was not the compaction")
		}
	})
	t.Run("cancel during preparing aborts", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		ctx, cancel := context.WithCancel(t.Context())
		h.steer.onDrain = cancel
		p := model.NewScripted("scripted", model.Reply(model.TextResponse("never")))
		checkAborted(t, h, h.run(ctx, p))
		if len(p.Requests()) != 0 {
			t.Fatal("a request was sent after the cancel")
		}
	})
}

func checkAborted(t *testing.T, h *harness, ex workitems.Exit) {
	t.Helper()
	if ex.Reason != workitems.ExitAborted {
		t.Fatalf("exit %+v", ex)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_aborted"}) {
		t.Fatalf("terminal events %v", got)
	}
	items := h.cp.items(t)
	if items[len(items)-1].Text != interruptedMarker {
		t.Fatalf("history does not end with the interruption marker: %+v", items[len(items)-1])
	}
}

// hookScript writes a command stop hook that logs its stdin and answers with the n-th of
// replies (a shell snippet each); it returns the command and the log path.
//
// The hook and its state live in the workspace: hooks run in the sandbox, which sees nothing
// else of the host.
func hookScript(t *testing.T, ws string, replies ...string) (string, string) {
	t.Helper()
	dir, err := os.MkdirTemp(ws, ".hook-")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("#!/bin/sh\nd=" + dir + "\ncat >> $d/log; echo >> $d/log\nn=$(cat $d/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > $d/count\ncase $n in\n")
	for i, r := range replies {
		b.WriteString(strings.Repeat(" ", 2) + string(rune('1'+i)) + ") " + r + " ;;\n")
	}
	b.WriteString("esac\n")
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, filepath.Join(dir, "log")
}

func TestScenario11StopHookBlocksTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cmd, log := hookScript(t, h.dir, `echo '{"decision":"block","reason":"p1"}'`, `echo '{"decision":"block","reason":"p2"}'`, `exit 0`)
	h.tmpl.Loop.StopHooks = []string{cmd}
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("a")), model.Reply(model.TextResponse("b")), model.Reply(model.TextResponse("c")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 3 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	if u := userTexts(reqs[1]); !slices.Contains(u, "p1") {
		t.Fatalf("request 2 user messages %q", u)
	}
	if u := userTexts(reqs[2]); !slices.Contains(u, "p1") || !slices.Contains(u, "p2") {
		t.Fatalf("request 3 user messages %q", u)
	}
	b, _ := os.ReadFile(log)
	var active []string
	for _, l := range strings.Fields(string(b)) {
		switch {
		case strings.Contains(l, `"stop_hook_active":false`):
			active = append(active, "false")
		case strings.Contains(l, `"stop_hook_active":true`):
			active = append(active, "true")
		}
	}
	if !slices.Equal(active, []string{"false", "true", "true"}) {
		t.Fatalf("hook saw stop_hook_active %v (log %s)", active, b)
	}
}

func TestScenario12EmptyBlockIsIgnored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, reply string }{
		{"a JSON block without a reason is ignored", `echo '{"decision":"block","reason":""}'`},
		{"exit code 2 with an empty stderr is ignored", `exit 2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			cmd, _ := hookScript(t, h.dir, tc.reply)
			h.tmpl.Loop.StopHooks = []string{cmd}
			p := model.NewScripted("scripted", model.Reply(model.TextResponse("a")))
			ex := h.run(t.Context(), p)
			if ex.Reason != workitems.ExitCompleted || len(p.Requests()) != 1 {
				t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
			}
			if len(h.ev.of("warning")) != 1 {
				t.Fatalf("events %v, want one warning", h.ev.kinds())
			}
		})
	}
}

func TestScenario13TwoHooksBlockAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a, _ := hookScript(t, h.dir, `echo pA >&2; exit 2`, `exit 0`)
	b, _ := hookScript(t, h.dir, `echo '{"decision":"block","reason":"pB"}'`, `exit 0`)
	h.tmpl.Loop.StopHooks = []string{a, b}
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("x")), model.Reply(model.TextResponse("y")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	u := userTexts(reqs[1])
	if got := u[len(u)-1]; got != "pA\n\npB" {
		t.Fatalf("continuation %q, want both prompts in hook order in one message", got)
	}
}

func TestScenario14CompactionWhenFollowUpIsNeeded(t *testing.T) {
	t.Parallel()
	h, overflowRead := newCompactionHarness(t)
	p := model.NewScripted("scripted",
		overflowRead,
		model.Reply(withUsage(model.TextResponse("SUMMARY: read a.txt, it says secret sauce"), usage(950, 20))),
		model.Reply(withUsage(model.TextResponse("finished"), usage(100, 5))))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 3 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	if reqs[1].Instructions != compactInstructions {
		t.Fatal("request 2 is not the compaction")
	}
	if out, ok := outputOf(reqs[1], "c1"); !ok || out != "secret sauce" {
		t.Fatalf("compaction input lacks the tool output: %q", out)
	}
	if n := len(reqs[2].Input); n != 2 || !strings.HasPrefix(reqs[2].Input[1].Text, summaryPrefix+"SUMMARY") {
		t.Fatalf("request after compaction %+v, want goal + summary", reqs[2].Input)
	}
	if len(h.ev.of("compaction")) != 1 || !slices.Equal(h.terminals(), []string{"turn_completed"}) {
		t.Fatalf("events %v", h.ev.kinds())
	}
}

func TestScenario15NoCompactionAfterAFinalAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.tmpl.Loop.ContextLimitTokens = compactionLimit
	p := model.NewScripted("scripted", model.Reply(withUsage(model.TextResponse("done"), usage(5000, 50))))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted || len(p.Requests()) != 1 || len(h.ev.of("compaction")) != 0 {
		t.Fatalf("exit %+v, %d requests, events %v", ex, len(p.Requests()), h.ev.kinds())
	}
}

func TestScenario16SteerArrivesWhileStreaming(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := model.NewScripted("scripted",
		model.Do(func(context.Context, model.Request) (*model.Response, error) {
			h.steer.Push("also update the changelog")
			return model.TextResponse("done"), nil
		}),
		model.Reply(model.TextResponse("changelog updated")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	if slices.Contains(userTexts(reqs[0]), "also update the changelog") {
		t.Fatal("steer was injected into the open request")
	}
	if !slices.Contains(userTexts(reqs[1]), "also update the changelog") {
		t.Fatalf("request 2 lacks the steer: %q", userTexts(reqs[1]))
	}
}

func TestScenario17SteerAndCompaction(t *testing.T) {
	t.Parallel()
	const steer = "prefer the smaller fix"
	t.Run("the model's own chain continues first and the steer comes in the request after", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.tmpl.Loop.ContextLimitTokens = compactionLimit
		os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("A"), 0o644)
		p := model.NewScripted("scripted",
			model.Do(func(context.Context, model.Request) (*model.Response, error) {
				h.steer.Push(steer)
				return withUsage(model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`)), usage(900, 10)), nil
			}),
			model.Reply(withUsage(model.TextResponse("summary"), usage(100, 10))),
			model.Reply(withUsage(notEnd("continuing"), usage(100, 10))),
			model.Reply(withUsage(model.TextResponse("done"), usage(100, 10))))
		ex := h.run(t.Context(), p)
		reqs := p.Requests()
		if ex.Reason != workitems.ExitCompleted || len(reqs) != 4 {
			t.Fatalf("exit %+v after %d requests", ex, len(reqs))
		}
		if reqs[1].Instructions != compactInstructions || slices.Contains(userTexts(reqs[1]), steer) {
			t.Fatal("request 2 is not a compaction without the steer")
		}
		if slices.Contains(userTexts(reqs[2]), steer) {
			t.Fatal("the first request after compaction carries the steer")
		}
		if !slices.Contains(userTexts(reqs[3]), steer) {
			t.Fatal("the second request after compaction lacks the steer")
		}
	})
	t.Run("when only the steer needs follow-up no empty continuation is sent", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.tmpl.Loop.ContextLimitTokens = compactionLimit
		p := model.NewScripted("scripted",
			model.Do(func(context.Context, model.Request) (*model.Response, error) {
				h.steer.Push(steer)
				return withUsage(model.TextResponse("done"), usage(900, 10)), nil
			}),
			model.Reply(withUsage(model.TextResponse("summary"), usage(100, 10))),
			model.Reply(withUsage(model.TextResponse("done, smaller"), usage(100, 10))))
		ex := h.run(t.Context(), p)
		reqs := p.Requests()
		if ex.Reason != workitems.ExitCompleted || len(reqs) != 3 {
			t.Fatalf("exit %+v after %d requests", ex, len(reqs))
		}
		if reqs[1].Instructions != compactInstructions || !slices.Contains(userTexts(reqs[2]), steer) {
			t.Fatalf("request 3 %q lacks the steer", userTexts(reqs[2]))
		}
	})
}

// endless is a provider whose every response calls list_dir with usage u.
func endless(n int, u model.Usage, each func()) *model.Scripted {
	var steps []model.ScriptStep
	for i := range n {
		steps = append(steps, model.Do(func(context.Context, model.Request) (*model.Response, error) {
			if each != nil {
				each()
			}
			return withUsage(model.CallResponse(model.Call("c"+string(rune('a'+i%26))+strings.Repeat("x", i/26), "list_dir", `{"path":"."}`)), u), nil
		}))
	}
	return model.NewScripted("scripted", steps...)
}

func TestScenario18BudgetCaps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   workitems.BudgetKind
		budget workitems.Budget
		usage  model.Usage
		prices config.Prices
		tick   time.Duration
	}{
		{kind: workitems.BudgetModelCalls, budget: workitems.Budget{ModelCalls: 5}},
		{kind: workitems.BudgetToolCalls, budget: workitems.Budget{ToolCalls: 5}},
		{kind: workitems.BudgetInputTokens, budget: workitems.Budget{InputTokens: 1000}, usage: usage(200, 1)},
		{kind: workitems.BudgetOutputTokens, budget: workitems.Budget{OutputTokens: 1000}, usage: usage(1, 200)},
		{kind: workitems.BudgetCostUSD, budget: workitems.Budget{CostUSD: 1}, usage: usage(200, 0), prices: config.Prices{InputPerMTok: 1000}},
		{kind: workitems.BudgetWallTime, budget: workitems.Budget{}, tick: 10 * time.Second},
		{kind: workitems.BudgetSteps, budget: workitems.Budget{Steps: 30}},
	} {
		t.Run("a "+string(tc.kind)+" cap ends the attempt budget_exhausted", func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.budget = tc.budget
			h.budget.WallTime = workitems.Duration(50 * time.Second)
			if tc.kind != workitems.BudgetWallTime {
				h.budget.WallTime = workitems.Duration(time.Hour)
			}
			h.prices = tc.prices
			p := endless(40, tc.usage, func() { h.clock.Advance(tc.tick) })
			ex := h.run(t.Context(), p)
			if ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != tc.kind {
				t.Fatalf("exit %+v", ex)
			}
			if st := h.cp.last(); st.Phase != ErrorClosing || st.Exit == nil || st.Exit.Budget != tc.kind {
				t.Fatalf("last checkpoint %+v", st)
			}
			if slices.Contains(h.ev.kinds(), "turn_completed") {
				t.Fatal("a capped attempt completed")
			}
			var told bool
			for _, r := range p.Requests() {
				for _, u := range userTexts(r) {
					told = told || strings.Contains(u, "Budget notice") && strings.Contains(u, string(tc.kind))
				}
			}
			if !told {
				t.Fatal("the model was never told to wrap up")
			}
			for _, it := range h.cp.items(t) {
				if it.Kind == model.KindFunctionCall {
					if _, ok := outputOf(model.Request{Input: h.cp.items(t)}, it.CallID); !ok {
						t.Fatalf("call %s has no output", it.CallID)
					}
				}
			}
		})
	}
}

func TestScenario19SameFailureMeansNoProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var steps []model.ScriptStep
	for range 10 {
		steps = append(steps, model.Reply(model.CallResponse(model.Call("c", "read_file", `{"path":"missing.txt"}`))))
	}
	p := model.NewScripted("scripted", steps...)
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitNoProgress || len(p.Requests()) != 3 {
		t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
	}
}

func TestScenario20ResumeAfterACrash(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("A"), 0o644)
	// The process "dies" right after the checkpoint that says c2 started: nothing later is kept.
	h.cp.crashAfter = func(st state) bool {
		return len(st.Pending) > 0 && st.Pending[0].CallID == "c2" && st.Pending[0].Started
	}
	p1 := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`))),
		model.Reply(model.CallResponse(model.Call("c2", "shell", `{"command":"echo run >> counter"}`))))
	h.run(t.Context(), p1)
	crashed := h.cp.clone()
	k := h.cp.last().Step
	itemsAtCrash := h.cp.items(t)

	h2 := newHarness(t)
	h2.dir, h2.cp, h2.resume = h.dir, crashed, true
	p2 := model.NewScripted("scripted", model.Reply(model.TextResponse("checked the counter")))
	ex := h2.run(t.Context(), p2)
	if ex.Reason != workitems.ExitCompleted {
		t.Fatalf("resumed exit %+v", ex)
	}
	if first := crashed.saves[0].Step; first != k+1 {
		t.Fatalf("resumed at step %d, want %d", first, k+1)
	}
	if got := h2.cp.items(t)[:len(itemsAtCrash)]; !slices.EqualFunc(got, itemsAtCrash, itemEqual) {
		t.Fatal("the resumed history differs from the checkpoint")
	}
	if out, ok := outputOf(p2.Requests()[0], "c2"); !ok || out != outputInterrupted {
		t.Fatalf("c2 output %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "counter")); string(b) != "run\n" {
		t.Fatalf("the interrupted call ran %q times", b)
	}
	if h2.ev.of("turn_started")[0].Data["resumed"] != "true" {
		t.Fatal("turn_started does not say resumed")
	}
}

func itemEqual(a, b model.Item) bool {
	return a.Kind == b.Kind && a.Role == b.Role && a.Text == b.Text && a.CallID == b.CallID &&
		a.Name == b.Name && a.Arguments == b.Arguments && a.Output == b.Output
}

func TestScenario21NewerLeaseStopsTheOldWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.cp.loseAfter = 2 // entering Sampling and JoiningTools are kept; the tool ledger is rejected
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "shell", `{"command":"echo x > ran"}`))),
		model.Reply(model.TextResponse("done")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitAborted || ex.Class != workitems.ClassConflict {
		t.Fatalf("exit %+v", ex)
	}
	if h.cp.rejected != 1 || len(h.cp.saves) != 2 {
		t.Fatalf("%d saves kept, %d rejected; want 2 and exactly 1", len(h.cp.saves), h.cp.rejected)
	}
	if len(h.terminals()) != 0 {
		t.Fatalf("events after the lease was lost: %v", h.ev.kinds())
	}
	if len(p.Requests()) > 1 {
		t.Fatal("the old worker kept sampling")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ran")); err == nil {
		t.Fatal("the old worker ran a tool after its ledger write was rejected")
	}
}

func TestScenario22PathsOutsideTheWorkspace(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o644)
	os.Symlink(outside, filepath.Join(h.dir, "link"))
	calls := []model.Item{
		model.Call("c1", "read_file", `{"path":"../secret"}`),
		model.Call("c2", "read_file", `{"path":"`+filepath.Join(outside, "secret")+`"}`),
		model.Call("c3", "read_file", `{"path":"link/secret"}`),
		model.Call("c4", "write_file", `{"path":"link/new","content":"x"}`),
		model.Call("c5", "write_file", `{"path":"../new","content":"x"}`),
	}
	p := model.NewScripted("scripted", model.Reply(model.CallResponse(calls...)), model.Reply(model.TextResponse("ok")))
	h.run(t.Context(), p)
	req := p.Requests()[1]
	for _, c := range calls {
		out, _ := outputOf(req, c.CallID)
		if !strings.Contains(out, "escapes the workspace") || strings.Contains(out, "s3cret") {
			t.Errorf("%s %s: %q", c.Name, c.Arguments, out)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("something was written outside: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(h.dir), "new")); err == nil {
		t.Fatal("../new was written")
	}
}

func TestScenario23FiftyToolCallsKeepGoing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := endless(50, model.Usage{}, nil)
	p.Add(model.Reply(model.TextResponse("done after 50")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted || len(p.Requests()) != 51 {
		t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
	}
}
