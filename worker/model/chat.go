package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
)

// chatProvider speaks OpenAI Chat Completions: POST {base}/chat/completions with stream:true
// and stream_options.include_usage, the dialect most compatible servers (vLLM, Ollama,
// LiteLLM) implement.
type chatProvider struct{ h *httpClient }

func (p *chatProvider) Name() string { return p.h.name }

// Wire types of Chat Completions, only the fields we use.
type (
	chatRequest struct {
		Model         string        `json:"model"`
		Messages      []chatMessage `json:"messages"`
		Tools         []chatTool    `json:"tools,omitempty"`
		MaxTokens     int           `json:"max_tokens,omitempty"`
		Stream        bool          `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		Index    *int   `json:"index,omitempty"`
		ID       string `json:"id,omitempty"`
		Type     string `json:"type,omitempty"`
		Function struct {
			Name      string `json:"name,omitempty"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	chatChunk struct {
		ID      string `json:"id"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content   *string        `json:"content"`
				Refusal   *string        `json:"refusal"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		Error *apiError `json:"error"`
	}
)

// chatMessages maps our history to chat messages: instructions become the first system
// message; an assistant's text and the function calls that follow it merge into one
// assistant message with tool_calls; each output is a "tool" message naming its call id.
// Reasoning items have no place in this API and are dropped.
func chatMessages(instructions string, items []Item) []chatMessage {
	str := func(s string) *string { return &s }
	var out []chatMessage
	if instructions != "" {
		out = append(out, chatMessage{Role: "system", Content: str(instructions)})
	}
	// lastAssistant returns the assistant message being built, if the previous one is it.
	lastAssistant := func() *chatMessage {
		if n := len(out); n > 0 && out[n-1].Role == "assistant" {
			return &out[n-1]
		}
		return nil
	}
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			role := string(it.Role)
			if role == "" {
				role = string(RoleUser)
			}
			if role == string(RoleAssistant) {
				if m := lastAssistant(); m != nil && len(m.ToolCalls) == 0 && m.Content != nil {
					m.Content = str(*m.Content + it.Text)
					continue
				}
			}
			out = append(out, chatMessage{Role: role, Content: str(it.Text)})
		case KindFunctionCall:
			tc := chatToolCall{ID: it.CallID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = it.Name, it.Arguments
			if m := lastAssistant(); m != nil {
				m.ToolCalls = append(m.ToolCalls, tc)
				continue
			}
			out = append(out, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{tc}})
		case KindFunctionCallOutput:
			out = append(out, chatMessage{Role: "tool", Content: str(it.Output), ToolCallID: it.CallID})
		}
	}
	return out
}

func chatTools(tools []Tool) []chatTool {
	out := make([]chatTool, 0, len(tools))
	for _, t := range tools {
		ct := chatTool{Type: "function"}
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.Parameters
		if len(ct.Function.Parameters) == 0 {
			ct.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, ct)
	}
	return out
}

// Stream sends req and reads chunks up to "data: [DONE]".
func (p *chatProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.h.modelFor(req)
	if err != nil {
		return nil, err
	}
	body := chatRequest{Model: model, Messages: chatMessages(req.Instructions, req.Input), Tools: chatTools(req.Tools),
		MaxTokens: req.MaxOutputTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	header := http.Header{}
	if p.h.key != "" {
		header.Set("Authorization", "Bearer "+p.h.key)
	}
	stream, err := p.h.post(ctx, "/chat/completions", body, header)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	return p.read(ctx, stream, onDelta)
}

func (p *chatProvider) read(ctx context.Context, body io.Reader, onDelta func(Delta)) (*Response, error) {
	cls := p.h.cls
	sse := newSSEReader(body)
	out := &Response{}
	var text string
	calls := map[int]*Item{}
	finish := ""
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			return nil, cls.streamCut(ctx)
		}
		if err != nil {
			return nil, cls.fromTransport(ctx, err)
		}
		if string(ev.Data) == "[DONE]" {
			break
		}
		if len(ev.Data) == 0 {
			continue
		}
		var c chatChunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			return nil, cls.decodeErr("chat chunk", err)
		}
		if c.Error != nil {
			return nil, cls.fromStream(*c.Error)
		}
		if c.ID != "" {
			out.ID = c.ID
		}
		if u := c.Usage; u != nil {
			out.Usage = Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
			if u.PromptTokensDetails != nil {
				out.Usage.CachedInputTokens = u.PromptTokensDetails.CachedTokens
			}
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // we ask for one choice
			}
			for _, s := range []*string{ch.Delta.Content, ch.Delta.Refusal} {
				if s != nil && *s != "" {
					text += *s
					if onDelta != nil {
						onDelta(Delta{Text: *s})
					}
				}
			}
			for i, tc := range ch.Delta.ToolCalls {
				idx := i
				if tc.Index != nil {
					idx = *tc.Index
				}
				call := calls[idx]
				if call == nil {
					call = &Item{Kind: KindFunctionCall}
					calls[idx] = call
				}
				if tc.ID != "" {
					call.CallID = tc.ID
				}
				if call.Name == "" { // sent once, in the call's first delta
					call.Name = tc.Function.Name
				}
				call.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = *ch.FinishReason
			}
		}
	}
	if finish == "length" || finish == "content_filter" {
		return nil, cls.truncated(finish)
	}
	if text != "" {
		out.Items = append(out.Items, Item{Kind: KindMessage, Role: RoleAssistant, Text: text})
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		call := *calls[i]
		if call.CallID == "" { // some compatible servers send no id; outputs still need one
			call.CallID = fmt.Sprintf("call_%s_%d", out.ID, i)
		}
		out.Items = append(out.Items, call)
	}
	out.EndTurn = len(calls) == 0
	return out, nil
}
