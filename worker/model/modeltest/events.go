package modeltest

import (
	"encoding/json"
	"fmt"

	"outerloop/worker/model"
)

// Events renders r as the Responses-API server-sent events a real server streams:
// response.created, per item output_item.added, its deltas (text split in two pieces to
// exercise accumulation), output_item.done, then response.completed with usage (or
// response.incomplete when r.Incomplete names a reason) — or, when r.Cut is set, nothing
// after the items.
func Events(id string, r Reply) []string {
	seq := 0
	var out []string
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		out = append(out, fmt.Sprintf("event: %s\ndata: %s\n\n", typ, b))
	}
	emit("response.created", map[string]any{"response": map[string]any{"id": id, "object": "response",
		"status": "in_progress", "output": []any{}}})
	var done []any
	for i, it := range r.Items {
		switch it.Kind {
		case model.KindMessage:
			itemID := fmt.Sprintf("msg_%d", i)
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}})
			emit("response.content_part.added", map[string]any{"output_index": i, "item_id": itemID, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": ""}})
			for _, d := range halves(it.Text) {
				emit("response.output_text.delta", map[string]any{"output_index": i, "item_id": itemID, "content_index": 0, "delta": d})
			}
			emit("response.output_text.done", map[string]any{"output_index": i, "item_id": itemID, "content_index": 0, "text": it.Text})
			full := map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": it.Text, "annotations": []any{}}}}
			emit("response.output_item.done", map[string]any{"output_index": i, "item": full})
			done = append(done, full)
		case model.KindFunctionCall:
			itemID := fmt.Sprintf("fc_%d", i)
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{
				"type": "function_call", "id": itemID, "call_id": it.CallID, "name": it.Name, "arguments": "", "status": "in_progress"}})
			for _, d := range halves(it.Arguments) {
				emit("response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": itemID, "delta": d})
			}
			emit("response.function_call_arguments.done", map[string]any{"output_index": i, "item_id": itemID, "arguments": it.Arguments})
			full := map[string]any{"type": "function_call", "id": itemID, "call_id": it.CallID, "name": it.Name,
				"arguments": it.Arguments, "status": "completed"}
			emit("response.output_item.done", map[string]any{"output_index": i, "item": full})
			done = append(done, full)
		case model.KindReasoning:
			var full any = map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", i), "summary": []any{}}
			if len(it.Raw) > 0 {
				full = it.Raw
			}
			emit("response.output_item.added", map[string]any{"output_index": i, "item": full})
			emit("response.output_item.done", map[string]any{"output_index": i, "item": full})
			done = append(done, full)
		}
	}
	if r.Cut {
		return out
	}
	if done == nil {
		done = []any{}
	}
	final, status := "response.completed", "completed"
	var details any
	if r.Incomplete != "" {
		final, status, details = "response.incomplete", "incomplete", map[string]any{"reason": r.Incomplete}
	}
	emit(final, map[string]any{"response": map[string]any{"id": id, "object": "response",
		"status": status, "incomplete_details": details, "output": done, "usage": map[string]any{
			"input_tokens":          r.Usage.InputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": r.Usage.CachedInputTokens},
			"output_tokens":         r.Usage.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          r.Usage.InputTokens + r.Usage.OutputTokens,
		}}})
	return out
}

// halves splits s in two pieces at a rune boundary (one piece when short).
func halves(s string) []string {
	rs := []rune(s)
	if len(rs) < 2 {
		return []string{s}
	}
	return []string{string(rs[:len(rs)/2]), string(rs[len(rs)/2:])}
}
