package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"outerloop/workitems"
)

// Sentinel errors found with errors.Is in an *Error's chain.
var (
	// ErrStreamCut means the stream ended before its final event (transient).
	ErrStreamCut = errors.New("model stream ended before its final event")
	// ErrTruncated means the model stopped at a content filter or at a limit the loop cannot
	// continue past; the partial response is not returned (invalid_input: retrying the same
	// request repeats it).
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

// errorCode is an error code or type as a vendor names it in an error body or a stream
// event: OpenAI's "code" and "type", Anthropic's "error.type".
type errorCode string

// The codes we classify by, with the vendor that defines each. They are compared whole,
// never searched for inside a message.
var (
	quotaCodes = []errorCode{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", // OpenAI
		errorCode(anthropic.ErrorTypeBillingError)}
	contextWindowCodes = []errorCode{"context_length_exceeded"} // OpenAI (HTTP body and Responses error event)
	transientCodes     = []errorCode{
		errorCode(responses.ResponseErrorCodeServerError), errorCode(responses.ResponseErrorCodeRateLimitExceeded),
		errorCode(responses.ResponseErrorCodeVectorStoreTimeout), "server_is_overloaded", "slow_down", // OpenAI
		errorCode(anthropic.ErrorTypeRateLimitError), errorCode(anthropic.ErrorTypeAPIError),
		errorCode(anthropic.ErrorTypeOverloadedError), errorCode(anthropic.ErrorTypeTimeoutError)}
	permissionCodes = []errorCode{"invalid_api_key", // OpenAI
		errorCode(anthropic.ErrorTypeAuthenticationError), errorCode(anthropic.ErrorTypePermissionError)}
	notFoundCodes = []errorCode{"model_not_found", errorCode(anthropic.ErrorTypeNotFoundError)}
	// invalidCodes are the request's fault: Anthropic's and OpenAI's invalid_request_error, and
	// every Responses error code of the SDK's list that is not transient (prompt and image
	// problems, policy refusals).
	invalidCodes = []errorCode{errorCode(anthropic.ErrorTypeInvalidRequestError), "request_too_large",
		errorCode(responses.ResponseErrorCodeInvalidPrompt), errorCode(responses.ResponseErrorCodeDataResidencyMismatch),
		errorCode(responses.ResponseErrorCodeBioPolicy), errorCode(responses.ResponseErrorCodeMisalignmentPolicyViolation),
		errorCode(responses.ResponseErrorCodeInvalidImage), errorCode(responses.ResponseErrorCodeInvalidImageFormat),
		errorCode(responses.ResponseErrorCodeInvalidBase64Image), errorCode(responses.ResponseErrorCodeInvalidImageURL),
		errorCode(responses.ResponseErrorCodeImageTooLarge), errorCode(responses.ResponseErrorCodeImageTooSmall),
		errorCode(responses.ResponseErrorCodeImageParseError), errorCode(responses.ResponseErrorCodeImageContentPolicyViolation),
		errorCode(responses.ResponseErrorCodeInvalidImageMode), errorCode(responses.ResponseErrorCodeImageFileTooLarge),
		errorCode(responses.ResponseErrorCodeUnsupportedImageMediaType), errorCode(responses.ResponseErrorCodeEmptyImageFile),
		errorCode(responses.ResponseErrorCodeFailedToDownloadImage), errorCode(responses.ResponseErrorCodeImageFileNotFound)}
)

// Where a vendor sends no code for a condition, its documented message is the only signal;
// these phrases are looked for in the message field alone (never in a whole error text).
var (
	// Anthropic: "prompt is too long: 210000 tokens > 200000 maximum" (invalid_request_error);
	// OpenAI Chat Completions, vLLM, LiteLLM: "This model's maximum context length is …".
	contextWindowPhrases = []string{"prompt is too long", "maximum context length"}
	// Anthropic: "Your credit balance is too low …" (invalid_request_error); OpenAI's
	// insufficient_quota message, for compatible layers that drop the code.
	quotaPhrases = []string{"credit balance is too low", "exceeded your current quota"}
)

// failure is a server-reported error, whichever SDK type or stream event it came from: the
// HTTP status (0 inside an accepted stream), the response headers, code, type and message.
type failure struct {
	status  int
	header  http.Header
	code    string
	typ     string
	message string
}

// is reports whether f's code or type is one of codes.
func (f failure) is(codes []errorCode) bool {
	return (f.code != "" && slices.Contains(codes, errorCode(f.code))) ||
		(f.typ != "" && slices.Contains(codes, errorCode(f.typ)))
}

// says reports whether f's message holds one of phrases (case-insensitive).
func (f failure) says(phrases []string) bool {
	m := strings.ToLower(f.message)
	for _, p := range phrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// label names the error by its code and type, each once ("rate_limit_exceeded",
// "invalid_request_error", "overloaded_error"), or "error" when it has neither.
func (f failure) label() string {
	c, t := f.code, f.typ
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

// bodyError is the error detail of a JSON error body in any of the shapes servers send:
// {"error":{message,type,code}} (OpenAI, Anthropic inside {"type":"error",…}), {"error":"text"}
// (Ollama, some proxies) or top-level {message,type,code} (vLLM).
func bodyError(body []byte) (f failure, ok bool) {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    any             `json:"code"`
	}
	if json.Unmarshal(body, &env) != nil {
		return failure{}, false
	}
	var in struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	switch e := bytes.TrimSpace(env.Error); {
	case len(e) > 0 && e[0] == '{' && json.Unmarshal(e, &in) == nil:
		f = failure{code: codeText(in.Code), typ: in.Type, message: in.Message}
	case len(e) > 0 && e[0] == '"' && json.Unmarshal(e, &f.message) == nil:
	default:
		f = failure{code: codeText(env.Code), typ: env.Type, message: env.Message}
		if f.typ == "error" { // Anthropic's envelope type, not a code
			f.typ = ""
		}
	}
	return f, f.message != "" || f.code != "" || f.typ != ""
}

// codeText renders a code field: a string at OpenAI, sometimes a number at compatible servers.
func codeText(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case float64:
		return strconv.FormatFloat(c, 'f', -1, 64)
	}
	return ""
}

// fill completes f's empty fields from a JSON error body (the SDKs know only their vendor's
// shape; Anthropic's SDK keeps only the types it knows).
func (f *failure) fill(body []byte) {
	b, ok := bodyError(body)
	if !ok {
		if f.message == "" {
			f.message = strings.TrimSpace(string(body))
		}
		return
	}
	if f.code == "" {
		f.code = b.code
	}
	if f.typ == "" {
		f.typ = b.typ
	}
	if f.message == "" {
		f.message = b.message
	}
}

// retryInRe matches "try again in 3s", "try again in 1.5 seconds", "try again in 20ms",
// "retry after 6m0s".
var retryInRe = regexp.MustCompile(`(?i)(?:try again|retry) (?:in|after) ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+|\d+(?:\.\d+)?\s*(?:milliseconds?|seconds?|secs?|minutes?|mins?))\b`)

// RetryAfterFromMessage returns the delay a server message asks for ("try again in 3s").
// OpenAI's rate-limit messages carry it even when no header does.
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
	clock    workitems.Clock
}

