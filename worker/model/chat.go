package model

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// chatProvider speaks OpenAI Chat Completions (POST {base}/chat/completions, streamed, with
// stream_options.include_usage) through openai-go: the dialect most compatible servers
// (vLLM, Ollama, LiteLLM) implement.
type chatProvider struct {
	c *conn
	// client only posts: the SDK's Chat service hides whether the stream ended with
	// "data: [DONE]" or was cut, so the request goes through the generic Post and the SDK's
	// decoder and stream are assembled here with a watch for [DONE].
	client openai.Client
}

func newChat(c *conn, base string, hc *http.Client) *chatProvider {
	return &chatProvider{c: c, client: openai.Client{Options: openaiOptions(c, base, hc)}}
}

func (p *chatProvider) Name() string { return p.c.name }

// chatMessages maps our history to chat messages: instructions become the first system
// message; an assistant's text and the function calls that follow it merge into one
// assistant message with tool_calls; each output is a "tool" message naming its call id.
// Reasoning items have no place in this API and are dropped.
func chatMessages(instructions string, items []Item) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if instructions != "" {
		out = append(out, openai.SystemMessage(instructions))
	}
	// lastAssistant returns the assistant message being built, if the previous one is it.
	lastAssistant := func() *openai.ChatCompletionAssistantMessageParam {
		if n := len(out); n > 0 {
			return out[n-1].OfAssistant
		}
		return nil
	}
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			switch it.Role {
			case RoleAssistant:
				if m := lastAssistant(); m != nil && len(m.ToolCalls) == 0 && !param.IsOmitted(m.Content.OfString) {
					m.Content.OfString = param.NewOpt(m.Content.OfString.Value + it.Text)
					continue
				}
				out = append(out, openai.AssistantMessage(it.Text))
			case RoleSystem:
				out = append(out, openai.SystemMessage(it.Text))
			default:
				out = append(out, openai.UserMessage(it.Text))
			}
		case KindFunctionCall:
			tc := openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: it.CallID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: it.Name, Arguments: it.Arguments}}}
			if m := lastAssistant(); m != nil {
				m.ToolCalls = append(m.ToolCalls, tc)
				continue
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{tc}}})
		case KindFunctionCallOutput:
			out = append(out, openai.ToolMessage(it.Output, it.CallID))
		}
	}
	return out
}

func chatTools(tools []Tool) ([]openai.ChatCompletionToolUnionParam, error) {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema, err := schemaOf(t)
		if err != nil {
			return nil, err
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fd))
	}
	return out, nil
}

// doneDecoder is the SDK's SSE decoder, noting whether the stream's "[DONE]" arrived.
type doneDecoder struct {
	ssestream.Decoder
	done bool
}

func (d *doneDecoder) Next() bool {
	ok := d.Decoder.Next()
	if ok && bytes.HasPrefix(d.Event().Data, []byte("[DONE]")) {
		d.done = true
	}
	return ok
}

// Stream sends req and reads chunks up to "data: [DONE]".
func (p *chatProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.c.modelFor(req)
	if err != nil {
		return nil, err
	}
	tools, err := chatTools(req.Tools)
	if err != nil {
		return nil, p.c.cls.invalid("tool schema: %v", err)
	}
	params := openai.ChatCompletionNewParams{Model: model, Messages: chatMessages(req.Instructions, req.Input), Tools: tools,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}}
	if req.MaxOutputTokens > 0 {
		params.MaxTokens = param.NewOpt(int64(req.MaxOutputTokens))
	}
	x := p.c.exchange()
	var raw *http.Response
	err = p.client.Post(ctx, "chat/completions", params, &raw, option.WithJSONSet("stream", true), option.WithMiddleware(x.middleware))
	var dec *doneDecoder
	var stream *ssestream.Stream[openai.ChatCompletionChunk]
	if err == nil {
		dec = &doneDecoder{Decoder: ssestream.NewDecoder(raw)}
		stream = ssestream.NewStream[openai.ChatCompletionChunk](dec, nil)
	} else {
		if raw != nil && raw.Body != nil {
			raw.Body.Close()
		}
		return nil, p.c.cls.fromSDK(ctx, err, x)
	}
	defer stream.Close()

	out := &Response{}
	var text string
	calls := map[int64]*Item{}
	finish := ""
	for stream.Next() {
		c := stream.Current()
		if c.ID != "" {
			out.ID = c.ID
		}
		if c.JSON.Usage.Valid() {
			u := c.Usage
			out.Usage = Usage{InputTokens: u.PromptTokens, CachedInputTokens: u.PromptTokensDetails.CachedTokens, OutputTokens: u.CompletionTokens}
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // we ask for one choice
			}
			for _, s := range []string{ch.Delta.Content, ch.Delta.Refusal} {
				if s != "" {
					text += s
					if onDelta != nil {
						onDelta(Delta{Text: s})
					}
				}
			}
			for i, tc := range ch.Delta.ToolCalls {
				idx := int64(i)
				if tc.JSON.Index.Valid() { // some compatible servers send no index
					idx = tc.Index
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
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.c.cls.fromSDK(ctx, err, x)
	}
	if !dec.done {
		return nil, p.c.cls.streamCut(ctx)
	}
	if finish == "length" || finish == "content_filter" {
		return nil, p.c.cls.truncated(finish)
	}
	if text != "" {
		out.Items = append(out.Items, Item{Kind: KindMessage, Role: RoleAssistant, Text: text})
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
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
