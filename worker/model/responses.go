package model

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// responsesProvider speaks the OpenAI Responses API (POST {base}/responses, streamed) through
// openai-go. Requests are stateless: store is false, and reasoning items come back with their
// encrypted content so the next request can carry them (as Codex does).
type responsesProvider struct {
	c   *conn
	svc responses.ResponseService
}

func newResponses(c *conn, base string, hc *http.Client) *responsesProvider {
	return &responsesProvider{c: c, svc: responses.NewResponseService(openaiOptions(c, base, hc)...)}
}

// openaiOptions configures openai-go: our base URL, client and key only (no environment
// defaults: the service is built without openai.NewClient), and no SDK retries.
func openaiOptions(c *conn, base string, hc *http.Client) []option.RequestOption {
	opts := []option.RequestOption{option.WithBaseURL(base), option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if c.key != "" {
		opts = append(opts, option.WithAPIKey(c.key))
	}
	return opts
}

func (p *responsesProvider) Name() string { return p.c.name }

// respInput maps our history to Responses input items. Messages go as plain-text content;
// function calls go without a server item id (nothing is stored server-side); a reasoning
// item goes back only when it carries encrypted content (without it, it would reference a
// stored item), else it is dropped.
func respInput(items []Item) responses.ResponseInputParam {
	out := make(responses.ResponseInputParam, 0, len(items))
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			role := responses.EasyInputMessageRole(it.Role)
			if role == "" {
				role = responses.EasyInputMessageRoleUser
			}
			m := responses.ResponseInputItemParamOfMessage(it.Text, role)
			m.OfMessage.Type = responses.EasyInputMessageTypeMessage
			out = append(out, m)
		case KindFunctionCall:
			out = append(out, responses.ResponseInputItemParamOfFunctionCall(it.Arguments, it.CallID, it.Name))
		case KindFunctionCallOutput:
			o := responses.ResponseInputItemParamOfFunctionCallOutput(it.Output)
			o.OfFunctionCallOutput.CallID = param.NewOpt(it.CallID)
			out = append(out, o)
		case KindReasoning:
			var ri responses.ResponseReasoningItem
			if len(it.Raw) == 0 || json.Unmarshal(it.Raw, &ri) != nil || ri.Type != "reasoning" || ri.EncryptedContent == "" {
				continue
			}
			summary := make([]responses.ResponseReasoningItemSummaryParam, 0, len(ri.Summary))
			for _, s := range ri.Summary {
				summary = append(summary, responses.ResponseReasoningItemSummaryParam{Text: s.Text})
			}
			r := responses.ResponseInputItemParamOfReasoning(ri.ID, summary)
			r.OfReasoning.EncryptedContent = param.NewOpt(ri.EncryptedContent)
			out = append(out, r)
		}
	}
	return out
}

func respTools(tools []Tool) ([]responses.ToolUnionParam, error) {
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema, err := schemaOf(t)
		if err != nil {
			return nil, err
		}
		ft := responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: param.NewOpt(false)}
		if t.Description != "" {
			ft.Description = param.NewOpt(t.Description)
		}
		out = append(out, responses.ToolUnionParam{OfFunction: &ft})
	}
	return out, nil
}

