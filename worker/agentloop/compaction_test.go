package agentloop

import (
	"slices"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
)

// TestCompactionNeverInstallsAnEmptySummary drives a compaction whose summary request answers
// without text or fails: history stays, the summary is asked for once more, and a second
// failure ends the turn with an error exit instead of continuing on nothing.
func TestCompactionNeverInstallsAnEmptySummary(t *testing.T) {
	t.Parallel()
	toolOnly := func() model.ScriptStep {
		return model.Reply(withUsage(model.CallResponse(model.Call("s1", "list_dir", `{"path":"."}`)), usage(10, 1)))
	}
	empty := func() model.ScriptStep { return model.Reply(withUsage(model.TextResponse(""), usage(10, 1))) }
	failed := func() model.ScriptStep {
		return model.Fail(&model.Error{Class: workitems.ClassInvalidInput, StatusCode: 400, Message: "bad"})
	}
	summary := model.Reply(withUsage(model.TextResponse("SUMMARY: a.txt says secret sauce"), usage(10, 1)))
	for _, tc := range []struct {
		name  string
		first model.ScriptStep
	}{
		{"a tool call instead of a summary is asked for again", toolOnly()},
		{"an empty summary is asked for again", empty()},
		{"a failed summary request is tried again", failed()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, overflowRead := newCompactionHarness(t)
			p := model.NewScripted("scripted",
				overflowRead,
				tc.first, summary,
				model.Reply(withUsage(model.TextResponse("finished"), usage(100, 5))))
			ex := h.run(t.Context(), p)
			reqs := p.Requests()
			if ex.Reason != workitems.ExitCompleted || len(reqs) != 4 {
				t.Fatalf("exit %+v after %d requests", ex, len(reqs))
			}
			if reqs[2].Instructions != compactInstructions {
				t.Fatal("request 3 is not the second summary request")
			}
			if out, ok := outputOf(reqs[2], "c1"); !ok || out != "secret sauce" {
				t.Fatalf("the retried summary request lost the history: %q", out)
			}
			if n := len(reqs[3].Input); n != 2 || reqs[3].Input[1].Text != summaryPrefix+"SUMMARY: a.txt says secret sauce" {
				t.Fatalf("request after compaction %+v, want goal + summary", reqs[3].Input)
			}
			if len(h.ev.of("compaction")) != 1 || len(h.ev.of("warning")) != 1 {
				t.Fatalf("events %v", h.ev.kinds())
			}
		})
	}
	t.Run("two summaries without text end the turn with an error and keep history", func(t *testing.T) {
		t.Parallel()
		h, overflowRead := newCompactionHarness(t)
		p := model.NewScripted("scripted",
			overflowRead,
			toolOnly(), empty(),
			model.Reply(model.TextResponse("must not be asked")))
		ex := h.run(t.Context(), p)
		if ex.Reason != workitems.ExitFailed || !strings.Contains(ex.Message, "compaction") || len(p.Requests()) != 3 {
			t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
		}
		st := h.cp.last()
		if st.Phase != ErrorClosing || st.ViewStart != st.GoalLen {
			t.Fatalf("last checkpoint phase %q view_start %d goal_len %d", st.Phase, st.ViewStart, st.GoalLen)
		}
		items := h.cp.items(t)
		if out, ok := outputOf(model.Request{Input: items}, "c1"); !ok || out != "secret sauce" {
			t.Fatal("history lost the tool output")
		}
		for _, it := range items {
			if strings.HasPrefix(it.Text, summaryPrefix) {
				t.Fatalf("an empty hand-off was installed: %q", it.Text)
			}
		}
		if len(h.ev.of("compaction")) != 0 || !slices.Equal(h.terminals(), []string{"turn_error"}) {
			t.Fatalf("events %v", h.ev.kinds())
		}
	})
	t.Run("two failed summary requests end the turn with the request's class", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.tmpl.Loop.ContextLimitTokens = compactionLimit
		p := model.NewScripted("scripted",
			model.Reply(withUsage(model.CallResponse(model.Call("c1", "list_dir", `{"path":"."}`)), usage(900, 50))),
			failed(), failed())
		ex := h.run(t.Context(), p)
		if ex.Reason != workitems.ExitFailed || ex.Class != workitems.ClassInvalidInput || len(p.Requests()) != 3 {
			t.Fatalf("exit %+v after %d requests", ex, len(p.Requests()))
		}
	})
}