// fromSDK classifies what an SDK call or stream returned. x is the call's exchange, as the
// transport saw it. The SDKs' own error values are not kept in the chain: they hold the
// request, whose headers carry the key.
func (c classifier) fromSDK(ctx context.Context, err error, x *exchange) error {
	if ctx.Err() != nil {
		return fmt.Errorf("model %s: %w", c.provider, ctx.Err())
	}
	var me *Error
	if errors.As(err, &me) { // the transport refused the answer
		return me
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return c.fromHTTP(failure{status: oe.StatusCode, header: x.header, code: oe.Code, typ: oe.Type, message: oe.Message}, x.body)
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return c.fromHTTP(failure{status: ae.StatusCode, header: x.header, typ: string(ae.Type()), message: ae.Message}, x.body)
	}
	var se *ssestream.StreamError // an event of an OpenAI stream holding "error"
	if errors.As(err, &se) {
		f, _ := bodyError(se.Event.Data)
		return c.fromStream(f)
	}
	if x.status >= 400 { // an error body the SDK could not decode (openai-go and {"error":"text"})
		return c.fromHTTP(failure{status: x.status, header: x.header}, x.body)
	}
	return c.fromTransport(ctx, err)
}

// fromHTTP classifies a non-2xx response; body (bounded) fills what the SDK left empty.
func (c classifier) fromHTTP(f failure, body []byte) *Error {
	f.fill(body)
	e := &Error{Provider: c.provider, StatusCode: f.status, Message: f.message}
	if f.code != "" || f.typ != "" {
		e.Message = f.label() + ": " + f.message
	}
	switch s := f.status; {
	case f.is(quotaCodes) || f.says(quotaPhrases):
		e.Class, e.QuotaExceeded = workitems.ClassPermission, true
	case (f.is(contextWindowCodes) || f.says(contextWindowPhrases)) &&
		(s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge || s == http.StatusUnprocessableEntity):
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
	if d, ok := retryAfterFromHeader(f.header, c.clock.Now()); ok {
		e.RetryAfter = d
	} else if d, ok := RetryAfterFromMessage(f.message); ok {
		e.RetryAfter = d
	}
	return c.scrub(e)
}

// fromStream classifies an error reported inside an accepted stream (Responses error and
// response.failed events, Anthropic error events, a Chat chunk holding "error", a 200 answer
// with an error body). Unknown failures are transient: the request was accepted, so the
// server failed while generating.
func (c classifier) fromStream(f failure) *Error {
	e := &Error{Provider: c.provider, Message: f.label() + ": " + f.message}
	switch {
	case f.is(quotaCodes) || f.says(quotaPhrases):
		e.Class, e.QuotaExceeded = workitems.ClassPermission, true
	case f.is(contextWindowCodes) || f.says(contextWindowPhrases):
		e.Class, e.ContextWindowExceeded = workitems.ClassInvalidInput, true
	case f.is(transientCodes):
		e.Class = workitems.ClassTransient
	case f.is(invalidCodes):
		e.Class = workitems.ClassInvalidInput
	case f.is(permissionCodes):
		e.Class = workitems.ClassPermission
	case f.is(notFoundCodes):
		e.Class = workitems.ClassNotFound
	default:
		e.Class = workitems.ClassTransient
	}
	if d, ok := RetryAfterFromMessage(f.message); ok {
		e.RetryAfter = d
	}
	return c.scrub(e)
}

// fromTransport classifies a failure to send or to read the stream (a reset, a cut, an idle
// timeout, an event that does not decode): transient. A done context is not a model failure:
// the caller's cancellation is returned (wrapped), never a transient *Error.
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

// truncated is the error of a response stopped by a filter or a limit the loop cannot use.
func (c classifier) truncated(reason string) *Error {
	return c.scrub(&Error{Provider: c.provider, Class: workitems.ClassInvalidInput,
		Message: "response truncated: " + reason, Err: ErrTruncated})
}

// invalid is a request we refuse to send.
func (c classifier) invalid(format string, args ...any) *Error {
	return &Error{Provider: c.provider, Class: workitems.ClassInvalidInput, Message: fmt.Sprintf(format, args...)}
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
