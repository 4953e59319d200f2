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

func newAnthropic(t *testing.T, fs *fixtureServer) model.Provider {
	t.Helper()
	p, err := model.New(config.ProviderConfig{Kind: model.KindAnthropic, BaseURL: fs.URL, APIKeyEnv: "ANTHROPIC_API_KEY",
		Model: "claude-sonnet-4-5"}, "claude", key, fs.Client())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnthropicToolUseThenText(t *testing.T) {
	t.Parallel()
	fs := newFixtureServer(t, fixture(t, "anthropic_tool_use.sse"), fixture(t, "anthropic_text.sse"))
	p := newAnthropic(t, fs)
	ctx := context.Background()
	history := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleUser, Text: "Fix the refund bug."},
		{Kind: model.KindMessage, Role: model.RoleSystem, Text: "Only touch payment/."},
	}
	var deltas strings.Builder
	resp, err := p.Stream(ctx, model.Request{Instructions: "You fix bugs.", Input: history, Tools: []model.Tool{readFileTool}},
		func(d model.Delta) { deltas.WriteString(d.Text) })
	if err != nil {
		t.Fatalf("Stream 1: %v", err)
	}
	want := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "I'll check the refund code."},
		model.Call("toolu_01X", "read_file", `{"path": "payment/refund.go"}`),
		model.Call("toolu_01Y", "list_dir", `{}`),
	}
	if fmt.Sprint(resp.Items) != fmt.Sprint(want) {
		t.Errorf("items = %+v\nwant %+v", resp.Items, want)
	}
	if deltas.String() != "I'll check the refund code." || resp.EndTurn || resp.ID != "msg_01A" {
		t.Errorf("deltas %q end turn %v id %q", deltas.String(), resp.EndTurn, resp.ID)
	}
	// input = 300 fresh + 200 cache writes + 1000 cache reads.
	if want := (model.Usage{InputTokens: 1500, CachedInputTokens: 1000, OutputTokens: 89}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	// 500·3 + 1000·0.3 + 89·15 = 1500 + 300 + 1335 = 3135 per million.
	if got := model.Cost(model.Prices{InputPerMTok: 3, CachedInputPerMTok: 0.3, OutputPerMTok: 15}, resp.Usage); math.Abs(got-3135e-6) > 1e-12 {
		t.Errorf("cost = %v, want 3135e-6", got)
	}

	history = append(history, resp.Items...)
	history = append(history,
		model.Item{Kind: model.KindFunctionCallOutput, CallID: "toolu_01X", Output: "package payment"},
		model.Item{Kind: model.KindFunctionCallOutput, CallID: "toolu_01Y", Output: "refund.go"},
		model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: "Steer: keep it small."})
	resp, err = p.Stream(ctx, model.Request{Instructions: "You fix bugs.", Input: history, MaxOutputTokens: 1000}, nil)
	if err != nil {
		t.Fatalf("Stream 2: %v", err)
	}
	if resp.Text() != "Fixed: expired orders are not refunded." || !resp.EndTurn {
		t.Errorf("answer %q end turn %v", resp.Text(), resp.EndTurn)
	}
	if want := (model.Usage{InputTokens: 1500, OutputTokens: 12}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}

	reqs := fs.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.path != "/v1/messages" || r.header.Get("x-api-key") != "sk-test-key" || r.header.Get("anthropic-version") != model.AnthropicVersion {
			t.Errorf("request path %q headers %v", r.path, r.header)
		}
	}
	var first struct {
		MaxTokens int             `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Stream    bool            `json:"stream"`
		Tools     []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].body, &first); err != nil {
		t.Fatal(err)
	}
	if first.MaxTokens != model.DefaultAnthropicMaxTokens || blockText(t, first.System) != "You fix bugs." || !first.Stream ||
		len(first.Tools) != 1 || !strings.Contains(string(first.Tools[0].InputSchema), `"path"`) {
		t.Errorf("request 1 = %s", reqs[0].body)
	}
	var second struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].body, &second); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range second.Messages {
		var parts []string
		for _, c := range m.Content {
			switch c.Type {
			case "text":
				parts = append(parts, "text:"+c.Text)
			case "tool_use":
				parts = append(parts, fmt.Sprintf("tool_use:%s:%s:%s", c.ID, c.Name, c.Input))
			case "tool_result":
				parts = append(parts, fmt.Sprintf("tool_result:%s:%s", c.ToolUseID, blockText(t, c.Content)))
			}
		}
		got = append(got, m.Role+" ["+strings.Join(parts, " | ")+"]")
	}
	wantMsgs := []string{
		"user [text:Fix the refund bug. | text:Only touch payment/.]",
		`assistant [text:I'll check the refund code. | tool_use:toolu_01X:read_file:{"path":"payment/refund.go"} | tool_use:toolu_01Y:list_dir:{}]`,
		"user [tool_result:toolu_01X:package payment | tool_result:toolu_01Y:refund.go | text:Steer: keep it small.]",
	}
	if second.MaxTokens != 1000 || fmt.Sprint(got) != fmt.Sprint(wantMsgs) {
		t.Errorf("request 2 max_tokens %d messages =\n%q\nwant\n%q", second.MaxTokens, got, wantMsgs)
	}
}

func TestAnthropicStreamFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		reply    canned
		class    workitems.ErrorClass
		ctxFull  bool
		sentinel error
	}{
		{name: "an overloaded_error event is transient",
			reply: canned{body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":5}}}\n\n" +
				"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"},
			class: workitems.ClassTransient},
		{name: "a stream cut before message_stop is transient",
			reply: canned{body: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"},
			class: workitems.ClassTransient, sentinel: model.ErrStreamCut},
		{name: "stop_reason max_tokens is truncated",
			reply: canned{body: sse(`{"type":"message_start","message":{"id":"m"}}`,
				`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}`, `{"type":"message_stop"}`)},
			class: workitems.ClassInvalidInput, sentinel: model.ErrTruncated},
		{name: "a 400 prompt is too long marks the context full",
			reply: canned{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`},
			class: workitems.ClassInvalidInput, ctxFull: true},
		{name: "a 529 overloaded is transient",
			reply: canned{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			class: workitems.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := newFixtureServer(t, tt.reply)
			_, err := newAnthropic(t, fs).Stream(context.Background(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Class != tt.class || me.ContextWindowExceeded != tt.ctxFull {
				t.Fatalf("err = %+v, want class %s ctxFull %v", err, tt.class, tt.ctxFull)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want %v", err, tt.sentinel)
			}
		})
	}
}

// blockText is the text of a Messages API field that is a string or a list of text blocks
// (system, tool_result content): both shapes are the API's, and the SDK sends blocks.
func blockText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatalf("%s is neither a string nor text blocks: %v", raw, err)
	}
	for _, b := range blocks {
		if b.Type != "text" {
			t.Fatalf("%s holds a %q block", raw, b.Type)
		}
		s += b.Text
	}
	return s
}
