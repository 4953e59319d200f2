package model_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestHTTPErrorClassification(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	oai := func(code, msg string) string {
		return `{"error":{"message":"` + msg + `","type":"` + code + `","code":"` + code + `"}}`
	}
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		class      workitems.ErrorClass
		retryAfter time.Duration
		ctxFull    bool
		quota      bool
	}{
		{name: "429 without a delay is transient", status: 429, body: oai("rate_limit_exceeded", "slow down"),
			class: workitems.ClassTransient},
		{name: "Retry-After in seconds is the delay", status: 429, header: http.Header{"Retry-After": {"7"}},
			body: oai("rate_limit_exceeded", "slow down"), class: workitems.ClassTransient, retryAfter: 7 * time.Second},
		{name: "Retry-After as an HTTP date counts from the clock", status: 503,
			header: http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}},
			body:   "unavailable", class: workitems.ClassTransient, retryAfter: 10 * time.Second},
		{name: "retry-after-ms wins over Retry-After", status: 429,
			header: http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}},
			body:   oai("rate_limit_exceeded", "x"), class: workitems.ClassTransient, retryAfter: 1500 * time.Millisecond},
		{name: "a try-again message gives the delay", status: 429,
			body:  oai("rate_limit_exceeded", "Rate limit reached for gpt-5 on tokens per min. Please try again in 1.898s."),
			class: workitems.ClassTransient, retryAfter: 1898 * time.Millisecond},
		{name: "500 is transient", status: 500, body: oai("server_error", "oops"), class: workitems.ClassTransient},
		{name: "a 502 with an HTML body is transient", status: 502, body: "<html>Bad Gateway</html>", class: workitems.ClassTransient},
		{name: "529 overloaded is transient", status: 529,
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, class: workitems.ClassTransient},
		{name: "400 invalid request is invalid input", status: 400, body: oai("invalid_request_error", "bad"),
			class: workitems.ClassInvalidInput},
		{name: "400 context_length_exceeded marks the context full", status: 400,
			body:  oai("context_length_exceeded", "Your input exceeds the context window of this model."),
			class: workitems.ClassInvalidInput, ctxFull: true},
		{name: "400 prompt is too long marks the context full", status: 400,
			body:  `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`,
			class: workitems.ClassInvalidInput, ctxFull: true},
		{name: "a vLLM maximum context length message marks the context full", status: 400,
			body:  `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.","type":"BadRequestError","code":400}`,
			class: workitems.ClassInvalidInput, ctxFull: true},
		{name: "insufficient_quota is a quota permission error", status: 429,
			body: oai("insufficient_quota", "You exceeded your current quota"), class: workitems.ClassPermission, quota: true},
		{name: "a too-low credit balance is a quota permission error", status: 400,
			body:  `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`,
			class: workitems.ClassPermission, quota: true},
		{name: "401 is permission", status: 401, body: oai("invalid_api_key", "Incorrect API key"), class: workitems.ClassPermission},
		{name: "403 is permission", status: 403,
			body: `{"type":"error","error":{"type":"permission_error","message":"no"}}`, class: workitems.ClassPermission},
		{name: "404 is not found", status: 404, body: oai("model_not_found", "The model does not exist"), class: workitems.ClassNotFound},
		{name: "409 is a conflict", status: 409, body: oai("conflict", "busy"), class: workitems.ClassConflict},
		{name: "an unexpected status is unknown", status: 418, body: "teapot", class: workitems.ClassUnknown},
	}
	for _, kind := range []workitems.ProviderKind{model.KindOpenAIResponses, model.KindOpenAIChat, model.KindAnthropic} {
		for _, tt := range tests {
			t.Run(string(kind)+": "+tt.name, func(t *testing.T) {
				t.Parallel()
				fs := newFixtureServer(t, canned{status: tt.status, header: tt.header, body: tt.body})
				p, err := model.New(config.ProviderConfig{Kind: kind, BaseURL: fs.URL, APIKeyEnv: "K", Model: "m"}, "p", key,
					fs.Client(), model.WithClock(fakeclock.New(now)))
				if err != nil {
					t.Fatal(err)
				}
				_, err = p.Stream(context.Background(), userRequest("hi"), nil)
				var me *model.Error
				if !errors.As(err, &me) {
					t.Fatalf("err = %v, want *model.Error", err)
				}
				if me.Class != tt.class || me.StatusCode != tt.status || me.RetryAfter != tt.retryAfter ||
					me.ContextWindowExceeded != tt.ctxFull || me.QuotaExceeded != tt.quota || me.Provider != "p" {
					t.Errorf("error = %+v\nwant class %s status %d retry %v ctxFull %v quota %v",
						me, tt.class, tt.status, tt.retryAfter, tt.ctxFull, tt.quota)
				}
				if len(fs.requests()) != 1 {
					t.Errorf("requests = %d, want 1: providers never retry", len(fs.requests()))
				}
			})
		}
	}
}

