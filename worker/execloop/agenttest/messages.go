package agenttest

import (
	"fmt"
	"net/http"
	"testing"
)

// NewMessages starts an Anthropic Messages-API server (POST /v1/messages, streamed) for Claude
// Code: set ANTHROPIC_BASE_URL to URL(). Claude Code's shell tool is "Bash" with the argument
// "command".
func NewMessages(t testing.TB, script Script) *Server {
	return newServer(t, "/v1/messages", script, streamMessages)
}

func streamMessages(w http.ResponseWriter, req Request, rep Reply) {
	u := rep.Usage
	model, _ := req.Body["model"].(string)
	sse(w, "message_start", obj{"type": "message_start", "message": obj{"id": fmt.Sprintf("msg_%d", req.N),
		"type": "message", "role": "assistant", "model": model, "content": []any{}, "stop_reason": nil,
		"usage": obj{"input_tokens": u.InputTokens - u.CachedInputTokens, "cache_read_input_tokens": u.CachedInputTokens,
			"cache_creation_input_tokens": 0, "output_tokens": 1}}})
	idx := 0
	if rep.Text != "" {
		sse(w, "content_block_start", obj{"type": "content_block_start", "index": idx, "content_block": obj{"type": "text", "text": ""}})
		sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": idx, "delta": obj{"type": "text_delta", "text": rep.Text}})
		sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": idx})
		idx++
	}
	for i, c := range rep.Calls {
		sse(w, "content_block_start", obj{"type": "content_block_start", "index": idx, "content_block": obj{"type": "tool_use",
			"id": fmt.Sprintf("toolu_%d_%d", req.N, i), "name": c.Name, "input": obj{}}})
		sse(w, "content_block_delta", obj{"type": "content_block_delta", "index": idx, "delta": obj{"type": "input_json_delta", "partial_json": c.Arguments}})
		sse(w, "content_block_stop", obj{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if len(rep.Calls) > 0 {
		stop = "tool_use"
	}
	sse(w, "message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": u.OutputTokens}})
	sse(w, "message_stop", obj{"type": "message_stop"})
}
