package model

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// AnthropicVersion is the anthropic-version header of every request. anthropic-sdk-go sets
// it (the API version its types describe); a test pins it so that an SDK upgrade changing
// it is noticed.
const AnthropicVersion = "2026-10-21"

// DefaultAnthropicMaxTokens is max_tokens when the request sets no MaxOutputTokens (the
// Messages API requires one).
const DefaultAnthropicMaxTokens = 8192

// anthropicProvider speaks the Anthropic Messages API (POST {base}/v1/messages, streamed)
// through anthropic-sdk-go: its request types, SSE decoder, stream and event types.
type anthropicProvider struct {
	c *conn
	// client only posts. The SDK's Messages.NewStreaming drops every event that has no
	// "event:" line (some compatible servers send data lines only), so the request goes
	// through the generic Post and the SDK's decoder and stream are assembled here with
	// antDecoder in between.
	client anthropic.Client
}

// newAnthropic builds the client without anthropic.NewClient, which would read keys,
// profiles and the base URL from the environment and refuse to send without a credential.
// The key goes in x-api-key, as the API documents and compatible proxies (LiteLLM) expect:
// the SDK's WithAPIKey sends it as a bearer token instead.
func newAnthropic(c *conn, base string, hc *http.Client) *anthropicProvider {
	opts := []option.RequestOption{option.WithBaseURL(base), option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if c.key != "" {
		opts = append(opts, option.WithHeader("x-api-key", c.key))
	}
	return &anthropicProvider{c: c, client: anthropic.Client{Options: opts}}
}

// antDecoder is the SDK's SSE decoder with what we need on top: an event without an
// "event:" line takes its type from its data, and an "error" event ends the stream with its
// data kept for the classifier. (The SDK's stream builds a typed *anthropic.Error from an
// error event only when the decoder is its own; behind a wrapper it would be a plain
// formatted error, so the event is taken here, before the stream sees it.)
type antDecoder struct {
	ssestream.Decoder
	ev     ssestream.Event
	failed []byte // the data of an error event
}

// errStreamError marks a stream ended by an error event (see antDecoder.failed).
var errStreamError = errors.New("error event")

func (d *antDecoder) Next() bool {
	if d.failed != nil || !d.Decoder.Next() {
		return false
	}
	d.ev = d.Decoder.Event()
	if d.ev.Type == "" {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(d.ev.Data, &t) == nil {
			d.ev.Type = t.Type
		}
	}
	if d.ev.Type == "error" {
		d.failed = d.ev.Data
		return false
	}
	return true
}

func (d *antDecoder) Event() ssestream.Event { return d.ev }

func (d *antDecoder) Err() error {
	if d.failed != nil {
		return errStreamError
	}
	return d.Decoder.Err()
}

func (p *anthropicProvider) Name() string { return p.c.name }

// antMessages maps our history to Messages turns: assistant text and function calls become
// text and tool_use blocks of one assistant turn; outputs become tool_result blocks of the
// next user turn; consecutive blocks of one role merge, as the API wants alternating turns.
// History items with role system become user text (their position matters; the top-level
// system prompt is Request.Instructions). Reasoning items are dropped.
func antMessages(items []Item) []anthropic.MessageParam {
	type turn struct {
		assistant bool
		blocks    []anthropic.ContentBlockParamUnion
	}
	var turns []turn
	add := func(assistant bool, b anthropic.ContentBlockParamUnion) {
		if n := len(turns); n > 0 && turns[n-1].assistant == assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, b)
			return
		}
		turns = append(turns, turn{assistant: assistant, blocks: []anthropic.ContentBlockParamUnion{b}})
	}
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			if it.Text == "" {
				continue // the API refuses empty text blocks
			}
			add(it.Role == RoleAssistant, anthropic.NewTextBlock(it.Text))
		case KindFunctionCall:
			input := json.RawMessage(it.Arguments)
			if !json.Valid(input) || len(input) == 0 || input[0] != '{' {
				input = json.RawMessage(`{}`)
			}
			add(true, anthropic.NewToolUseBlock(it.CallID, input, it.Name))
		case KindFunctionCallOutput:
			add(false, anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: it.CallID,
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: it.Output}}}}})
		}
	}
	out := make([]anthropic.MessageParam, 0, len(turns))
	for _, t := range turns {
		if t.assistant {
			out = append(out, anthropic.NewAssistantMessage(t.blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(t.blocks...))
		}
	}
	return out
}

