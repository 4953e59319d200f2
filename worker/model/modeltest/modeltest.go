// Package modeltest owns a local OpenAI Responses-API server for tests: it streams scripted
// replies as real server-sent events (text, function calls, a stream cut before
// response.completed, a response.incomplete, HTTP errors) and records every request, so a
// test can drive the real model client end to end and assert what was sent (store, include
// and prompt_cache_key included).
//
//	srv := modeltest.NewResponsesServer(t)
//	srv.Enqueue(modeltest.ToolCalls(model.Call("c1", "read_file", `{"path":"a.go"}`)), modeltest.Text("done"))
//	p := srv.Provider(t) // the real openai-responses client, pointed at srv
//	... run the loop with p ...
//	reqs := srv.Requests() // reqs[1].Input holds c1's function_call and function_call_output
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems/config"
)

// Test credentials the server expects; the key is fake and only ever sent to this server.
const (
	KeyEnv = "MODELTEST_API_KEY"
	Key    = "sk-modeltest-not-a-real-key"
	Model  = "modeltest-model"
)

// Reply is one scripted server reply. A zero Status streams Items (or Raw); a non-zero Status
// answers with that HTTP status, Header and Body instead.
type Reply struct {
	ID    string // response id; generated when empty
	Items []model.Item
	Usage model.Usage
	// Cut closes the stream after the items but before response.completed.
	Cut bool
	// Block streams response.created, closes Started (when set), then holds the stream open
	// until the client goes away or the server closes: a model "still thinking".
	Block   bool
	Started chan struct{}
	// Raw, when set, is written verbatim as the stream body (recorded SSE).
	Raw string
	// Incomplete, when set, ends the stream with response.incomplete for this reason
	// ("max_output_tokens", "content_filter") instead of response.completed.
	Incomplete string

	Status int
	Header http.Header
	Body   string
}

// Text is a reply with one assistant message.
func Text(text string) Reply {
	return Reply{Items: []model.Item{{Kind: model.KindMessage, Role: model.RoleAssistant, Text: text}},
		Usage: model.Usage{InputTokens: 100, OutputTokens: 10}}
}

// ToolCalls is a reply with function calls (build them with model.Call).
func ToolCalls(calls ...model.Item) Reply {
	return Reply{Items: calls, Usage: model.Usage{InputTokens: 100, OutputTokens: 20}}
}

// Cut is a reply streaming partialText, then closing before response.completed.
func Cut(partialText string) Reply {
	r := Text(partialText)
	r.Cut = true
	return r
}

// Blocked is a reply that never finishes; started is closed once the stream is open.
func Blocked(started chan struct{}) Reply { return Reply{Block: true, Started: started} }

// HTTPError is a reply with status and an OpenAI error body of that code and message.
func HTTPError(status int, code, message string) Reply {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": code, "code": code, "param": nil}})
	return Reply{Status: status, Body: string(body)}
}

// RateLimited is a 429 whose Retry-After header is retryAfter (e.g. "3"); empty sends none
// and says "try again in 3s" in the message instead.
func RateLimited(retryAfter string) Reply {
	r := HTTPError(http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached. Please try again in 3s.")
	if retryAfter != "" {
		r.Header = http.Header{"Retry-After": {retryAfter}}
	}
	return r
}

// ServerError is a 500 (transient).
func ServerError() Reply {
	return HTTPError(http.StatusInternalServerError, "server_error", "The server had an error while processing your request.")
}

// InvalidRequest is a 400 invalid_request_error.
func InvalidRequest(message string) Reply {
	return HTTPError(http.StatusBadRequest, "invalid_request_error", message)
}

// ContextWindowExceeded is the 400 OpenAI sends when the input is over the context window.
func ContextWindowExceeded() Reply {
	return HTTPError(http.StatusBadRequest, "context_length_exceeded",
		"Your input exceeds the context window of this model. Please adjust your input and try again.")
}

// QuotaExceeded is the 429 insufficient_quota OpenAI sends when billing stops requests.
func QuotaExceeded() Reply {
	return HTTPError(http.StatusTooManyRequests, "insufficient_quota",
		"You exceeded your current quota, please check your plan and billing details.")
}

// Request is one recorded request. The Authorization header is redacted.
type Request struct {
	Path            string
	Header          http.Header
	Body            json.RawMessage
	Model           string
	Instructions    string
	Input           []InputItem
	Tools           []string // function tool names, in order
	MaxOutputTokens int
	Stream          bool
	Store           *bool    // nil when absent
	Include         []string // what the response should include ("reasoning.encrypted_content")
	PromptCacheKey  string
	// Authorized reports whether the request carried the expected key.
	Authorized bool
}

// InputItem is one Responses input item as sent.
type InputItem struct {
	Type      string // message | function_call | function_call_output | reasoning
	Role      string
	Content   string // message text (content parts joined)
	CallID    string
	Name      string
	Arguments string
	Output    string
	Raw       json.RawMessage
}

// Server is a local Responses-API server. Create it with NewResponsesServer.
type Server struct {
	URL string

	t    testing.TB
	srv  *httptest.Server
	done chan struct{}

	mu       sync.Mutex
	queue    []Reply
	requests []Request
}

// NewResponsesServer starts a server closed at the end of the test.
func NewResponsesServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.done) // releases blocked streams so Close can return
		s.srv.Close()
	})
	return s
}

