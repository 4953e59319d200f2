package model_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
)

// Responses requests are stateless, as Codex sends them: nothing is stored server-side, the
// reasoning items come back encrypted and are sent again with the next request, and every
// request of one attempt names the same prompt cache.

func TestResponsesRequestsAreStatelessAndCarryReasoning(t *testing.T) {
	t.Parallel()
	recorded, err := os.ReadFile("testdata/responses_tool_call.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Reply{Raw: string(recorded)}, modeltest.Text("Fixed."))
	p := srv.Provider(t)
	ctx := context.Background()
	key := model.CacheKeyFor("item-7/2")
	history := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleUser, Text: "Fix the refund bug."},
		// A reasoning item without encrypted content names a stored item: never sent.
		{Kind: model.KindReasoning, Raw: json.RawMessage(`{"type":"reasoning","id":"rs_stored","summary":[]}`)},
	}
	resp, err := p.Stream(ctx, model.Request{Input: history, Tools: []model.Tool{readFileTool}, CacheKey: key}, nil)
	if err != nil {
		t.Fatalf("Stream 1: %v", err)
	}
	history = append(history, resp.Items...)
	history = append(history, model.Item{Kind: model.KindFunctionCallOutput, CallID: "call_Z1", Output: "package payment"})
	if _, err := p.Stream(ctx, model.Request{Input: history, Tools: []model.Tool{readFileTool}, CacheKey: key}, nil); err != nil {
		t.Fatalf("Stream 2: %v", err)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Store == nil || *r.Store {
			t.Errorf("request %d: store = %v, want false", i+1, r.Store)
		}
		if !slices.Equal(r.Include, []string{"reasoning.encrypted_content"}) {
			t.Errorf("request %d: include = %q, want [reasoning.encrypted_content]", i+1, r.Include)
		}
		if r.PromptCacheKey != key {
			t.Errorf("request %d: prompt_cache_key = %q, want %q", i+1, r.PromptCacheKey, key)
		}
	}
	var types []string
	var reasoning modeltest.InputItem
	for _, it := range reqs[1].Input {
		types = append(types, it.Type)
		if it.Type == "reasoning" {
			reasoning = it
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(it.Raw, &fields); err != nil {
			t.Fatal(err)
		}
		if _, ok := fields["id"]; ok && it.Type != "reasoning" {
			t.Errorf("input item %s names a server item id (nothing is stored): %s", it.Type, it.Raw)
		}
	}
	if want := []string{"message", "reasoning", "message", "function_call", "function_call_output"}; !slices.Equal(types, want) {
		t.Fatalf("request 2 input types = %v, want %v (the stored-only reasoning item dropped, the encrypted one kept in place)", types, want)
	}
	var r struct {
		ID               string `json:"id"`
		EncryptedContent string `json:"encrypted_content"`
		Summary          []any  `json:"summary"`
	}
	if err := json.Unmarshal(reasoning.Raw, &r); err != nil || r.EncryptedContent != "gAAAAB-opaque" || r.ID != "rs_1" || r.Summary == nil {
		t.Errorf("reasoning item sent = %s (%v), want rs_1 with its encrypted content and summary", reasoning.Raw, err)
	}
}

func TestResponsesWithoutCacheKeyNamesNoCache(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Text("ok"))
	if _, err := srv.Provider(t).Stream(context.Background(), userRequest("hi"), nil); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[0]; strings.Contains(string(r.Body), "prompt_cache_key") {
		t.Errorf("body = %s, want no prompt_cache_key", r.Body)
	}
}

