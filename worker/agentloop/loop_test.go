package agentloop

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
)

func TestScenario05CutStreamIsRetriedInProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	p := model.NewScripted("scripted",
		model.ScriptStep{Deltas: []string{"part"}, Err: &model.Error{Provider: "scripted", Class: workitems.ClassTransient, Err: model.ErrStreamCut, Message: "stream ended before response.completed"}},
		model.Reply(model.TextResponse("whole")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 2 || len(h.ev.of("stream_error")) != 1 {
		t.Fatalf("exit %+v after %d requests, events %v", ex, len(reqs), h.ev.kinds())
	}
	if len(reqs[0].Input) != len(reqs[1].Input) {
		t.Fatal("the retry was not rebuilt from the same history")
	}
}

func TestCallsAreRoutedOnlyToOfferedTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t) // no done check: run_done_check is not offered
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "run_done_check", `{}`), model.Call("c2", "rm_rf", `{}`))),
		model.Reply(model.TextResponse("ok")))
	h.run(t.Context(), p)
	reqs := p.Requests()
	for _, tool := range reqs[0].Tools {
		if tool.Name == "run_done_check" {
			t.Fatal("run_done_check offered without a done check")
		}
	}
	for _, id := range []string{"c1", "c2"} {
		if out, _ := outputOf(reqs[1], id); !strings.Contains(out, "unknown tool") {
			t.Fatalf("%s output %q", id, out)
		}
	}
	if st := h.cp.last(); len(st.Tools) != len(reqs[1].Tools) {
		t.Fatalf("request view records %d tools, the request offered %d", len(st.Tools), len(reqs[1].Tools))
	}
}

// The done-check stop hook: files changed since the last done check → run it first.
func TestBuiltinStopHookAsksForTheDoneCheck(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	checks := 0
	h.done = doneFunc(func(context.Context) (worker.DoneCheckResult, error) {
		checks++
		return worker.DoneCheckResult{Passed: true, Summary: "ok 3 tests"}, nil
	})
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "write_file", `{"path":"x.go","content":"package x\n"}`))),
		model.Reply(model.TextResponse("done")),
		model.Reply(model.CallResponse(model.Call("c2", "run_done_check", `{}`))),
		model.Reply(model.TextResponse("done, checked")))
	ex := h.run(t.Context(), p)
	reqs := p.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 4 || checks != 1 {
		t.Fatalf("exit %+v after %d requests and %d checks", ex, len(reqs), checks)
	}
	if !slices.Contains(userTexts(reqs[2]), builtinHookPrompt) {
		t.Fatal("the model was not asked to run the done check")
	}
	if out, _ := outputOf(reqs[3], "c2"); !strings.HasPrefix(out, "done check passed") {
		t.Fatalf("done check output %q", out)
	}
}

func TestWallTimeDeadlineStopsABlockedModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// The meter runs on the one injected clock: moving it past the hour ends the attempt's
	// context while the model still streams, with no real time passing.
	clock := fakeclock.New(h.clock.Now())
	a := h.attempt()
	a.Meter = worker.NewMeter(h.budget, workitems.Spend{}, clock)
	p := model.NewScripted("scripted", model.ScriptStep{Block: true})
	go func() {
		clock.BlockUntil(1, nil) // the deadline's timer is waiting
		clock.Advance(time.Hour)
	}()
	ex := h.loop(p).Run(t.Context(), a)
	if ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != workitems.BudgetWallTime {
		t.Fatalf("exit %+v", ex)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_error"}) {
		t.Fatalf("terminal events %v", got)
	}
}

func TestAFinalAnswerAtTheCapIsNotCompleted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budget.ModelCalls = 1
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("done in one")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != workitems.BudgetModelCalls || ex.LastMessage != "done in one" {
		t.Fatalf("exit %+v", ex)
	}
}