// Enqueue appends replies; each request takes the next one.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Pending returns how many queued replies are still unserved.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Config is an openai-responses provider config pointing at s.
func (s *Server) Config() config.ProviderConfig {
	return config.ProviderConfig{Kind: model.KindOpenAIResponses, BaseURL: s.URL, APIKeyEnv: KeyEnv, Model: Model}
}

// Getenv returns Key for KeyEnv, as the environment would.
func (s *Server) Getenv(name string) string {
	if name == KeyEnv {
		return Key
	}
	return ""
}

// Provider returns the real Responses client pointed at s.
func (s *Server) Provider(t testing.TB) model.Provider {
	t.Helper()
	p, err := model.New(s.Config(), "modeltest", s.Getenv, s.srv.Client())
	if err != nil {
		t.Fatalf("modeltest: new provider: %v", err)
	}
	return p
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := record(r)
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	n := len(s.requests)
	var reply Reply
	ok := len(s.queue) > 0
	valid := r.Method == http.MethodPost && r.URL.Path == "/responses" && rec.Authorized
	if ok && valid { // a rejected request leaves the queue alone
		reply, s.queue = s.queue[0], s.queue[1:]
	}
	s.mu.Unlock()

	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/responses":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"message":"no such endpoint","type":"not_found","code":"not_found"}}`)
		return
	case !rec.Authorized:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	case !ok:
		s.t.Errorf("modeltest: request %d has no queued reply", n)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":"modeltest: request %d has no queued reply","type":"modeltest_no_reply","code":"modeltest_no_reply"}}`, n)
		return
	}
	if reply.Status != 0 {
		for k, vs := range reply.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		fmt.Fprint(w, reply.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if reply.Raw != "" {
		fmt.Fprint(w, reply.Raw)
		flush()
		return
	}
	id := reply.ID
	if id == "" {
		id = fmt.Sprintf("resp_%d", n)
	}
	for _, ev := range Events(id, reply) {
		fmt.Fprint(w, ev)
		flush()
		if reply.Block {
			if reply.Started != nil {
				close(reply.Started)
			}
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			return
		}
	}
}

// record parses a request for assertions.
func record(r *http.Request) Request {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	h := r.Header.Clone()
	auth := h.Get("Authorization")
	if auth != "" {
		h.Set("Authorization", "[redacted]")
	}
	rec := Request{Path: r.URL.Path, Header: h, Body: body, Authorized: auth == "Bearer "+Key}
	var wire struct {
		Model        string            `json:"model"`
		Instructions string            `json:"instructions"`
		Input        []json.RawMessage `json:"input"`
		Tools        []struct {
			Name string `json:"name"`
		} `json:"tools"`
		MaxOutputTokens int      `json:"max_output_tokens"`
		Stream          bool     `json:"stream"`
		Store           *bool    `json:"store"`
		Include         []string `json:"include"`
		PromptCacheKey  string   `json:"prompt_cache_key"`
	}
	if json.Unmarshal(body, &wire) != nil {
		return rec
	}
	rec.Model, rec.Instructions, rec.MaxOutputTokens, rec.Stream = wire.Model, wire.Instructions, wire.MaxOutputTokens, wire.Stream
	rec.Store, rec.Include, rec.PromptCacheKey = wire.Store, wire.Include, wire.PromptCacheKey
	for _, t := range wire.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	for _, raw := range wire.Input {
		rec.Input = append(rec.Input, inputItem(raw))
	}
	return rec
}

func inputItem(raw json.RawMessage) InputItem {
	var w struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    string          `json:"output"`
	}
	_ = json.Unmarshal(raw, &w)
	it := InputItem{Type: w.Type, Role: w.Role, CallID: w.CallID, Name: w.Name, Arguments: w.Arguments, Output: w.Output, Raw: raw}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	var s string
	if json.Unmarshal(w.Content, &s) == nil {
		it.Content = s
		return it
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(w.Content, &parts) == nil {
		for _, p := range parts {
			it.Content += p.Text
		}
	}
	return it
}
