package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func newChat(t *testing.T, fs *fixtureServer) model.Provider {
	t.Helper()
	p, err := model.New(config.ProviderConfig{Kind: model.KindOpenAIChat, BaseURL: fs.URL + "/v1/", APIKeyEnv: "VLLM_KEY",
		Model: "qwen2.5-coder"}, "local", key, fs.Client())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestChatToolCallsAccumulateByIndex(t *testing.T) {
	t.Parallel()
	fs := newFixtureServer(t, fixture(t, "chat_tool_call.sse"))
	p := newChat(t, fs)
	history := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleUser, Text: "Fix the bug."},
		{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "Looking."},
		model.Call("c0", "list_dir", `{"path":"."}`),
		{Kind: model.KindFunctionCallOutput, CallID: "c0", Output: "a.go b.go"},
		{Kind: model.KindReasoning, Raw: json.RawMessage(`{"type":"reasoning"}`)},
	}
	var deltas strings.Builder
	resp, err := p.Stream(context.Background(), model.Request{Instructions: "Be brief.", Input: history,
		Tools: []model.Tool{readFileTool}, MaxOutputTokens: 512}, func(d model.Delta) { deltas.WriteString(d.Text) })
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "Reading both files."},
		model.Call("call_a", "read_file", `{"path":"a.go"}`),
		model.Call("call_b", "read_file", `{"path":"b.go"}`),
	}
	if fmt.Sprint(resp.Items) != fmt.Sprint(want) {
		t.Errorf("items = %+v\nwant %+v", resp.Items, want)
	}
	if deltas.String() != "Reading both files." {
		t.Errorf("deltas = %q", deltas.String())
	}
	if resp.EndTurn || resp.ID != "chatcmpl-9x" {
		t.Errorf("end turn %v id %q, want false and chatcmpl-9x", resp.EndTurn, resp.ID)
	}
	if want := (model.Usage{InputTokens: 900, CachedInputTokens: 512, OutputTokens: 42}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	// 388·1 + 512·0.1 + 42·4 = 388 + 51.2 + 168 = 607.2 per million.
	if got := model.Cost(model.Prices{InputPerMTok: 1, CachedInputPerMTok: 0.1, OutputPerMTok: 4}, resp.Usage); math.Abs(got-607.2e-6) > 1e-12 {
		t.Errorf("cost = %v, want 607.2e-6", got)
	}

	reqs := fs.requests()
	if len(reqs) != 1 || reqs[0].path != "/v1/chat/completions" || reqs[0].header.Get("Authorization") != "Bearer sk-test-key" {
		t.Fatalf("requests = %d, path %q", len(reqs), reqs[0].path)
	}
	var body struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		MaxTokens     int    `json:"max_tokens"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "qwen2.5-coder" || !body.Stream || !body.StreamOptions.IncludeUsage || body.MaxTokens != 512 {
		t.Errorf("body = %s", reqs[0].body)
	}
	if len(body.Tools) != 1 || body.Tools[0].Type != "function" || body.Tools[0].Function.Name != "read_file" {
		t.Errorf("tools = %+v", body.Tools)
	}
	var got []string
	for _, m := range body.Messages {
		s := m.Role
		if m.Content != nil {
			s += ":" + *m.Content
		}
		for _, tc := range m.ToolCalls {
			s += fmt.Sprintf(" call(%s %s %s %s)", tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments)
		}
		if m.ToolCallID != "" {
			s += " for " + m.ToolCallID
		}
		got = append(got, s)
	}
	wantMsgs := []string{
		"system:Be brief.",
		"user:Fix the bug.",
		`assistant:Looking. call(c0 function list_dir {"path":"."})`,
		"tool:a.go b.go for c0",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantMsgs) {
		t.Errorf("messages =\n%q\nwant\n%q", got, wantMsgs)
	}
}

func TestChatStreamEndings(t *testing.T) {
	t.Parallel()
	chunk := func(content, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return fmt.Sprintf(`{"id":"c1","choices":[{"index":0,"delta":{"content":%q},"finish_reason":%s}]}`, content, f)
	}
	tests := []struct {
		name     string
		body     string
		wantText string
		class    workitems.ErrorClass
		sentinel error
	}{
		{name: "a text answer ends the turn", body: sse(chunk("Done.", ""), chunk("", "stop"), "[DONE]"), wantText: "Done."},
		{name: "a stream without [DONE] is cut", body: sse(chunk("Do", "")), class: workitems.ClassTransient, sentinel: model.ErrStreamCut},
		{name: "finish_reason length is truncated", body: sse(chunk("Do", "length"), "[DONE]"),
			class: workitems.ClassInvalidInput, sentinel: model.ErrTruncated},
		{name: "an error chunk is classified", body: sse(`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":null}}`),
			class: workitems.ClassInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := newFixtureServer(t, canned{body: tt.body})
			resp, err := newChat(t, fs).Stream(context.Background(), userRequest("hi"), nil)
			if tt.class == "" {
				if err != nil || resp.Text() != tt.wantText || !resp.EndTurn {
					t.Fatalf("resp = %+v, err = %v; want text %q ending the turn", resp, err, tt.wantText)
				}
				return
			}
			var me *model.Error
			if !errors.As(err, &me) || me.Class != tt.class {
				t.Fatalf("err = %v, want class %s", err, tt.class)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want %v", err, tt.sentinel)
			}
		})
	}
}
