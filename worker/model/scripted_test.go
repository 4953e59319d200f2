package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
)

func TestScriptedPlaysStepsInOrderAndRecordsRequests(t *testing.T) {
	t.Parallel()
	boom := &model.Error{Provider: "s", Class: workitems.ClassTransient, Message: "boom"}
	s := model.NewScripted("s",
		model.ScriptStep{Response: model.CallResponse(model.Call("c1", "read_file", `{"path":"a"}`)), Deltas: []string{"thin", "king"}},
		model.Fail(boom),
		model.Do(func(_ context.Context, req model.Request) (*model.Response, error) {
			return model.TextResponse("saw " + req.Input[len(req.Input)-1].Output), nil
		}),
	)
	if s.Name() != "s" {
		t.Errorf("name = %q", s.Name())
	}
	ctx := context.Background()
	req := model.Request{Input: []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "go",
		Raw: json.RawMessage(`{"a":1}`)}}, Tools: []model.Tool{readFileTool}}

	var deltas []string
	r, err := s.Stream(ctx, req, func(d model.Delta) { deltas = append(deltas, d.Text) })
	if err != nil || len(r.ToolCalls()) != 1 || r.EndTurn {
		t.Fatalf("step 1 = %+v, %v", r, err)
	}
	if len(deltas) != 2 || deltas[0]+deltas[1] != "thinking" {
		t.Errorf("deltas = %q", deltas)
	}
	r.Items[0].CallID = "mutated" // the script's own response must not change

	// The caller mutates its request after the call; the record must not change.
	req.Input[0].Text = "changed"
	req.Input[0].Raw[2] = 'b'
	if _, err := s.Stream(ctx, req, nil); !errors.Is(err, boom) || !model.Retryable(err) {
		t.Fatalf("step 2 err = %v, want the scripted transient error", err)
	}
	req.Input = append(req.Input, model.Item{Kind: model.KindFunctionCallOutput, CallID: "c1", Output: "data"})
	r, err = s.Stream(ctx, req, nil)
	if err != nil || r.Text() != "saw data" || !r.EndTurn {
		t.Fatalf("step 3 = %+v, %v", r, err)
	}

	_, err = s.Stream(ctx, req, nil)
	var me *model.Error
	if !errors.As(err, &me) || me.Class != workitems.ClassInvariantViolation || !errors.Is(err, model.ErrScriptExhausted) {
		t.Fatalf("step 4 err = %v, want an invariant violation: script exhausted", err)
	}

	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("requests = %d, want 4", len(reqs))
	}
	if reqs[0].Input[0].Text != "go" || string(reqs[0].Input[0].Raw) != `{"a":1}` {
		t.Errorf("request 1 was mutated by the caller: %+v", reqs[0].Input[0])
	}
	if reqs[1].Input[0].Text != "changed" || len(reqs[2].Input) != 2 {
		t.Errorf("requests 2/3 = %+v / %+v", reqs[1].Input, reqs[2].Input)
	}
	reqs[0].Tools[0].Parameters[0] = 'X'
	if s.Requests()[0].Tools[0].Parameters[0] != '{' {
		t.Error("Requests returns shared memory")
	}
	if s.Remaining() != 0 {
		t.Errorf("remaining = %d", s.Remaining())
	}
}

func TestScriptedBlockEndsWithCancellation(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	s := model.NewScripted("s", model.ScriptStep{Block: true, Started: started})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Stream(ctx, userRequest("hi"), nil)
		errc <- err
	}()
	<-started
	if n := len(s.Requests()); n != 1 {
		t.Errorf("requests while streaming = %d, want 1", n)
	}
	cancel()
	err := <-errc
	var me *model.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
		t.Errorf("err = %v, want context.Canceled and no model error", err)
	}
}

func TestScriptedAddExtendsTheScript(t *testing.T) {
	t.Parallel()
	s := model.NewScripted("s")
	s.Add(model.Reply(model.TextResponse("late")))
	r, err := s.Stream(context.Background(), userRequest("hi"), nil)
	if err != nil || r.Text() != "late" {
		t.Fatalf("got %+v, %v", r, err)
	}
}
