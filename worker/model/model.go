// Package model puts model providers behind one small streaming interface: the OpenAI
// Responses and Chat Completions APIs (and any compatible server: vLLM, Ollama, LiteLLM),
// Anthropic Messages, a scripted provider for tests and a replay provider that plays a
// recording. Providers do not retry: the agent loop owns retries, rebuilding every retry from
// its recorded history. Errors carry a class (workitems.ErrorClass) and, when the server gave
// one, the delay to wait.
//
// # Why hand-written clients
//
// The HTTP clients use net/http and a small server-sent-events reader instead of the official
// SDKs. The SDKs retry on their own (which would hide failures from the loop's retry budget and
// events), map errors into their own types, and differ per vendor; what the loop needs is a few
// request fields, a handful of stream events, the HTTP status, the Retry-After header and the
// error code, all of which are short to read directly and easy to test against recorded
// streams. Each Stream call is exactly one HTTP request.
//
// # Building a provider
//
// New builds the provider of a workitems.ProviderConfig: kind openai-responses (POST
// {base}/responses), openai-chat (POST {base}/chat/completions), anthropic (POST
// {base}/v1/messages) or replay. The base URL defaults to the vendor's; set it to use any
// compatible server. The key is read from the environment variable the config names; an
// empty api_key_env means the server needs no key. The key is sent only in the auth header
// and is scrubbed from every error message.
//
// # Responses
//
// A Response holds assistant messages and function calls in output order (OpenAI reasoning
// items are kept as KindReasoning with Raw; they are sent back only when they carry
// encrypted content). EndTurn is false when the model called a tool (or Anthropic stopped
// with tool_use / pause_turn). A response cut by the output-token limit or a content filter is
// not returned: it is an invalid_input *Error wrapping ErrTruncated. Anthropic's usage is
// normalised: InputTokens counts fresh input, cache writes and cache reads;
// CachedInputTokens counts the reads (cache writes are priced as plain input by Cost).
//
// # Error classes
//
//	HTTP 429, 5xx (incl. 529), 408, connection reset/refused, stream cut (ErrStreamCut), a
//	  stream silent for the idle timeout (ErrStreamIdle), a corrupt event: transient
//	  with RetryAfter from retry-after-ms, Retry-After (seconds or HTTP date) or a
//	  "try again in 3s" message
//	insufficient_quota (any status): permission, QuotaExceeded (a person must act; not retried)
//	400/413/422 naming the context window ("context_length_exceeded", "prompt is too long",
//	  "maximum context length"): invalid_input, ContextWindowExceeded
//	other 400/413/422: invalid_input; 401/403: permission; 404: not_found; 409: conflict;
//	  any other status: unknown
//	an error inside an accepted stream (response.failed, error events): by its code as above,
//	  else transient
//
// Providers are safe for concurrent use. When ctx ends, Stream returns an error wrapping ctx.Err() and never a *Error, so a
// cancellation is never mistaken for a transient failure.
//
// # Recordings (the replay provider)
//
// A recording is a JSON-lines file played one line per request, in order; blank lines and
// lines starting with # are skipped, unknown fields are rejected. A line is either a response
// (the Response JSON of this package, optionally with deltas to stream) or an error:
//
//	{"response":{"id":"r1","items":[{"kind":"message","role":"assistant","text":"Looking."},{"kind":"function_call","call_id":"c1","name":"read_file","arguments":"{\"path\":\"a.go\"}"}],"usage":{"input_tokens":900,"cached_input_tokens":0,"output_tokens":30}},"deltas":["Looking."]}
//	{"error":{"class":"transient","status":429,"message":"rate limited, try again in 3s","retry_after":"3s"}}
//	{"response":{"items":[{"kind":"message","role":"assistant","text":"Done."}],"end_turn":true}}
//
// An omitted end_turn is true unless the response calls a tool. An error line may also set
// context_window_exceeded and quota_exceeded; retry_after is a Go duration or seconds. A
// request past the last line fails with an invariant_violation wrapping ErrScriptExhausted.
// testdata/example_recording.jsonl is a small example.
package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"outerloop/workitems"
)

// Provider streams one model response per call.
type Provider interface {
	// Name is the provider's configured name (for metrics and events).
	Name() string
	// Stream sends req and calls onDelta for each piece of streamed text as it arrives (may be
	// nil). It returns the complete response once the stream's final event arrived, or an
	// error (an *Error where the failure is classified). A stream that ends before its final
	// event is a transient *Error.
	Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error)
}

