package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// An SDK error holds the request (its headers carry the key) and the raw body (a server
// may echo the key). What a provider returns must carry neither, however it is printed or
// logged.
func TestErrorsCarryNoKeyOrHeaders(t *testing.T) {
	t.Parallel()
	const key = "sk-live-SECRET-9191"
	// The server echoes the key it got (not the header): a request header in the error text
	// can then only come from a dump of the request.
	echoed := func(r *http.Request) string {
		return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + r.Header.Get("X-Api-Key")
	}
	replies := []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"an HTTP error echoing the key in its body and a header", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Echo", echoed(r))
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","code":"invalid_api_key","message":"bad key %s"}}`, echoed(r))
		}},
		{"an HTML error page echoing the key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "<html>upstream said %s</html>", echoed(r))
		}},
		{"an error inside the stream echoing the key", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"code\":\"invalid_request_error\",\"message\":\"bad %s\"}}\n\n", echoed(r))
		}},
	}
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		for _, rp := range replies {
			t.Run(string(kind)+": "+rp.name, func(t *testing.T) {
				t.Parallel()
				srv := httptest.NewServer(http.HandlerFunc(rp.serve))
				t.Cleanup(srv.Close)
				p, err := model.New(config.ProviderConfig{Kind: kind, BaseURL: srv.URL, APIKeyEnv: "K", Model: "m"}, "p",
					func(string) string { return key }, srv.Client())
				if err != nil {
					t.Fatal(err)
				}
				_, err = p.Stream(context.Background(), userRequest("hi"), nil)
				var me *model.Error
				if !errors.As(err, &me) {
					t.Fatalf("err = %v, want a *model.Error", err)
				}
				var oe *openai.Error
				var ae *anthropic.Error
				if errors.As(err, &oe) || errors.As(err, &ae) {
					t.Errorf("err = %v keeps the SDK's error (and its request headers) in its chain", err)
				}
				var logged bytes.Buffer
				slog.New(slog.NewJSONHandler(&logged, nil)).Error("model failed", "err", err, "detail", me)
				asJSON, _ := json.Marshal(me)
				for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", me), fmt.Sprintf("%+v", *me),
					logged.String(), string(asJSON)} {
					if strings.Contains(text, key) {
						t.Errorf("the key appears in %q", text)
					}
					for _, h := range []string{"bearer", "authorization", "x-api-key", "x-stainless", "user-agent"} {
						if strings.Contains(strings.ToLower(text), h) {
							t.Errorf("a request header (%s) appears in %q", h, text)
						}
					}
				}
			})
		}
	}
}
