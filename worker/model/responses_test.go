package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

var readFileTool = model.Tool{Name: "read_file", Description: "Read a file.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}

func TestResponsesTextAnswer(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	reply := modeltest.Text("The test fails because refunds ignore expiry.")
	reply.Usage = model.Usage{InputTokens: 1200, CachedInputTokens: 1000, OutputTokens: 50}
	srv.Enqueue(reply)
	p := srv.Provider(t)

	var deltas []string
	resp, err := p.Stream(context.Background(), model.Request{
		Instructions:    "You fix bugs.",
		Input:           []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "Why does the test fail?"}},
		Tools:           []model.Tool{readFileTool},
		MaxOutputTokens: 4000,
	}, func(d model.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got, want := resp.Text(), "The test fails because refunds ignore expiry."; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	if got := strings.Join(deltas, ""); got != resp.Text() || len(deltas) != 2 {
		t.Errorf("deltas = %q, want the text in 2 pieces", deltas)
	}
	if !resp.EndTurn || len(resp.ToolCalls()) != 0 {
		t.Errorf("EndTurn = %v, tool calls = %v; want a final answer", resp.EndTurn, resp.ToolCalls())
	}
	if resp.ID != "resp_1" {
		t.Errorf("ID = %q, want resp_1", resp.ID)
	}
	if want := (model.Usage{InputTokens: 1200, CachedInputTokens: 1000, OutputTokens: 50}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	prices := model.Prices{InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8}
	// 200 uncached·2 + 1000 cached·0.5 + 50·8 = 400+500+400 = 1300 per million.
	if got := model.Cost(prices, resp.Usage); math.Abs(got-0.0013) > 1e-12 {
		t.Errorf("cost = %v, want 0.0013", got)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if !r.Authorized || r.Header.Get("Authorization") != "[redacted]" {
		t.Errorf("request not authorized with the key, or key recorded: %q", r.Header.Get("Authorization"))
	}
	if r.Model != modeltest.Model || r.Instructions != "You fix bugs." || !r.Stream || r.MaxOutputTokens != 4000 {
		t.Errorf("request = model %q instructions %q stream %v max %d", r.Model, r.Instructions, r.Stream, r.MaxOutputTokens)
	}
	if len(r.Tools) != 1 || r.Tools[0] != "read_file" {
		t.Errorf("tools = %v, want [read_file]", r.Tools)
	}
	if len(r.Input) != 1 || r.Input[0].Type != "message" || r.Input[0].Role != "user" || r.Input[0].Content != "Why does the test fail?" {
		t.Errorf("input = %+v", r.Input)
	}
	var wire struct {
		Tools []struct {
			Type       string          `json:"type"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &wire); err != nil || wire.Tools[0].Type != "function" ||
		!strings.Contains(string(wire.Tools[0].Parameters), `"required":["path"]`) {
		t.Errorf("tool on the wire = %s (%v), want a function tool with its schema", r.Body, err)
	}
}

func TestResponsesFunctionCallThenAnswer(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(
		modeltest.ToolCalls(model.Call("c1", "read_file", `{"path":"pay.go"}`), model.Call("c2", "read_file", `{"path":"pay_test.go"}`)),
		modeltest.Text("Fixed."),
	)
	p := srv.Provider(t)
	ctx := context.Background()
	history := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleSystem, Text: "Stay in the repo."},
		{Kind: model.KindMessage, Role: model.RoleUser, Text: "Fix the refund bug."},
	}

	resp, err := p.Stream(ctx, model.Request{Input: history, Tools: []model.Tool{readFileTool}}, nil)
	if err != nil {
		t.Fatalf("Stream 1: %v", err)
	}
	calls := resp.ToolCalls()
	want := []model.Item{model.Call("c1", "read_file", `{"path":"pay.go"}`), model.Call("c2", "read_file", `{"path":"pay_test.go"}`)}
	if fmt.Sprint(calls) != fmt.Sprint(want) || resp.EndTurn {
		t.Fatalf("calls = %+v (end turn %v), want %+v", calls, resp.EndTurn, want)
	}
	history = append(history, resp.Items...)
	history = append(history,
		model.Item{Kind: model.KindFunctionCallOutput, CallID: "c1", Output: "package pay"},
		model.Item{Kind: model.KindFunctionCallOutput, CallID: "c2", Output: "package pay_test"})
	resp, err = p.Stream(ctx, model.Request{Input: history, Tools: []model.Tool{readFileTool}}, nil)
	if err != nil {
		t.Fatalf("Stream 2: %v", err)
	}
	if resp.Text() != "Fixed." {
		t.Errorf("answer = %q", resp.Text())
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	got := reqs[1].Input
	wantIn := []modeltest.InputItem{
		{Type: "message", Role: "system", Content: "Stay in the repo."},
		{Type: "message", Role: "user", Content: "Fix the refund bug."},
		{Type: "function_call", CallID: "c1", Name: "read_file", Arguments: `{"path":"pay.go"}`},
		{Type: "function_call", CallID: "c2", Name: "read_file", Arguments: `{"path":"pay_test.go"}`},
		{Type: "function_call_output", CallID: "c1", Output: "package pay"},
		{Type: "function_call_output", CallID: "c2", Output: "package pay_test"},
	}
	if len(got) != len(wantIn) {
		t.Fatalf("request 2 input = %+v, want %d items", got, len(wantIn))
	}
	for i := range wantIn {
		g := got[i]
		g.Raw = nil
		if fmt.Sprint(g) != fmt.Sprint(wantIn[i]) {
			t.Errorf("input[%d] = %+v, want %+v", i, g, wantIn[i])
		}
	}
}

func TestResponsesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reply      modeltest.Reply
		class      workitems.ErrorClass
		status     int
		retryAfter time.Duration
		ctxFull    bool
		quota      bool
		sentinel   error
	}{
		{name: "a stream cut before completed is transient", reply: modeltest.Cut("partial"),
			class: workitems.ClassTransient, sentinel: model.ErrStreamCut},
		{name: "a 429 with Retry-After carries the server's delay", reply: modeltest.RateLimited("3"),
			class: workitems.ClassTransient, status: 429, retryAfter: 3 * time.Second},
		{name: "a 429 saying try again in 3s carries that delay", reply: modeltest.RateLimited(""),
			class: workitems.ClassTransient, status: 429, retryAfter: 3 * time.Second},
		{name: "a 500 is transient", reply: modeltest.ServerError(), class: workitems.ClassTransient, status: 500},
		{name: "a 400 context_length_exceeded marks the context full", reply: modeltest.ContextWindowExceeded(),
			class: workitems.ClassInvalidInput, status: 400, ctxFull: true},
		{name: "a 400 invalid request is invalid input", reply: modeltest.InvalidRequest("bad tool schema"),
			class: workitems.ClassInvalidInput, status: 400},
		{name: "insufficient_quota is a permission error, not transient", reply: modeltest.QuotaExceeded(),
			class: workitems.ClassPermission, status: 429, quota: true},
		{name: "response.failed with server_error is transient", reply: modeltest.Reply{Raw: sse(
			`{"type":"response.created","response":{"id":"r1"}}`,
			`{"type":"response.failed","response":{"id":"r1","status":"failed","error":{"code":"server_error","message":"boom"}}}`)},
			class: workitems.ClassTransient},
		{name: "an error event with context_length_exceeded marks the context full", reply: modeltest.Reply{Raw: sse(
			`{"type":"error","code":"context_length_exceeded","message":"too long","param":null}`)},
			class: workitems.ClassInvalidInput, ctxFull: true},
		{name: "response.incomplete by the content filter is truncated", reply: modeltest.Reply{Raw: sse(
			`{"type":"response.incomplete","response":{"id":"r1","status":"incomplete","incomplete_details":{"reason":"content_filter"}}}`)},
			class: workitems.ClassInvalidInput, sentinel: model.ErrTruncated},
		{name: "a corrupt event is transient", reply: modeltest.Reply{Raw: "data: {not json\n\n"}, class: workitems.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := modeltest.NewResponsesServer(t)
			srv.Enqueue(tt.reply)
			_, err := srv.Provider(t).Stream(context.Background(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v, want *model.Error", err)
			}
			if me.Class != tt.class || me.StatusCode != tt.status || me.RetryAfter != tt.retryAfter ||
				me.ContextWindowExceeded != tt.ctxFull || me.QuotaExceeded != tt.quota {
				t.Errorf("error = %+v, want class %s status %d retry %v ctxFull %v quota %v",
					me, tt.class, tt.status, tt.retryAfter, tt.ctxFull, tt.quota)
			}
			if model.Retryable(err) != (tt.class == workitems.ClassTransient) {
				t.Errorf("Retryable = %v for class %s", model.Retryable(err), me.Class)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.sentinel)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("requests = %d, want 1 (the provider must not retry)", n)
			}
		})
	}
}

func TestResponsesRecordedStream(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/responses_tool_call.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Reply{Raw: string(raw)})
	resp, err := srv.Provider(t).Stream(context.Background(), userRequest("fix it"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "Let me look at the refund code."},
		model.Call("call_Z1", "read_file", `{"path":"payment/refund.go"}`),
	}
	var got []model.Item
	for _, it := range resp.Items {
		if it.Kind != model.KindReasoning {
			got = append(got, it)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("items = %+v, want %+v", got, want)
	}
	if resp.Items[0].Kind != model.KindReasoning || len(resp.Items[0].Raw) == 0 {
		t.Errorf("first item = %+v, want the reasoning item kept raw", resp.Items[0])
	}
	if want := (model.Usage{InputTokens: 2048, CachedInputTokens: 1024, OutputTokens: 77}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	if resp.ID != "resp_abc" || resp.EndTurn {
		t.Errorf("id %q end turn %v", resp.ID, resp.EndTurn)
	}
}

func TestResponsesCancelDuringStream(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	started := make(chan struct{})
	srv.Enqueue(modeltest.Blocked(started))
	p := srv.Provider(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Stream(ctx, userRequest("hi"), nil)
		errc <- err
	}()
	<-started
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	var me *model.Error
	if errors.As(err, &me) {
		t.Errorf("err = %v is a model error; cancellation must not look transient", err)
	}
}

func TestErrorsNeverLeakTheKey(t *testing.T) {
	t.Parallel()
	const key = "sk-live-SECRET-4242"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"bad header %s","type":"invalid_request_error","code":"%s"}}`, auth, auth)
	}))
	t.Cleanup(echo.Close)
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		t.Run(string(kind)+" redacts the key from an echoed header", func(t *testing.T) {
			t.Parallel()
			cfg := config.ProviderConfig{Kind: kind, BaseURL: echo.URL, APIKeyEnv: "K", Model: "m"}
			p, err := model.New(cfg, "echo", func(string) string { return key }, echo.Client())
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), userRequest("hi"), nil)
			if err == nil {
				t.Fatal("want an error")
			}
			var me *model.Error
			if !errors.As(err, &me) || me.Class != workitems.ClassInvalidInput {
				t.Errorf("err = %#v, want invalid_input", err)
			}
			if strings.Contains(err.Error(), key) || strings.Contains(fmt.Sprintf("%+v", me), key) {
				t.Errorf("error leaks the key: %v", err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("error = %v, want the echoed key shown as [redacted]", err)
			}
		})
	}
}

func userRequest(text string) model.Request {
	return model.Request{Input: []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: text}}}
}

// sse renders data payloads as server-sent events.
func sse(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		fmt.Fprintf(&b, "data: %s\n\n", d)
	}
	return b.String()
}
