package agenttest

import (
	"fmt"
	"net/http"
	"testing"
)

// NewResponses starts an OpenAI Responses-API server (POST /v1/responses, streamed) for
// Codex: point a model provider's base_url at URL()+"/v1" with wire_api="responses". Codex
// offers its shell as the function "exec_command" with the argument "cmd".
func NewResponses(t testing.TB, script Script) *Server {
	return newServer(t, "/v1/responses", script, streamResponses)
}

func streamResponses(w http.ResponseWriter, req Request, rep Reply) {
	id := fmt.Sprintf("resp_%d", req.N)
	sse(w, "response.created", obj{"type": "response.created", "response": obj{"id": id, "status": "in_progress"}})
	idx := 0
	var output []any
	if rep.Text != "" {
		item := obj{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_%d", req.N), "status": "completed",
			"content": []any{obj{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
		sse(w, "response.output_item.added", obj{"type": "response.output_item.added", "output_index": idx,
			"item": obj{"type": "message", "role": "assistant", "id": item["id"], "status": "in_progress", "content": []any{}}})
		sse(w, "response.output_text.delta", obj{"type": "response.output_text.delta", "output_index": idx,
			"item_id": item["id"], "content_index": 0, "delta": rep.Text})
		sse(w, "response.output_item.done", obj{"type": "response.output_item.done", "output_index": idx, "item": item})
		output = append(output, item)
		idx++
	}
	for i, c := range rep.Calls {
		item := obj{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", req.N, i),
			"call_id": fmt.Sprintf("call_%d_%d", req.N, i), "name": c.Name, "arguments": c.Arguments, "status": "completed"}
		sse(w, "response.output_item.done", obj{"type": "response.output_item.done", "output_index": idx, "item": item})
		output = append(output, item)
		idx++
	}
	u := rep.Usage
	sse(w, "response.completed", obj{"type": "response.completed", "response": obj{"id": id, "status": "completed",
		"output": output, "usage": obj{"input_tokens": u.InputTokens,
			"input_tokens_details": obj{"cached_tokens": u.CachedInputTokens}, "output_tokens": u.OutputTokens,
			"output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": u.InputTokens + u.OutputTokens}}})
}
