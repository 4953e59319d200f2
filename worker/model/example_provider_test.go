package model_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"outerloop/worker/model"
	"outerloop/workitems"
)

// echoProvider is a model provider written from scratch: it answers the last user message in
// capitals, streaming it word by word, and is "busy" on its first call. A real one would call its
// server here; what matters is the contract: stream deltas, return the whole Response, and
// classify failures as *model.Error so the loop knows what to retry.
type echoProvider struct{ calls int }

func (p *echoProvider) Name() string { return "echo" }

func (p *echoProvider) Stream(ctx context.Context, req model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	p.calls++
	if p.calls == 1 {
		// Transient: the agent loop retries it after RetryAfter (on its injected clock).
		return nil, &model.Error{Provider: p.Name(), Class: workitems.ClassTransient, StatusCode: 503,
			RetryAfter: 2 * time.Second, Message: "busy"}
	}
	var last string
	for _, it := range req.Input {
		if it.Kind == model.KindMessage && it.Role == model.RoleUser {
			last = it.Text
		}
	}
	words := strings.Fields(strings.ToUpper(last))
	for i, w := range words {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if onDelta != nil {
			if i > 0 {
				w = " " + w
			}
			onDelta(model.Delta{Text: w})
		}
	}
	return &model.Response{Items: []model.Item{{Kind: model.KindMessage, Role: model.RoleAssistant, Text: strings.Join(words, " ")}},
		EndTurn: true, Usage: model.Usage{InputTokens: int64(len(last)), OutputTokens: int64(len(words))}}, nil
}

// Writing a model provider: implement Name and Stream. The agent loop takes it through
// agentloop.WithProvider (or a ProviderFactory for config-named providers).
func Example_provider() {
	var p model.Provider = &echoProvider{}
	req := model.Request{Input: []model.Item{{Kind: model.KindMessage, Role: model.RoleUser, Text: "make the tests pass"}}}
	_, err := p.Stream(context.Background(), req, nil)
	fmt.Println("first call retryable:", model.Retryable(err))
	var streamed []string
	resp, err := p.Stream(context.Background(), req, func(d model.Delta) { streamed = append(streamed, d.Text) })
	if err != nil {
		panic(err)
	}
	fmt.Printf("deltas %q\n", streamed)
	fmt.Println(resp.Text(), "| end turn:", resp.EndTurn, "| output tokens:", resp.Usage.OutputTokens)
	// Output:
	// first call retryable: true
	// deltas ["MAKE" " THE" " TESTS" " PASS"]
	// MAKE THE TESTS PASS | end turn: true | output tokens: 4
}
