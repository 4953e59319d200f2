package model_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// BenchmarkStream is one Stream call per provider kind against a local server replaying a
// recorded stream (request encoding, HTTP on loopback, SSE decoding, assembling the
// response). Its baseline in the same run is raw/*: the same POST and the same bytes read
// and discarded, with no decoding at all.
func BenchmarkStream(b *testing.B) {
	for _, bc := range []struct {
		kind workitems.ProviderKind
		file string
	}{
		{model.KindOpenAIResponses, "responses_tool_call.sse"},
		{model.KindOpenAIChat, "chat_tool_call.sse"},
		{model.KindAnthropic, "anthropic_tool_use.sse"},
	} {
		b.Run(string(bc.kind), func(b *testing.B) {
			body, err := os.ReadFile("testdata/" + bc.file)
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(body)
			}))
			b.Cleanup(srv.Close)
			p, err := model.New(config.ProviderConfig{Kind: bc.kind, BaseURL: srv.URL, APIKeyEnv: "K", Model: "m"}, "bench",
				key, srv.Client())
			if err != nil {
				b.Fatal(err)
			}
			req := model.Request{Instructions: "You fix bugs.", Tools: []model.Tool{readFileTool}, Input: []model.Item{
				{Kind: model.KindMessage, Role: model.RoleUser, Text: "Fix the refund bug."},
				model.Call("c0", "list_dir", `{"path":"."}`),
				{Kind: model.KindFunctionCallOutput, CallID: "c0", Output: "refund.go refund_test.go"},
			}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Stream(ctx, req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("raw/"+string(bc.kind), func(b *testing.B) {
			body, err := os.ReadFile("testdata/" + bc.file)
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(body)
			}))
			b.Cleanup(srv.Close)
			hc := srv.Client()
			payload := []byte(`{"model":"m","input":[{"role":"user","content":"Fix the refund bug."}],"stream":true}`)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := hc.Post(srv.URL, "application/json", bytes.NewReader(payload))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