func TestCacheKeyForIsStablePerAttemptAndOpaque(t *testing.T) {
	t.Parallel()
	a := model.CacheKeyFor("nightly-deps-20261129/1")
	switch {
	case a != model.CacheKeyFor("nightly-deps-20261129/1"):
		t.Error("the key of one attempt changes between calls")
	case a == model.CacheKeyFor("nightly-deps-20261129/2"):
		t.Error("two attempts share a key")
	case a == model.CacheKeyFor("nightly-deps-20261130/1"):
		t.Error("two items share a key")
	case strings.Contains(a, "nightly"):
		t.Errorf("key %q shows the item id", a)
	case len(a) > 64:
		t.Errorf("key %q is longer than 64 characters", a)
	}
}

func TestResponsesIncompleteAtMaxOutputTokensAsksAgain(t *testing.T) {
	t.Parallel()
	// Out of output tokens: the reasoning item and the message finished or started, a
	// function call was cut mid-arguments.
	cut := sse(
		`{"type":"response.created","response":{"id":"resp_inc","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"encrypted_content":"gAAAAB-more","status":"completed"}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"in_progress","content":[]}}`,
		`{"type":"response.output_text.delta","output_index":1,"item_id":"msg_1","content_index":0,"delta":"First I will read "}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"id":"msg_1","type":"message","role":"assistant","status":"incomplete","content":[{"type":"output_text","text":"First I will read ","annotations":[]}]}}`,
		`{"type":"response.output_item.added","output_index":2,"item":{"id":"fc_1","type":"function_call","call_id":"call_cut","name":"read_file","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","output_index":2,"item_id":"fc_1","delta":"{\"path\":\"pay"}`,
		`{"type":"response.incomplete","response":{"id":"resp_inc","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],`+
			`"usage":{"input_tokens":500,"input_tokens_details":{"cached_tokens":100},"output_tokens":64}}}`)
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Reply{Raw: cut})
	resp, err := srv.Provider(t).Stream(context.Background(), model.Request{Input: userRequest("fix it").Input, MaxOutputTokens: 64}, nil)
	if err != nil {
		t.Fatalf("Stream: %v, want the finished part and a follow-up", err)
	}
	if resp.EndTurn {
		t.Error("EndTurn = true: a response out of output tokens must ask for a follow-up")
	}
	if len(resp.Items) != 2 || resp.Items[0].Kind != model.KindReasoning || resp.Text() != "First I will read " {
		t.Errorf("items = %+v, want the reasoning item and the partial message", resp.Items)
	}
	if calls := resp.ToolCalls(); len(calls) != 0 {
		t.Errorf("tool calls = %+v, want the cut call dropped (its arguments are incomplete)", calls)
	}
	if want := (model.Usage{InputTokens: 500, CachedInputTokens: 100, OutputTokens: 64}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v (the tokens were spent)", resp.Usage, want)
	}
}

func TestResponsesIncompleteWithoutStreamedItemsKeepsTheOutput(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Reply{Raw: sse(`{"type":"response.incomplete","response":{"id":"r","status":"incomplete",` +
		`"incomplete_details":{"reason":"max_output_tokens"},"output":[` +
		`{"id":"msg_1","type":"message","role":"assistant","status":"incomplete","content":[{"type":"output_text","text":"Partial"}]},` +
		`{"id":"fc_1","type":"function_call","status":"incomplete","call_id":"c","name":"read_file","arguments":"{\"pa"}]}}`)})
	resp, err := srv.Provider(t).Stream(context.Background(), userRequest("hi"), nil)
	if err != nil || resp.EndTurn || resp.Text() != "Partial" || len(resp.ToolCalls()) != 0 {
		t.Fatalf("resp = %+v, err = %v; want the partial text, no call, and a follow-up", resp, err)
	}
}

func TestModeltestIncompleteReplyIsAFollowUp(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	reply := modeltest.Text("The first half")
	reply.Incomplete = "max_output_tokens"
	srv.Enqueue(reply)
	resp, err := srv.Provider(t).Stream(context.Background(), userRequest("hi"), nil)
	if err != nil || resp.EndTurn || resp.Text() != "The first half" {
		t.Fatalf("resp = %+v, err = %v; want the text and a follow-up", resp, err)
	}
}
