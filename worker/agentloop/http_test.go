package agentloop

import (
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
)

// The (HTTP) scenarios run the real Responses client against a local server streaming SSE.

func TestHTTPScenario01TextCompletes(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Text("all good"))
	h := newHarness(t)
	ex := h.run(t.Context(), srv.Provider(t))
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "all good" || len(srv.Requests()) != 1 {
		t.Fatalf("exit %+v after %d requests", ex, len(srv.Requests()))
	}
	kinds := h.ev.kinds()
	if kinds[0] != "turn_started" || !slices.Equal(h.terminals(), []string{"turn_completed"}) {
		t.Fatalf("events %v", kinds)
	}
	if h.ev.of("turn_completed")[0].Data["last_message"] != "all good" {
		t.Fatal("turn_completed lacks the last message")
	}
}

func TestHTTPScenario02ToolCallThenAnswer(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.ToolCalls(model.Call("c1", "list_dir", `{"path":"."}`)), modeltest.Text("listed"))
	h := newHarness(t)
	ex := h.run(t.Context(), srv.Provider(t))
	reqs := srv.Requests()
	if ex.Reason != workitems.ExitCompleted || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	var call, out bool
	for _, it := range reqs[1].Input {
		call = call || (it.Type == "function_call" && it.CallID == "c1" && it.Name == "list_dir")
		out = out || (it.Type == "function_call_output" && it.CallID == "c1")
	}
	if !call || !out {
		t.Fatalf("request 2 input %+v lacks c1 or its output", reqs[1].Input)
	}
	if !slices.Contains(reqs[0].Tools, "apply_patch") || !slices.Equal(reqs[0].Tools, reqs[1].Tools) {
		t.Fatalf("tools offered %v / %v", reqs[0].Tools, reqs[1].Tools)
	}
	if got := h.terminals(); !slices.Equal(got, []string{"turn_completed"}) {
		t.Fatalf("terminal events %v", got)
	}
}

func TestHTTPScenario05CutStreamIsRetried(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Cut("partial"), modeltest.Text("whole answer"))
	h := newHarness(t)
	ex := h.run(t.Context(), srv.Provider(t))
	reqs := srv.Requests()
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "whole answer" || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(reqs))
	}
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Fatalf("the retry was not rebuilt from the same history:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	if n := len(h.ev.of("stream_error")); n != 1 {
		t.Fatalf("%d stream_error events", n)
	}
	for _, it := range h.cp.items(t) {
		if it.Text == "partial" {
			t.Fatal("the cut stream's partial text was recorded")
		}
	}
}

func TestHTTPScenario07RetryAfterHeaderWins(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.RateLimited("3"), modeltest.Text("ok"))
	h := newHarness(t)
	ex := h.run(t.Context(), srv.Provider(t))
	if ex.Reason != workitems.ExitCompleted || !slices.Equal(h.sleeps, []time.Duration{3 * time.Second}) {
		t.Fatalf("exit %+v, waited %v", ex, h.sleeps)
	}
}

func TestHTTPScenario08NonRetryableErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reply   modeltest.Reply
		class   workitems.ErrorClass
		ctxFull bool
	}{
		{"an invalid request fails with invalid_input", modeltest.InvalidRequest("bad tool schema"), workitems.ClassInvalidInput, false},
		{"an exhausted quota fails with permission", modeltest.QuotaExceeded(), workitems.ClassPermission, false},
		{"a full context window fails and marks the context full", modeltest.ContextWindowExceeded(), workitems.ClassInvalidInput, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewResponsesServer(t)
			srv.Enqueue(tc.reply)
			h := newHarness(t)
			ex := h.run(t.Context(), srv.Provider(t))
			if ex.Reason != workitems.ExitFailed || ex.Class != tc.class || len(srv.Requests()) != 1 {
				t.Fatalf("exit %+v after %d requests", ex, len(srv.Requests()))
			}
			errs := h.ev.of("turn_error")
			if len(errs) != 1 || errs[0].Data["class"] != string(tc.class) || len(h.terminals()) != 1 {
				t.Fatalf("events %v", h.ev.kinds())
			}
			if h.cp.last().CtxFull != tc.ctxFull || (errs[0].Data["context_full"] == "true") != tc.ctxFull {
				t.Fatalf("context_full = %v", h.cp.last().CtxFull)
			}
			for _, e := range h.ev.events {
				for _, v := range e.Data {
					if strings.Contains(v, modeltest.Key) {
						t.Fatal("the API key leaked into an event")
					}
				}
			}
		})
	}
}

func TestHTTPScenarioOutOfOutputTokensAsksAgain(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	first := modeltest.Text("Half of the plan")
	first.Incomplete = "max_output_tokens"
	srv.Enqueue(first, modeltest.Text("the rest"))
	h := newHarness(t)
	ex := h.run(t.Context(), srv.Provider(t))
	reqs := srv.Requests()
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "the rest" || len(reqs) != 2 {
		t.Fatalf("exit %+v after %d requests; a response out of output tokens must be followed up", ex, len(reqs))
	}
	var carried bool
	for _, it := range reqs[1].Input {
		carried = carried || (it.Role == "assistant" && it.Content == "Half of the plan")
	}
	if !carried {
		t.Fatalf("request 2 input %+v lacks the first half", reqs[1].Input)
	}
	if reqs[0].PromptCacheKey == "" || reqs[0].PromptCacheKey != reqs[1].PromptCacheKey {
		t.Fatalf("prompt_cache_key %q then %q, want one key for the attempt", reqs[0].PromptCacheKey, reqs[1].PromptCacheKey)
	}
}
