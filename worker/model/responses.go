package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
)

// responsesProvider speaks the OpenAI Responses API: POST {base}/responses with stream:true.
type responsesProvider struct{ h *httpClient }

func (p *responsesProvider) Name() string { return p.h.name }

// Wire types of the Responses API, only the fields we use.
type (
	respRequest struct {
		Model           string     `json:"model"`
		Instructions    string     `json:"instructions,omitempty"`
		Input           []any      `json:"input"`
		Tools           []respTool `json:"tools,omitempty"`
		ToolChoice      string     `json:"tool_choice,omitempty"`
		MaxOutputTokens int        `json:"max_output_tokens,omitempty"`
		Stream          bool       `json:"stream"`
	}
	respTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	}
	respMessageIn struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	respCallIn struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	respCallOutputIn struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	// respItem is an output item as the server sends it.
	respItem struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Role      string `json:"role"`
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		} `json:"content"`
		EncryptedContent string `json:"encrypted_content"`
	}
	respUsage struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	respResponse struct {
		ID                string            `json:"id"`
		Status            string            `json:"status"`
		Output            []json.RawMessage `json:"output"`
		Usage             *respUsage        `json:"usage"`
		Error             *apiError         `json:"error"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	respEvent struct {
		Type        string          `json:"type"`
		OutputIndex int             `json:"output_index"`
		ItemID      string          `json:"item_id"`
		Delta       string          `json:"delta"`
		Arguments   string          `json:"arguments"`
		Item        json.RawMessage `json:"item"`
		Response    *respResponse   `json:"response"`
		// the "error" event
		Message string    `json:"message"`
		Code    any       `json:"code"`
		Error   *apiError `json:"error"`
	}
)

// respInput maps our history to Responses input items. Messages go as plain-text content;
// function calls go without their server item id (so no stored item is referenced); a
// reasoning item is sent back only when its Raw carries encrypted content, else dropped.
func respInput(items []Item) []any {
	out := make([]any, 0, len(items))
	for _, it := range items {
		switch it.Kind {
		case KindMessage:
			role := string(it.Role)
			if role == "" {
				role = string(RoleUser)
			}
			out = append(out, respMessageIn{Type: "message", Role: role, Content: it.Text})
		case KindFunctionCall:
			out = append(out, respCallIn{Type: "function_call", CallID: it.CallID, Name: it.Name, Arguments: it.Arguments})
		case KindFunctionCallOutput:
			out = append(out, respCallOutputIn{Type: "function_call_output", CallID: it.CallID, Output: it.Output})
		case KindReasoning:
			var ri respItem
			if len(it.Raw) > 0 && json.Unmarshal(it.Raw, &ri) == nil && ri.Type == "reasoning" && ri.EncryptedContent != "" {
				out = append(out, it.Raw)
			}
		}
	}
	return out
}

func respTools(tools []Tool) []respTool {
	out := make([]respTool, 0, len(tools))
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out
}

// itemFromResp converts a server output item; ok is false for kinds we do not keep.
func itemFromResp(raw json.RawMessage) (Item, bool, error) {
	var ri respItem
	if err := json.Unmarshal(raw, &ri); err != nil {
		return Item{}, false, err
	}
	switch ri.Type {
	case "message":
		var b strings.Builder
		for _, c := range ri.Content {
			b.WriteString(c.Text)
			b.WriteString(c.Refusal)
		}
		return Item{Kind: KindMessage, Role: RoleAssistant, Text: b.String()}, true, nil
	case "function_call":
		return Item{Kind: KindFunctionCall, CallID: ri.CallID, Name: ri.Name, Arguments: ri.Arguments}, true, nil
	case "reasoning":
		return Item{Kind: KindReasoning, Raw: append(json.RawMessage(nil), raw...)}, true, nil
	}
	return Item{}, false, nil
}

// Stream sends req and reads the event stream up to response.completed.
func (p *responsesProvider) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	model, err := p.h.modelFor(req)
	if err != nil {
		return nil, err
	}
	body := respRequest{Model: model, Instructions: req.Instructions, Input: respInput(req.Input),
		Tools: respTools(req.Tools), MaxOutputTokens: req.MaxOutputTokens, Stream: true}
	if len(body.Tools) > 0 {
		body.ToolChoice = "auto"
	}
	header := http.Header{}
	if p.h.key != "" {
		header.Set("Authorization", "Bearer "+p.h.key)
	}
	stream, err := p.h.post(ctx, "/responses", body, header)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	return p.read(ctx, stream, onDelta)
}

// partial is an output item being streamed.
type partial struct {
	item Item
	ok   bool
}

func (p *responsesProvider) read(ctx context.Context, body io.Reader, onDelta func(Delta)) (*Response, error) {
	cls := p.h.cls
	sse := newSSEReader(body)
	items := map[int]*partial{}
	at := func(i int) *partial {
		if items[i] == nil {
			items[i] = &partial{}
		}
		return items[i]
	}
	out := &Response{}
	for {
		ev, err := sse.Next()
		if errors.Is(err, io.EOF) {
			return nil, cls.streamCut(ctx)
		}
		if err != nil {
			return nil, cls.fromTransport(ctx, err)
		}
		if len(ev.Data) == 0 || string(ev.Data) == "[DONE]" {
			continue
		}
		var e respEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return nil, cls.decodeErr(ev.Event, err)
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		switch e.Type {
		case "response.created", "response.in_progress":
			if e.Response != nil && e.Response.ID != "" {
				out.ID = e.Response.ID
			}
		case "response.output_item.added":
			it, ok, err := itemFromResp(e.Item)
			if err != nil {
				return nil, cls.decodeErr(e.Type, err)
			}
			pi := at(e.OutputIndex)
			pi.item, pi.ok = it, ok
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
			it, ok, err := itemFromResp(e.Item)
			if err != nil {
				return nil, cls.decodeErr(e.Type, err)
			}
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
			pi.item, pi.ok = it, ok
		case "response.completed":
			if e.Response == nil {
				return nil, cls.decodeErr(e.Type, errors.New("no response object"))
			}
			return p.finish(out, items, e.Response)
		case "response.incomplete":
			reason := "unknown reason"
			if e.Response != nil && e.Response.IncompleteDetails != nil {
				reason = e.Response.IncompleteDetails.Reason
			}
			return nil, cls.truncated(reason)
		case "response.failed":
			a := apiError{Message: "response failed"}
			if e.Response != nil && e.Response.Error != nil {
				a = *e.Response.Error
			}
			return nil, cls.fromStream(a)
		case "error":
			a := apiError{Message: e.Message, Code: e.Code}
			if e.Error != nil {
				a = *e.Error
			}
			return nil, cls.fromStream(a)
		}
	}
}

// finish assembles the response: streamed items in output order, or the completed
// response's output when the server streamed none.
func (p *responsesProvider) finish(out *Response, items map[int]*partial, done *respResponse) (*Response, error) {
	if done.ID != "" {
		out.ID = done.ID
	}
	if len(items) == 0 {
		for _, raw := range done.Output {
			it, ok, err := itemFromResp(raw)
			if err != nil {
				return nil, p.h.cls.decodeErr("response.completed", err)
			}
			if ok {
				out.Items = append(out.Items, it)
			}
		}
	} else {
		idx := make([]int, 0, len(items))
		for i := range items {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			if items[i].ok {
				out.Items = append(out.Items, items[i].item)
			}
		}
	}
	if u := done.Usage; u != nil {
		out.Usage = Usage{InputTokens: u.InputTokens, CachedInputTokens: u.InputTokensDetails.CachedTokens, OutputTokens: u.OutputTokens}
	}
	out.EndTurn = len(out.ToolCalls()) == 0
	return out, nil
}