// schemaOf decodes a tool's JSON schema (an empty object schema when it has none).
func schemaOf(t Tool) (map[string]any, error) {
	if len(t.Parameters) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(t.Parameters, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// itemFromOutput converts a server output item; ok is false for kinds we do not keep.
func itemFromOutput(o responses.ResponseOutputItemUnion) (Item, bool) {
	switch o.Type {
	case "message":
		var b strings.Builder
		for _, c := range o.Content {
			b.WriteString(c.Text)
			b.WriteString(c.Refusal)
		}
		return Item{Kind: KindMessage, Role: RoleAssistant, Text: b.String()}, true
	case "function_call":
		return Item{Kind: KindFunctionCall, CallID: o.CallID, Name: o.Name, Arguments: o.Arguments.OfString}, true
	case "reasoning":
		return Item{Kind: KindReasoning, Raw: json.RawMessage(o.RawJSON())}, true
	}
	return Item{}, false
}

// Stream sends req and reads the event stream up to response.completed (or
// response.incomplete).
func (p *responsesProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.c.modelFor(req)
	if err != nil {
		return nil, err
	}
	tools, err := respTools(req.Tools)
	if err != nil {
		return nil, p.c.cls.invalid("tool schema: %v", err)
	}
	params := responses.ResponseNewParams{
		Model:   model,
		Input:   responses.ResponseNewParamsInputUnion{OfInputItemList: respInput(req.Input)},
		Tools:   tools,
		Store:   param.NewOpt(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	if req.Instructions != "" {
		params.Instructions = param.NewOpt(req.Instructions)
	}
	if req.MaxOutputTokens > 0 {
		params.MaxOutputTokens = param.NewOpt(int64(req.MaxOutputTokens))
	}
	if req.CacheKey != "" {
		params.PromptCacheKey = param.NewOpt(req.CacheKey)
	}
	if len(tools) > 0 {
		params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: param.NewOpt(responses.ToolChoiceOptionsAuto)}
	}
	x := p.c.exchange()
	stream := p.svc.NewStreaming(ctx, params, option.WithMiddleware(x.middleware))
	defer stream.Close()

	cls := p.c.cls
	items := map[int64]*partial{}
	at := func(i int64) *partial {
		if items[i] == nil {
			items[i] = &partial{}
		}
		return items[i]
	}
	out := &Response{}
	for stream.Next() {
		e := stream.Current()
		switch e.Type {
		case "response.created", "response.in_progress":
			if e.Response.ID != "" {
				out.ID = e.Response.ID
			}
		case "response.output_item.added":
			pi := at(e.OutputIndex)
			pi.item, pi.ok = itemFromOutput(e.Item)
		case "response.output_text.delta", "response.refusal.delta":
			pi := at(e.OutputIndex)
			if !pi.ok {
				pi.item, pi.ok = Item{Kind: KindMessage, Role: RoleAssistant}, true
			}
			pi.item.Text += e.Delta
			if onDelta != nil && e.Delta != "" {
				onDelta(Delta{Text: e.Delta})
			}
		case "response.function_call_arguments.delta":
			at(e.OutputIndex).item.Arguments += e.Delta
		case "response.function_call_arguments.done":
			at(e.OutputIndex).item.Arguments = e.Arguments
		case "response.output_item.done":
			it, ok := itemFromOutput(e.Item)
			pi := at(e.OutputIndex)
			// The done item is complete at OpenAI; a terse compatible server may leave out
			// what it already streamed, so keep the streamed text and arguments then.
			if it.Kind == pi.item.Kind {
				if it.Text == "" {
					it.Text = pi.item.Text
				}
				if it.Arguments == "" {
					it.Arguments = pi.item.Arguments
				}
			}
			pi.item, pi.ok, pi.done = it, ok, e.Item.Status != "incomplete"
		case "response.completed":
			return p.finish(out, items, e.Response, true), nil
		case "response.incomplete":
			// Out of output tokens the model is not done: what it finished goes to history
			// and the loop asks again (needs_follow_up). Any other reason (a content filter)
			// would repeat, so it is an error.
			if reason := e.Response.IncompleteDetails.Reason; reason != "max_output_tokens" {
				if reason == "" {
					reason = "unknown reason"
				}
				return nil, cls.truncated(reason)
			}
			return p.finish(out, items, e.Response, false), nil
		case "response.failed":
			f := failure{code: string(e.Response.Error.Code), message: e.Response.Error.Message}
			if f.code == "" && f.message == "" {
				f.message = "response failed"
			}
			return nil, cls.fromStream(f)
		case "error":
			return nil, cls.fromStream(failure{code: e.Code, message: e.Message})
		}
	}
	if err := stream.Err(); err != nil {
		return nil, cls.fromSDK(ctx, err, x)
	}
	return nil, cls.streamCut(ctx)
}

// partial is an output item being streamed.
type partial struct {
	item Item
	ok   bool // a kind we keep
	done bool // its output_item.done arrived, complete
}

// finish assembles the response: streamed items in output order, or the final response's
// output when the server streamed none. A completed response ends the turn unless it calls a
// tool; an incomplete one never does, and keeps only what was finished (a function call cut
// mid-arguments, or a reasoning item without its done event, is dropped; text is kept).
func (p *responsesProvider) finish(out *Response, items map[int64]*partial, done responses.Response, completed bool) *Response {
	if done.ID != "" {
		out.ID = done.ID
	}
	keep := func(it Item, finished bool) bool {
		return completed || finished || it.Kind == KindMessage
	}
	if len(items) == 0 {
		for _, o := range done.Output {
			if it, ok := itemFromOutput(o); ok && keep(it, o.Status != "incomplete") {
				out.Items = append(out.Items, it)
			}
		}
	} else {
		idx := make([]int64, 0, len(items))
		for i := range items {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		for _, i := range idx {
			if pi := items[i]; pi.ok && keep(pi.item, pi.done) {
				out.Items = append(out.Items, pi.item)
			}
		}
	}
	u := done.Usage
	out.Usage = Usage{InputTokens: u.InputTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens, OutputTokens: u.OutputTokens}
	out.EndTurn = completed && len(out.ToolCalls()) == 0
	return out
}