func antTools(tools []Tool) ([]anthropic.ToolUnionParam, error) {
	out := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema, err := schemaOf(t)
		if err != nil {
			return nil, err
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return out, nil
}

// antUsage folds Anthropic's usage counts into u. Anthropic counts cache reads and cache
// writes apart from input_tokens; our InputTokens is all input, CachedInputTokens the reads.
// A message_delta's usage may carry only some counts; absent ones keep their value.
type antUsage struct {
	fresh, write, read, output int64
}

func (a *antUsage) start(u anthropic.Usage) {
	a.fresh, a.write, a.read, a.output = u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens
}

func (a *antUsage) delta(u anthropic.MessageDeltaUsage) {
	if u.JSON.InputTokens.Valid() {
		a.fresh = u.InputTokens
	}
	if u.JSON.CacheCreationInputTokens.Valid() {
		a.write = u.CacheCreationInputTokens
	}
	if u.JSON.CacheReadInputTokens.Valid() {
		a.read = u.CacheReadInputTokens
	}
	if u.JSON.OutputTokens.Valid() {
		a.output = u.OutputTokens
	}
}

func (a antUsage) usage() Usage {
	return Usage{InputTokens: a.fresh + a.write + a.read, CachedInputTokens: a.read, OutputTokens: a.output}
}

// Stream sends req and reads events up to message_stop.
func (p *anthropicProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.c.modelFor(req)
	if err != nil {
		return nil, err
	}
	tools, err := antTools(req.Tools)
	if err != nil {
		return nil, p.c.cls.invalid("tool schema: %v", err)
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = DefaultAnthropicMaxTokens
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: int64(maxTokens),
		Messages: antMessages(req.Input), Tools: tools}
	if req.Instructions != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.Instructions}}
	}
	x := p.c.exchange()
	var raw *http.Response
	if err := p.client.Post(ctx, "v1/messages", params, &raw, option.WithJSONSet("stream", true),
		option.WithMiddleware(x.middleware)); err != nil {
		if raw != nil && raw.Body != nil {
			raw.Body.Close()
		}
		return nil, p.c.cls.fromSDK(ctx, err, x)
	}
	dec := &antDecoder{Decoder: ssestream.NewDecoder(raw)}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](dec, nil)
	defer stream.Close()

	out := &Response{}
	blocks := map[int64]*Item{}
	var usage antUsage
	var stop anthropic.StopReason
	for stream.Next() {
		e := stream.Current()
		switch e.Type {
		case "message_start":
			out.ID = e.Message.ID
			usage.start(e.Message.Usage)
		case "content_block_start":
			switch cb := e.ContentBlock; cb.Type {
			case "text":
				blocks[e.Index] = &Item{Kind: KindMessage, Role: RoleAssistant, Text: cb.Text}
			case "tool_use":
				it := &Item{Kind: KindFunctionCall, CallID: cb.ID, Name: cb.Name}
				// The start block carries input {} and the JSON follows as deltas; keep a
				// non-empty start input only in case no delta comes.
				if in := cb.JSON.Input.Raw(); in != "" && in != "{}" && in != "null" {
					it.Raw = json.RawMessage(in)
				}
				blocks[e.Index] = it
			}
		case "content_block_delta":
			b := blocks[e.Index]
			if b == nil {
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
			if e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
			usage.delta(e.Usage)
		case "message_stop":
			out.Usage = usage.usage()
			return p.finish(out, blocks, stop)
		}
	}
	if dec.failed != nil {
		f, _ := bodyError(dec.failed)
		if f.code == "" && f.typ == "" && f.message == "" {
			f.message = "stream error"
		}
		return nil, p.c.cls.fromStream(f)
	}
	if err := stream.Err(); err != nil {
		return nil, p.c.cls.fromSDK(ctx, err, x)
	}
	return nil, p.c.cls.streamCut(ctx)
}

func (p *anthropicProvider) finish(out *Response, blocks map[int64]*Item, stop anthropic.StopReason) (*Response, error) {
	switch stop {
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonRefusal, anthropic.StopReasonModelContextWindowExceeded:
		e := p.c.cls.truncated(string(stop))
		e.ContextWindowExceeded = stop == anthropic.StopReasonModelContextWindowExceeded
		return nil, e
	}
	idx := make([]int64, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		b := *blocks[i]
		if b.Kind == KindFunctionCall && b.Arguments == "" {
			b.Arguments = "{}"
		}
		b.Raw = nil
		out.Items = append(out.Items, b)
	}
	// tool_use and pause_turn want another request; end_turn and stop_sequence end the turn.
	out.EndTurn = stop != anthropic.StopReasonToolUse && stop != anthropic.StopReasonPauseTurn && len(out.ToolCalls()) == 0
	return out, nil
}