// Role of a message.
type Role string

// The roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system" // developer/system instructions inside history
)

// ItemKind is the kind of a history item.
type ItemKind string

// The history item kinds, mirroring the Responses API.
const (
	KindMessage            ItemKind = "message"
	KindFunctionCall       ItemKind = "function_call"
	KindFunctionCallOutput ItemKind = "function_call_output"
	KindReasoning          ItemKind = "reasoning" // opaque, passed back as is where supported
)

// Item is one entry of conversation history, and of a response.
type Item struct {
	Kind      ItemKind `json:"kind"`
	Role      Role     `json:"role,omitempty"`
	Text      string   `json:"text,omitempty"`
	CallID    string   `json:"call_id,omitempty"`
	Name      string   `json:"name,omitempty"`
	Arguments string   `json:"arguments,omitempty"` // JSON text, as the model wrote it
	Output    string   `json:"output,omitempty"`
	// Raw keeps a provider-specific item (e.g. encrypted reasoning) to send back unchanged.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema
}

// Request is one sampling request, built from recorded history.
type Request struct {
	Model           string `json:"model,omitempty"` // overrides the provider's configured model
	Instructions    string `json:"instructions,omitempty"`
	Input           []Item `json:"input"`
	Tools           []Tool `json:"tools,omitempty"`
	MaxOutputTokens int    `json:"max_output_tokens,omitempty"`
	// CacheKey groups requests that share a prompt prefix for the server's prompt cache
	// (Responses prompt_cache_key); CacheKeyFor derives it from the attempt.
	CacheKey string `json:"cache_key,omitempty"`
}

// CacheKeyFor returns the prompt-cache key of one attempt, named by attemptID (the item id
// and the attempt number, "item/2"): stable across the attempt's requests, its retries and
// resumes included, different per attempt, and a hash, so it says nothing about the item
// (and is derived from no secret).
func CacheKeyFor(attemptID string) string {
	sum := sha256.Sum256([]byte(attemptID))
	return "outerloop-" + hex.EncodeToString(sum[:16])
}

// Usage is the token count of one response.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// Response is a complete model response.
type Response struct {
	ID    string `json:"id,omitempty"`
	Items []Item `json:"items"` // assistant messages and function calls, in order
	// EndTurn false means the model wants another request even without tool calls.
	EndTurn bool  `json:"end_turn"`
	Usage   Usage `json:"usage"`
}

// ToolCalls returns the function calls of r, in order.
func (r *Response) ToolCalls() []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Kind == KindFunctionCall {
			out = append(out, it)
		}
	}
	return out
}

// Text returns the concatenated assistant text of r.
func (r *Response) Text() string {
	s := ""
	for _, it := range r.Items {
		if it.Kind == KindMessage && it.Role == RoleAssistant {
			s += it.Text
		}
	}
	return s
}

// Delta is a piece of a streaming response, for progress display.
type Delta struct {
	Text string
}

// Prices is re-exported from workitems for convenience.
type Prices = workitems.Prices

// Cost returns the USD cost of u under p.
func Cost(p Prices, u Usage) float64 {
	uncached := max(0, u.InputTokens-u.CachedInputTokens)
	return (float64(uncached)*p.InputPerMTok + float64(u.CachedInputTokens)*p.CachedInputPerMTok +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// Error is a classified provider failure.
type Error struct {
	Provider   string
	Class      workitems.ErrorClass
	StatusCode int           // HTTP status, 0 when none
	RetryAfter time.Duration // server-given delay; 0 when none
	// ContextWindowExceeded marks the context as full (the loop must compact or stop).
	ContextWindowExceeded bool
	QuotaExceeded         bool
	Message               string // never contains the API key
	Err                   error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("model %s: %s", e.Provider, e.Class)
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// As lets errors.As (and so workitems.ClassOf) see an *Error as a *workitems.ClassError of the
// same class.
func (e *Error) As(target any) bool {
	if ce, ok := target.(**workitems.ClassError); ok {
		*ce = &workitems.ClassError{Class: e.Class, Err: e}
		return true
	}
	return false
}

// Retryable reports whether the loop should retry err with backoff.
func Retryable(err error) bool {
	var me *Error
	if errors.As(err, &me) {
		return me.Class == workitems.ClassTransient
	}
	return false
}
