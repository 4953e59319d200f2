package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"outerloop/workitems"
)

// Sentinel errors found with errors.Is in an *Error's chain.
var (
	// ErrStreamCut means the stream ended before its final event (transient).
	ErrStreamCut = errors.New("model stream ended before its final event")
	// ErrTruncated means the model stopped at the output token limit or a content filter; the
	// partial response is not returned (invalid_input: retrying the same request repeats it).
	ErrTruncated = errors.New("model response truncated")
	// ErrStreamIdle means nothing arrived for the idle timeout (transient).
	ErrStreamIdle = errors.New("model stream idle")
	// ErrMissingKey means the provider's API key variable is unset or empty.
	ErrMissingKey = errors.New("model api key not set")
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// maxMessage bounds the server message kept in an *Error.
const maxMessage = 600

// apiError is the error detail common to the OpenAI ({"error":{message,type,code}}) and
// Anthropic ({"type":"error","error":{type,message}}) bodies and stream events.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"` // a string at OpenAI, sometimes a number at compatible servers
}

func (a apiError) code() string {
	switch c := a.Code.(type) {
	case string:
		return c
	case float64:
		return strconv.FormatFloat(c, 'f', -1, 64)
	}
	return ""
}

// label names the error by its code and type, each once ("rate_limit_exceeded",
// "invalid_request_error", "overloaded_error"), or "error" when it has neither.
func (a apiError) label() string {
	c, t := a.code(), a.Type
	switch {
	case c == "" && t == "":
		return "error"
	case c == "" || c == t:
		return t
	case t == "":
		return c
	}
	return c + " (" + t + ")"
}

// parseAPIError extracts the error detail from a JSON error body; ok is false when the body
// holds none.
func parseAPIError(body []byte) (apiError, bool) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    any             `json:"code"`
	}
	if json.Unmarshal(body, &env) != nil {
		return apiError{}, false
	}
	var a apiError
	if len(env.Error) > 0 && env.Error[0] == '{' {
		if json.Unmarshal(env.Error, &a) == nil && (a.Message != "" || a.Type != "" || a.code() != "") {
			return a, true
		}
	}
	if len(env.Error) > 0 && env.Error[0] == '"' { // {"error":"text"} (Ollama, some proxies)
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			return apiError{Message: s}, true
		}
	}
	a = apiError{Message: env.Message, Type: env.Type, Code: env.Code}
	if a.Message != "" || a.code() != "" {
		return a, true
	}
	return apiError{}, false
}

// Known error codes and types of the OpenAI and Anthropic APIs.
var (
	contextWindowMarkers = []string{"context_length_exceeded", "prompt is too long", "context window",
		"maximum context length", "context length", "too many tokens", "input is too long"}
	quotaMarkers = []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
		"exceeded your current quota", "credit balance is too low"}
	transientMarkers = []string{"rate_limit", "server_error", "overloaded", "api_error", "timeout", "unavailable",
		"internal_error", "server_is_overloaded", "slow_down"}
)

func containsAny(s string, markers []string) bool {
	s = strings.ToLower(s)
	for _, m := range markers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// retryInRe matches "try again in 3s", "try again in 1.5 seconds", "try again in 20ms",
// "retry after 6m0s".
var retryInRe = regexp.MustCompile(`(?i)(?:try again|retry) (?:in|after) ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+|\d+(?:\.\d+)?\s*(?:milliseconds?|seconds?|secs?|minutes?|mins?))\b`)

// RetryAfterFromMessage returns the delay a server message asks for ("try again in 3s").
func RetryAfterFromMessage(msg string) (time.Duration, bool) {
	m := retryInRe.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	v := strings.ToLower(strings.TrimSpace(m[1]))
	if d, err := time.ParseDuration(v); err == nil {
		return d, d > 0
	}
	num := strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' && r != '.' })
	unit := strings.TrimSpace(strings.TrimPrefix(v, num))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		return 0, false
	}
	scale := time.Second
	switch {
	case strings.HasPrefix(unit, "milli"):
		scale = time.Millisecond
	case strings.HasPrefix(unit, "min"):
		scale = time.Minute
	}
	return time.Duration(f * float64(scale)), true
}

// ParseRetryAfter reads a Retry-After header value: delay seconds or an HTTP date (relative to
// now). A date in the past gives ok=false.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 {
			return 0, false
		}
		return time.Duration(f * float64(time.Second)), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// retryAfterFromHeader reads retry-after-ms (OpenAI) and Retry-After.
func retryAfterFromHeader(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
			return time.Duration(f * float64(time.Millisecond)), true
		}
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

// classifier builds *Errors for one provider: it knows the name, the clock and the key to
// scrub from every message.
type classifier struct {
	provider string
	key      string
	now      func() time.Time
}

