// Package agenttest owns scripted model servers for testing external agents (Codex, Claude
// Code) without a network: a Responses-API server and a Messages-API server, both streaming
// server-sent events from 127.0.0.1, replying to each request from a script.
package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Call is one tool call the scripted model makes.
type Call struct {
	Name      string // Codex: "exec_command"; Claude Code: "Bash", "Edit", …
	Arguments string // JSON object, e.g. {"cmd":"go test ./..."} or {"command":"ls"}
}

// Usage is the token usage a reply reports.
type Usage struct {
	InputTokens       int64
	CachedInputTokens int64
	OutputTokens      int64
}

// Reply is what the scripted model answers to one request.
type Reply struct {
	Text   string // assistant text (may be empty when there are calls)
	Calls  []Call
	Usage  Usage
	Status int    // non-zero: answer with this HTTP status and an error body instead
	Error  string // the error message with Status
}

// Request is one request the agent sent.
type Request struct {
	N      int // from 0
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// Contains reports whether the raw request body contains s (e.g. a tool output).
func (r Request) Contains(s string) bool { return strings.Contains(string(r.Raw), s) }

// Script answers request n.
type Script func(req Request) Reply

// Sequence answers the n-th request with replies[n], repeating the last one after the end.
func Sequence(replies ...Reply) Script {
	return func(req Request) Reply {
		return replies[min(req.N, len(replies)-1)]
	}
}

// Server is a scripted model server on 127.0.0.1.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// newServer serves the model endpoint at path with stream; other paths answer 404.
func newServer(t testing.TB, path string, script Script, stream func(w http.ResponseWriter, req Request, rep Reply)) *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if r.URL.Path != path || r.Method != http.MethodPost {
			http.Error(w, `{"error":{"type":"not_found_error","message":"no such endpoint"}}`, http.StatusNotFound)
			return
		}
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		req := Request{N: len(s.requests), Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw}
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		rep := script(req)
		if rep.Status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.Status)
			msg, _ := json.Marshal(rep.Error)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":%s}}`, msg)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		stream(w, req, rep)
	}))
	t.Cleanup(s.Close)
	return s
}

// sse writes one server-sent event.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// obj is a JSON object literal.
type obj = map[string]any
