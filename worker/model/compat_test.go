package model_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Compatible servers (vLLM, Ollama, LiteLLM) reached through base_url: the SDKs must not
// need what only the vendors send.

func TestChatCompatibleServerWithoutExtras(t *testing.T) {
	t.Parallel()
	// Like a small local server: no ids, no usage chunk (stream_options ignored), a tool call
	// delta without index or id, a charset in the content type.
	fs := newFixtureServer(t, canned{header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}, body: sse(
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Reading it."}}]}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}}]}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		"[DONE]")})
	p, err := model.New(config.ProviderConfig{Kind: model.KindOpenAIChat, BaseURL: fs.URL + "/v1", Model: "qwen2.5-coder"}, "local", nil, fs.Client())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Stream(context.Background(), userRequest("fix a.go"), nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []model.Item{
		{Kind: model.KindMessage, Role: model.RoleAssistant, Text: "Reading it."},
		model.Call("call__0", "read_file", `{"path":"a.go"}`),
	}
	if fmt.Sprint(resp.Items) != fmt.Sprint(want) || resp.EndTurn || resp.Usage != (model.Usage{}) {
		t.Errorf("resp = %+v\nwant items %+v, a follow-up and no usage", resp, want)
	}
	r := fs.requests()[0]
	if r.path != "/v1/chat/completions" || r.header.Get("Authorization") != "" {
		t.Errorf("request to %s with Authorization %q, want /v1/chat/completions and no key", r.path, r.header.Get("Authorization"))
	}
}

// The SDKs read OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY and more when built their
// default way; a provider must send only the key its config names, and only to its base URL.
func TestProvidersIgnoreTheSDKsEnvironment(t *testing.T) {
	const leaked = "sk-from-the-environment"
	t.Setenv("OPENAI_API_KEY", leaked)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: "+leaked)
	t.Setenv("ANTHROPIC_API_KEY", leaked)
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: "+leaked)
	bodies := map[workitems.ProviderKind]string{
		model.KindOpenAIResponses: sse(`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`),
		model.KindOpenAIChat:      sse(`{"id":"c","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`, "[DONE]"),
		model.KindAnthropic:       sse(`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`, `{"type":"message_stop"}`),
	}
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		t.Run(string(kind)+" sends no key from the environment", func(t *testing.T) {
			fs := newFixtureServer(t, canned{body: bodies[kind]})
			p, err := model.New(config.ProviderConfig{Kind: kind, BaseURL: fs.URL, Model: "m"}, "p", nil, fs.Client())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Stream(context.Background(), userRequest("hi"), nil); err != nil {
				t.Fatalf("Stream: %v (the request must go to the configured base URL)", err)
			}
			for name, vs := range fs.requests()[0].header {
				for _, v := range vs {
					if v == leaked || v == "Bearer "+leaked {
						t.Errorf("header %s carries the environment's key", name)
					}
				}
			}
		})
	}
}

func TestCancelDuringStreamIsNotAModelError(t *testing.T) {
	t.Parallel()
	first := map[workitems.ProviderKind]string{
		model.KindOpenAIResponses: `{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}`,
		model.KindOpenAIChat:      `{"id":"c","choices":[{"index":0,"delta":{"content":"thinking"}}]}`,
		model.KindAnthropic:       `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}}`,
	}
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		t.Run(string(kind)+" returns the cancellation", func(t *testing.T) {
			t.Parallel()
			streaming := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: %s\n\n", first[kind])
				w.(http.Flusher).Flush()
				close(streaming)
				<-r.Context().Done() // a model still thinking, until the client goes
			}))
			t.Cleanup(srv.Close)
			p, err := model.New(config.ProviderConfig{Kind: kind, BaseURL: srv.URL, Model: "m"}, "p", nil, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := p.Stream(ctx, userRequest("hi"), nil)
				errc <- err
			}()
			<-streaming
			cancel()
			err = <-errc
			var me *model.Error
			if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
				t.Errorf("err = %v, want context.Canceled and no *model.Error", err)
			}
		})
	}
}