// fromHTTP classifies a non-2xx response. It reads (a bounded part of) the body.
func (c classifier) fromHTTP(resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	a, ok := parseAPIError(body)
	msg := a.Message
	if !ok {
		msg = strings.TrimSpace(string(body))
	}
	e := &Error{Provider: c.provider, StatusCode: resp.StatusCode, Message: msg}
	if a.Type != "" || a.code() != "" {
		e.Message = a.label() + ": " + msg
	}
	detail := a.code() + " " + a.Type + " " + msg
	switch s := resp.StatusCode; {
	case containsAny(detail, quotaMarkers):
		e.Class, e.QuotaExceeded = workitems.ClassPermission, true
	case containsAny(detail, contextWindowMarkers) && (s == 400 || s == 413 || s == 422):
		e.Class, e.ContextWindowExceeded = workitems.ClassInvalidInput, true
	case s == http.StatusTooManyRequests || s >= 500 || s == http.StatusRequestTimeout:
		e.Class = workitems.ClassTransient
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Class = workitems.ClassPermission
	case s == http.StatusNotFound:
		e.Class = workitems.ClassNotFound
	case s == http.StatusConflict:
		e.Class = workitems.ClassConflict
	case s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge || s == http.StatusUnprocessableEntity:
		e.Class = workitems.ClassInvalidInput
	default:
		e.Class = workitems.ClassUnknown
	}
	if d, ok := retryAfterFromHeader(resp.Header, c.now()); ok {
		e.RetryAfter = d
	} else if d, ok := RetryAfterFromMessage(msg); ok {
		e.RetryAfter = d
	}
	return c.scrub(e)
}

// fromStream classifies an error reported inside a stream (OpenAI response.failed / error
// events, Anthropic error events, a Chat chunk with "error"). Unknown in-stream failures are
// transient: the request was accepted, so the server failed while generating.
func (c classifier) fromStream(a apiError) *Error {
	e := &Error{Provider: c.provider, Message: a.label() + ": " + a.Message}
	detail := a.code() + " " + a.Type + " " + a.Message
	switch {
	case containsAny(detail, quotaMarkers):
		e.Class, e.QuotaExceeded = workitems.ClassPermission, true
	case containsAny(detail, contextWindowMarkers):
		e.Class, e.ContextWindowExceeded = workitems.ClassInvalidInput, true
	case containsAny(detail, transientMarkers):
		e.Class = workitems.ClassTransient
	case containsAny(detail, []string{"invalid_request", "invalid_prompt", "invalid_image", "bad_request"}):
		e.Class = workitems.ClassInvalidInput
	case containsAny(detail, []string{"authentication", "permission"}):
		e.Class = workitems.ClassPermission
	case containsAny(detail, []string{"not_found"}):
		e.Class = workitems.ClassNotFound
	default:
		e.Class = workitems.ClassTransient
	}
	if d, ok := RetryAfterFromMessage(a.Message); ok {
		e.RetryAfter = d
	}
	return c.scrub(e)
}

// fromTransport classifies a failure to send or to read the stream. A done context is not a
// model failure: the caller's cancellation is returned (wrapped), never a transient *Error.
func (c classifier) fromTransport(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("model %s: %w", c.provider, ctx.Err())
	}
	msg := err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = ErrStreamCut.Error()
		err = fmt.Errorf("%w: %w", ErrStreamCut, err)
	}
	return c.scrub(&Error{Provider: c.provider, Class: workitems.ClassTransient, Message: msg, Err: err})
}

// streamCut is the error of a stream that ended cleanly but before its final event.
func (c classifier) streamCut(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("model %s: %w", c.provider, ctx.Err())
	}
	return &Error{Provider: c.provider, Class: workitems.ClassTransient, Message: ErrStreamCut.Error(), Err: ErrStreamCut}
}

// truncated is the error of a response stopped at its output limit or by a filter.
func (c classifier) truncated(reason string) *Error {
	return c.scrub(&Error{Provider: c.provider, Class: workitems.ClassInvalidInput,
		Message: "response truncated: " + reason, Err: ErrTruncated})
}

// invalid is a request we refuse to send.
func (c classifier) invalid(format string, args ...any) *Error {
	return &Error{Provider: c.provider, Class: workitems.ClassInvalidInput, Message: fmt.Sprintf(format, args...)}
}

// decodeErr is a stream event we could not parse: the stream is corrupt, so transient.
func (c classifier) decodeErr(event string, err error) *Error {
	return c.scrub(&Error{Provider: c.provider, Class: workitems.ClassTransient,
		Message: fmt.Sprintf("decode %s event: %v", event, err), Err: err})
}

// scrub removes the API key from e's message and chain; it also bounds the message.
func (c classifier) scrub(e *Error) *Error {
	if c.key != "" {
		e.Message = strings.ReplaceAll(e.Message, c.key, "[redacted]")
	}
	if len(e.Message) > maxMessage { // after redaction, so no key prefix survives the cut
		e.Message = e.Message[:maxMessage] + "…"
	}
	if c.key == "" {
		return e
	}
	if e.Err != nil && strings.Contains(e.Err.Error(), c.key) {
		keep := e.Err
		e.Err = redactedError{msg: strings.ReplaceAll(keep.Error(), c.key, "[redacted]"), sentinel: sentinelOf(keep)}
	}
	return e
}

// redactedError replaces an error whose text held the key; it keeps our sentinel for errors.Is.
type redactedError struct {
	msg      string
	sentinel error
}

func (r redactedError) Error() string { return r.msg }
func (r redactedError) Unwrap() error { return r.sentinel }

func sentinelOf(err error) error {
	for _, s := range []error{ErrStreamCut, ErrStreamIdle, ErrTruncated, ErrMissingKey} {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}
