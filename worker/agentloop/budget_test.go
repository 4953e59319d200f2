package agentloop

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
)

// noticed reports whether request r tells the model to wrap up for kind k.
func noticed(r model.Request, k workitems.BudgetKind) bool {
	return slices.ContainsFunc(userTexts(r), func(u string) bool {
		return strings.Contains(u, "Budget notice") && strings.Contains(u, string(k))
	})
}

func TestBudgetEdges(t *testing.T) {
	t.Parallel()
	t.Run("the model sees the output of the last tool call the cap allows", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.budget.ToolCalls = 3
		p := model.NewScripted("scripted",
			model.Reply(model.CallResponse(model.Call("c1", "list_dir", `{"path":"."}`))),
			model.Reply(model.CallResponse(model.Call("c2", "list_dir", `{"path":"."}`))),
			model.Reply(model.CallResponse(model.Call("c3", "list_dir", `{"path":"."}`))),
			model.Reply(model.CallResponse(model.Call("c4", "list_dir", `{"path":"."}`))))
		ex := h.run(t.Context(), p)
		reqs := p.Requests()
		if len(reqs) != 4 {
			t.Fatalf("%d requests, want the third call's output shown in a fourth", len(reqs))
		}
		if _, ok := outputOf(reqs[3], "c3"); !ok {
			t.Fatal("the fourth request lacks the third call's output")
		}
		if !noticed(reqs[2], workitems.BudgetToolCalls) {
			t.Fatalf("no wrap-up notice before the last allowed tool call: %q", userTexts(reqs[2]))
		}
		if ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != workitems.BudgetToolCalls {
			t.Fatalf("exit %+v", ex)
		}
		if out, _ := outputOf(model.Request{Input: h.cp.items(t)}, "c4"); !strings.HasPrefix(out, "not run") {
			t.Fatalf("a call past the cap ran: %q", out)
		}
	})
	t.Run("the last response a model_calls cap allows has its tool call run", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.budget.ModelCalls = 3
		p := model.NewScripted("scripted",
			model.Reply(model.CallResponse(model.Call("c1", "list_dir", `{"path":"."}`))),
			model.Reply(model.CallResponse(model.Call("c2", "list_dir", `{"path":"."}`))),
			model.Reply(model.CallResponse(model.Call("c3", "write_file", `{"path":"out.txt","content":"paid for"}`))),
			model.Reply(model.TextResponse("must not be asked")))
		ex := h.run(t.Context(), p)
		reqs := p.Requests()
		if len(reqs) != 3 || ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != workitems.BudgetModelCalls {
			t.Fatalf("exit %+v after %d requests", ex, len(reqs))
		}
		if b, err := os.ReadFile(filepath.Join(h.dir, "out.txt")); err != nil || string(b) != "paid for" {
			t.Fatalf("the last response's tool call was refused: %q %v", b, err)
		}
		if !noticed(reqs[2], workitems.BudgetModelCalls) {
			t.Fatalf("no wrap-up notice on the last allowed request: %q", userTexts(reqs[2]))
		}
		if noticed(reqs[1], workitems.BudgetModelCalls) {
			t.Fatal("the notice came before the last allowed request")
		}
	})
	t.Run("an answer at a cap is never completed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.budget.ModelCalls = 2
		p := model.NewScripted("scripted",
			model.Reply(model.CallResponse(model.Call("c1", "list_dir", `{"path":"."}`))),
			model.Reply(model.TextResponse("done")))
		ex := h.run(t.Context(), p)
		if ex.Reason != workitems.ExitBudgetExhausted || ex.Budget != workitems.BudgetModelCalls || slices.Contains(h.ev.kinds(), "turn_completed") {
			t.Fatalf("exit %+v events %v", ex, h.ev.kinds())
		}
	})
}
