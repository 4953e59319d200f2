package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
)

// AnthropicVersion is the anthropic-version header sent with every request.
const AnthropicVersion = "2023-06-01"

// DefaultAnthropicMaxTokens is max_tokens when the request sets no MaxOutputTokens (the
// Messages API requires one).
const DefaultAnthropicMaxTokens = 8192

// anthropicProvider speaks the Anthropic Messages API: POST {base}/v1/messages, stream:true.
type anthropicProvider struct{ h *httpClient }

func (p *anthropicProvider) Name() string { return p.h.name }

// Wire types of the Messages API, only the fields we use.
type (
	antRequest struct {
		Model     string       `json:"model"`
		MaxTokens int          `json:"max_tokens"`
		System    string       `json:"system,omitempty"`
		Messages  []antMessage `json:"messages"`
		Tools     []antTool    `json:"tools,omitempty"`
		Stream    bool         `json:"stream"`
	}
	antMessage struct {
		Role    string     `json:"role"`
		Content []antBlock `json:"content"`
	}
	antBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   string          `json:"content,omitempty"`
	}
	antTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	antUsage struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	}
	antEvent struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string    `json:"id"`
			Usage *antUsage `json:"usage"`
		} `json:"message"`
		Index        int       `json:"index"`
		ContentBlock *antBlock `json:"content_block"`
		Delta        *struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *antUsage `json:"usage"`
		Error *apiError `json:"error"`
	}
)

// antMessages maps our history to Messages turns: assistant text and function calls become
// text and tool_use blocks of one assistant turn; outputs become tool_result blocks of the
// next user turn; consecutive blocks of one role merge, as the API wants alternating turns.
// History items with role system become user text (their position matters; the top-level
// system prompt is Request.Instructions). Reasoning items are dropped.
func antMessages(items []Item) []antMessage {
	var out []antMessage
	add := func(role string, b antBlock) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, b)
			return
		}
		out = append(out, antMessage{Role: role, Content: []antBlock{b}})
	}
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			if it.Text == "" {
				continue // the API refuses empty text blocks
			}
			role := "user"
			if it.Role == RoleAssistant {
				role = "assistant"
			}
			add(role, antBlock{Type: "text", Text: it.Text})
		case KindFunctionCall:
			input := json.RawMessage(it.Arguments)
			if !json.Valid(input) || len(input) == 0 || input[0] != '{' {
				input = json.RawMessage(`{}`)
			}
			add("assistant", antBlock{Type: "tool_use", ID: it.CallID, Name: it.Name, Input: input})
		case KindFunctionCallOutput:
			add("user", antBlock{Type: "tool_result", ToolUseID: it.CallID, Content: it.Output})
		}
	}
	return out
}

func antTools(tools []Tool) []antTool {
	out := make([]antTool, 0, len(tools))
	for _, t := range tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, antTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}

// Stream sends req and reads events up to message_stop.
func (p *anthropicProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.h.modelFor(req)
	if err != nil {
		return nil, err
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = DefaultAnthropicMaxTokens
	}
	body := antRequest{Model: model, MaxTokens: maxTokens, System: req.Instructions,
		Messages: antMessages(req.Input), Tools: antTools(req.Tools), Stream: true}
	header := http.Header{}
	header.Set("anthropic-version", AnthropicVersion)
	if p.h.key != "" {
		header.Set("x-api-key", p.h.key)
	}
	stream, err := p.h.post(ctx, "/v1/messages", body, header)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	return p.read(ctx, stream, onDelta)
}

// antUsageInto folds an Anthropic usage object into u. Anthropic counts cache reads and cache
// writes apart from input_tokens; our InputTokens is all input, CachedInputTokens the reads.
func antUsageInto(u *Usage, a *antUsage, fresh *int64, write *int64) {
	if a == nil {
		return
	}
	if a.InputTokens != nil {
		*fresh = *a.InputTokens
	}
	if a.CacheCreationInputTokens != nil {
		*write = *a.CacheCreationInputTokens
	}
	if a.CacheReadInputTokens != nil {
		u.CachedInputTokens = *a.CacheReadInputTokens
	}
	if a.OutputTokens != nil {
		u.OutputTokens = *a.OutputTokens
	}
	u.InputTokens = *fresh + *write + u.CachedInputTokens
}

func (p *anthropicProvider) read(ctx context.Context, body io.Reader, onDelta func(Delta)) (*Response, error) {
	cls := p.h.cls
	sse := newSSEReader(body)
	out := &Response{}
	blocks := map[int]*Item{}
	var fresh, write int64
	stop := ""
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			return nil, cls.streamCut(ctx)
		}
		if err != nil {
			return nil, cls.fromTransport(ctx, err)
		}
		if len(ev.Data) == 0 {
			continue
		}
		var e antEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, cls.decodeErr(ev.Event, err)
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				out.ID = e.Message.ID
				antUsageInto(&out.Usage, e.Message.Usage, &fresh, &write)
			}
		case "content_block_start":
			if e.ContentBlock == nil {
				continue
			}
			switch e.ContentBlock.Type {
			case "text":
				blocks[e.Index] = &Item{Kind: KindMessage, Role: RoleAssistant, Text: e.ContentBlock.Text}
			case "tool_use":
				it := &Item{Kind: KindFunctionCall, CallID: e.ContentBlock.ID, Name: e.ContentBlock.Name}
				// The start block carries input {} and the JSON follows as deltas; keep a
				// non-empty start input only in case no delta comes.
				if in := e.ContentBlock.Input; len(in) > 0 && string(in) != "{}" {
					it.Raw = append(json.RawMessage(nil), in...)
				}
				blocks[e.Index] = it
			}
		case "content_block_delta":
			b := blocks[e.Index]
			if b == nil || e.Delta == nil {
				continue
			}
			switch e.Delta.Type {
			case "text_delta":
				b.Text += e.Delta.Text
				if onDelta != nil && e.Delta.Text != "" {
					onDelta(Delta{Text: e.Delta.Text})
				}
			case "input_json_delta":
				b.Arguments += e.Delta.PartialJSON
			}
		case "content_block_stop":
			if b := blocks[e.Index]; b != nil && b.Kind == KindFunctionCall {
				if b.Arguments == "" {
					b.Arguments = "{}"
					if len(b.Raw) > 0 {
						b.Arguments = string(b.Raw)
					}
				}
				b.Raw = nil
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			antUsageInto(&out.Usage, e.Usage, &fresh, &write)
		case "message_stop":
			return p.finish(out, blocks, stop)
		case "error":
			a := apiError{Type: "error", Message: "stream error"}
			if e.Error != nil {
				a = *e.Error
			}
			return nil, cls.fromStream(a)
		}
	}
}

func (p *anthropicProvider) finish(out *Response, blocks map[int]*Item, stop string) (*Response, error) {
	if stop == "max_tokens" || stop == "refusal" || stop == "model_context_window_exceeded" {
		e := p.h.cls.truncated(stop)
		e.ContextWindowExceeded = stop == "model_context_window_exceeded"
		return nil, e
	}
	idx := make([]int, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		b := *blocks[i]
		if b.Kind == KindFunctionCall && b.Arguments == "" {
			b.Arguments = "{}"
		}
		b.Raw = nil
		out.Items = append(out.Items, b)
	}
	// tool_use and pause_turn want another request; end_turn and stop_sequence end the turn.
	out.EndTurn = stop != "tool_use" && stop != "pause_turn" && len(out.ToolCalls()) == 0
	return out, nil
}
