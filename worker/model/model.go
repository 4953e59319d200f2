// Package model puts model providers behind one small streaming interface: the OpenAI
// Responses and Chat Completions APIs (and any compatible server: vLLM, Ollama, LiteLLM),
// Anthropic Messages, a scripted provider for tests and a replay provider that plays a
// recording. Providers do not retry: the agent loop owns retries, rebuilding every retry from
// its recorded history. Errors carry a class (workitems.ErrorClass) and, when the server gave
// one, the delay to wait.
//
// # On the vendors' SDKs, and what stays ours
//
// openai-responses and openai-chat are built on github.com/openai/openai-go/v3, anthropic on
// github.com/anthropics/anthropic-sdk-go/v2: their request types (every field we send is an
// SDK param), their SSE decoder and typed stream, their event and chunk types, and their
// error types (*openai.Error, *anthropic.Error, *ssestream.StreamError, found with
// errors.As). The SDKs' own retries are off (WithMaxRetries(0)): each Stream call is exactly
// one HTTP request, and the loop retries, rebuilt from history. The services are built with
// our options only, never with the SDKs' NewClient, which would read OPENAI_API_KEY,
// OPENAI_BASE_URL, ANTHROPIC_API_KEY, custom headers or a profile file from the environment.
//
// What the SDKs do not do for us stays here:
//
//   - A per-call middleware (an SDK request option, exchange.middleware): the idle watchdog
//     (the SDKs have a whole-request timeout, not "no byte for 5 minutes"), a 64 KiB bound on
//     error bodies (the SDKs read them whole), and refusing a 200 answer that is JSON instead
//     of a stream (the SDKs would read it as an empty stream, a cut retried in vain). It keeps
//     the error response's headers and body for the classifier.
//   - Chat Completions goes through the SDK's generic Post with the SDK's decoder and stream
//     assembled here, because Chat.Completions.NewStreaming hides whether the stream ended
//     with "data: [DONE]" or was cut; doneDecoder notes the [DONE].
//   - Anthropic likewise: Messages.NewStreaming drops every event without an "event:" line
//     (some compatible servers send data lines only), and an error event behind our decoder
//     would no longer be typed; antDecoder gives such events their type from the data and
//     takes error events itself. The key goes in x-api-key (the SDK's WithAPIKey sends a
//     bearer token, which compatible proxies do not read). anthropic-version is the SDK's
//     (AnthropicVersion).
//   - Error classes (below): the SDK types give the status, headers, code and type; the codes
//     are compared whole against typed lists built from the SDKs' constants
//     (responses.ResponseErrorCode, anthropic.ErrorType). Where a vendor sends no code for a
//     condition, its documented message is the signal, looked for in the message field only
//     ("prompt is too long", "maximum context length", "credit balance is too low", "exceeded
//     your current quota"). Body fields the SDK left empty (vLLM's top-level message,
//     Ollama's {"error":"text"}, a type Anthropic's SDK does not know) are read from the
//     kept body.
//   - Secrets: an SDK error value holds the request, whose headers carry the key, and
//     Anthropic's prints the raw body; neither is kept in an *Error's chain. Messages are
//     built from the fields and scrubbed of the key.
//   - The stop-reason mapping (EndTurn, needs_follow_up, ErrTruncated), usage normalisation,
//     Cost from the price table, the history → request mapping (turn merging, dropped
//     reasoning), the scripted and replay providers.
//
// # Building a provider
//
// New builds the provider of a config.ProviderConfig: kind openai-responses (POST
// {base}/responses), openai-chat (POST {base}/chat/completions), anthropic (POST
// {base}/v1/messages) or replay. The base URL defaults to the vendor's; set it to use any
// compatible server. The key is read from the environment variable the config names; an
// empty api_key_env means the server needs no key. The key is sent only in the auth header
// and is scrubbed from every error message.
//
// # Responses
//
// A Response holds assistant messages and function calls in output order. EndTurn is false
// when the model called a tool, when Anthropic stopped with tool_use / pause_turn, and when
// a Responses answer ended incomplete at max_output_tokens: the model is not done, so the
// loop asks again (needs_follow_up) with what it finished in history (the partial message is
// kept; a function call cut mid-arguments and an unfinished reasoning item are dropped). A
// response stopped by a content filter, Chat's finish_reason length, Anthropic's max_tokens,
// refusal or model_context_window_exceeded is not returned: it is an invalid_input *Error
// wrapping ErrTruncated. Anthropic's usage is normalised: InputTokens counts fresh input,
// cache writes and cache reads; CachedInputTokens counts the reads (cache writes are priced
// as plain input by Cost).
//
// Responses requests are stateless, as Codex sends them: store is false, include asks for
// reasoning.encrypted_content, and the reasoning items (KindReasoning, the server's item in
// Raw) go back in place in the next request when they carry encrypted content (else they
// would name a stored item, and are dropped). Request.CacheKey becomes prompt_cache_key; the
// agent loop sets it per attempt with CacheKeyFor, so an attempt's requests share the
// server's prompt cache.
//
// # Error classes
//
//	HTTP 429, 5xx (incl. 529), 408, connection reset/refused, stream cut (ErrStreamCut), a
//	  stream silent for the idle timeout (ErrStreamIdle), a corrupt event: transient
//	  with RetryAfter from retry-after-ms, Retry-After (seconds or HTTP date) or a
//	  "try again in 3s" message
//	insufficient_quota, billing_hard_limit_reached, billing_not_active, billing_error (any
//	  status): permission, QuotaExceeded (a person must act; not retried)
//	400/413/422 with code context_length_exceeded or a message naming the context window:
//	  invalid_input, ContextWindowExceeded
//	other 400/413/422: invalid_input; 401/403: permission; 404: not_found; 409: conflict;
//	  any other status: unknown
//	an error inside an accepted stream (response.failed, error events, a Chat chunk holding
//	  "error", a 200 JSON error body): quota and context window as above; server_error,
//	  rate_limit_exceeded, vector_store_timeout, rate_limit_error, api_error,
//	  overloaded_error, timeout_error: transient; invalid_request_error and the other
//	  Responses codes (prompt, image, policy): invalid_input; authentication_error,
//	  permission_error: permission; not_found_error: not_found; anything else: transient
//
// Providers are safe for concurrent use. When ctx ends, Stream returns an error wrapping
// ctx.Err() and never a *Error, so a cancellation is never mistaken for a transient failure.
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
	"outerloop/workitems/config"
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
type Prices = config.Prices

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
