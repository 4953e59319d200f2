package agentloop

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
)

// statelessModel answers from the request alone, so a resumed run gets the same replies.
func statelessModel(_ context.Context, req model.Request) (*model.Response, error) {
	outs, almost := 0, false
	for _, it := range req.Input {
		if it.Kind == model.KindFunctionCallOutput {
			outs++
		}
		almost = almost || it.Text == "almost"
	}
	switch outs {
	case 0:
		return model.CallResponse(model.Call("c1", "read_file", `{"path":"a.txt"}`)), nil
	case 1:
		return model.CallResponse(model.Call("c2", "write_file", `{"path":"b.txt","content":"B"}`)), nil
	case 2:
		return model.CallResponse(model.Call("c3", "read_file", `{"path":"b.txt"}`), model.Call("c4", "list_dir", `{"path":"."}`)), nil
	}
	if !almost {
		return notEnd("almost"), nil
	}
	return model.TextResponse("done after " + strconv.Itoa(outs) + " outputs"), nil
}

func statelessProvider() *model.Scripted {
	var steps []model.ScriptStep
	for range 20 {
		steps = append(steps, model.Do(statelessModel))
	}
	return model.NewScripted("scripted", steps...)
}

func TestResumeFromEveryCheckpoint(t *testing.T) {
	t.Parallel()
	ref := newHarness(t)
	os.WriteFile(filepath.Join(ref.dir, "a.txt"), []byte("A"), 0o644)
	if ex := ref.run(t.Context(), statelessProvider()); ex.Reason != workitems.ExitCompleted {
		t.Fatalf("reference run %+v", ex)
	}
	want := ref.cp.items(t)
	saves := len(ref.cp.saves)
	for k := 1; k < saves; k++ {
		t.Run("a worker that dies after checkpoint "+strconv.Itoa(k)+" is resumed to the same end", func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			os.WriteFile(filepath.Join(h.dir, "a.txt"), []byte("A"), 0o644)
			n := 0
			h.cp.crashAfter = func(state) bool { n++; return n == k }
			h.run(t.Context(), statelessProvider())
			crashed := h.cp.clone()
			atCrash := h.cp.items(t)
			h2 := newHarness(t)
			h2.dir, h2.cp, h2.resume = h.dir, crashed, true
			ex := h2.run(t.Context(), statelessProvider())
			if ex.Reason != workitems.ExitCompleted {
				t.Fatalf("resumed exit %+v", ex)
			}
			if crashed.saves[0].Step != int64(k+1) {
				t.Fatalf("resumed at step %d, want %d", crashed.saves[0].Step, k+1)
			}
			got := h2.cp.items(t)
			if !slices.EqualFunc(got[:len(atCrash)], atCrash, itemEqual) {
				t.Fatal("history before the crash was rewritten")
			}
			if len(got) != len(want) {
				t.Fatalf("%d history items, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Output == outputInterrupted {
					continue // started before the crash, not re-run
				}
				if !itemEqual(got[i], want[i]) {
					t.Fatalf("item %d = %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

func TestResumeAfterAnAbort(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	h.run(ctx, model.NewScripted("scripted", model.ScriptStep{Block: true, Started: started}))
	h.resume = true
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("picked up again")))
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", ex)
	}
	if u := userTexts(p.Requests()[0]); !slices.Contains(u, interruptedMarker) {
		t.Fatalf("the resumed request does not show the interruption: %q", u)
	}
}

func TestResumeOfACompletedAttemptDoesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(t.Context(), model.NewScripted("scripted", model.Reply(model.TextResponse("done"))))
	saves := len(h.cp.saves)
	h.resume = true
	p := model.NewScripted("scripted")
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitCompleted || ex.LastMessage != "done" || len(p.Requests()) != 0 || len(h.cp.saves) != saves {
		t.Fatalf("exit %+v, %d requests, %d new saves", ex, len(p.Requests()), len(h.cp.saves)-saves)
	}
}

func TestAnUnreadableCheckpointFailsWithoutWriting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		state   string
		history [][]byte
	}{
		{"state that is not JSON", `{"version":`, nil},
		{"a state of another version", `{"version":99,"phase":"sampling"}`, nil},
		{"a history shorter than the state says", `{"version":1,"phase":"sampling","history_len":2}`, [][]byte{[]byte(`{"kind":"message"}`)}},
	} {
		t.Run("a checkpoint with "+tc.name+" fails the attempt", func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.cp.state, h.cp.history, h.resume = []byte(tc.state), tc.history, true
			p := model.NewScripted("scripted")
			ex := h.run(t.Context(), p)
			if ex.Reason != workitems.ExitFailed || ex.Class != workitems.ClassInvariantViolation {
				t.Fatalf("exit %+v", ex)
			}
			if len(h.cp.saves) != 0 || len(p.Requests()) != 0 {
				t.Fatal("an unreadable checkpoint was overwritten or acted on")
			}
		})
	}
}