func TestTransportFailuresAreTransient(t *testing.T) {
	t.Parallel()
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close with RST: a connection reset
		}
		conn.Close()
	}))
	t.Cleanup(reset.Close)
	midStream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		w.Write([]byte("data: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-stream
	}))
	t.Cleanup(midStream.Close)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()

	tests := []struct {
		name string
		url  string
	}{
		{"a connection reset before the response is transient", reset.URL},
		{"a connection dropped mid-stream is transient", midStream.URL},
		{"a refused connection is transient", refusedURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := model.New(config.ProviderConfig{Kind: model.KindOpenAIResponses, BaseURL: tt.url, Model: "m"}, "p", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Class != workitems.ClassTransient || !model.Retryable(err) {
				t.Errorf("err = %v, want a transient *model.Error", err)
			}
		})
	}
}

func TestRetryAfterFromMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg  string
		want time.Duration
		ok   bool
	}{
		{"rate limited, try again in 3s", 3 * time.Second, true},
		{"Please try again in 1.898s.", 1898 * time.Millisecond, true},
		{"Please try again in 20ms.", 20 * time.Millisecond, true},
		{"Please try again in 6m0s.", 6 * time.Minute, true},
		{"try again in 2 seconds", 2 * time.Second, true},
		{"Retry after 1 minute", time.Minute, true},
		{"try again in 500 milliseconds", 500 * time.Millisecond, true},
		{"try again later", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run("reads "+tt.msg, func(t *testing.T) {
			t.Parallel()
			got, ok := model.RetryAfterFromMessage(tt.msg)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RetryAfterFromMessage(%q) = %v, %v; want %v, %v", tt.msg, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		v    string
		want time.Duration
		ok   bool
	}{
		{"seconds", "3", 3 * time.Second, true},
		{"fractional seconds", "0.5", 500 * time.Millisecond, true},
		{"an HTTP date", "Sun, 29 Nov 2026 10:01:00 GMT", time.Minute, true},
		{"a date in the past", "Sun, 29 Nov 2026 09:00:00 GMT", 0, false},
		{"zero", "0", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		t.Run("parses "+tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := model.ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestASilentStreamFailsAsIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers: no headers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); silent.Close() })
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Blocked(nil))

	tests := []struct {
		name string
		cfg  config.ProviderConfig
	}{
		{"a server sending no headers is idle", config.ProviderConfig{Kind: model.KindOpenAIChat, BaseURL: silent.URL, Model: "m"}},
		{"a stream stalling after its first event is idle", srv.Config()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := model.New(tt.cfg, "p", srv.Getenv, nil, model.WithIdleTimeout(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Stream(context.Background(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Class != workitems.ClassTransient || !errors.Is(err, model.ErrStreamIdle) {
				t.Errorf("err = %v, want a transient ErrStreamIdle", err)
			}
		})
	}
}

func TestANonStreamingAnswerIsNotRetriedAsACut(t *testing.T) {
	t.Parallel()
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name  string
		body  string
		class workitems.ErrorClass
	}{
		{"a 200 with an error body is classified by its code", `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`,
			workitems.ClassTransient},
		{"a 200 with a whole JSON response is invalid input", `{"id":"chatcmpl-1","choices":[]}`, workitems.ClassInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs := newFixtureServer(t, canned{status: 200, header: jsonHeader, body: tt.body})
			_, err := newChat(t, fs).Stream(context.Background(), userRequest("hi"), nil)
			var me *model.Error
			if !errors.As(err, &me) || me.Class != tt.class || errors.Is(err, model.ErrStreamCut) {
				t.Errorf("err = %v, want class %s", err, tt.class)
			}
		})
	}
}
