package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"outerloop/workitems"
)

// The provider kinds of workitems.ProviderConfig.Kind.
const (
	KindOpenAIResponses = "openai-responses"
	KindOpenAIChat      = "openai-chat"
	KindAnthropic       = "anthropic"
	KindReplay          = "replay"
)

// Default base URLs, used when the config names none.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// Option adjusts a provider built by New.
type Option func(*options)

type options struct {
	now  func() time.Time
	idle time.Duration
}

// DefaultIdleTimeout is how long a stream may stay silent (no byte, headers included) before
// it fails as a transient ErrStreamIdle; reasoning models can think for minutes.
const DefaultIdleTimeout = 5 * time.Minute

// WithIdleTimeout sets the stream idle timeout; 0 disables it (then only ctx ends a stall).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithClock sets the clock used to turn a Retry-After HTTP date into a delay.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New builds the provider cfg.Kind names. The API key is read once, here, with
// getenv(cfg.APIKeyEnv); an empty APIKeyEnv means the server needs no key (a local vLLM or
// Ollama), while a named but unset variable is an error wrapping ErrMissingKey that names the
// variable. hc carries the requests (nil: a new client without timeout; the context bounds
// each call). cfg.BaseURL points the client at any compatible server.
func New(cfg workitems.ProviderConfig, name string, getenv func(string) string, hc *http.Client, opts ...Option) (Provider, error) {
	o := options{now: time.Now, idle: DefaultIdleTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.Kind == KindReplay {
		if cfg.File == "" {
			return nil, fmt.Errorf("model provider %q: replay needs a recording file", name)
		}
		return NewReplay(name, cfg.File)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	switch cfg.Kind {
	case KindOpenAIResponses, KindOpenAIChat:
		if base == "" {
			base = DefaultOpenAIBaseURL
		}
	case KindAnthropic:
		if base == "" {
			base = DefaultAnthropicBaseURL
		}
	default:
		return nil, fmt.Errorf("model provider %q: unknown kind %q (want one of %s)", name, cfg.Kind,
			strings.Join(workitems.ProviderKinds(), ", "))
	}
	key := ""
	if cfg.APIKeyEnv != "" {
		if getenv == nil {
			return nil, fmt.Errorf("model provider %q: no environment to read %s from: %w", name, cfg.APIKeyEnv, ErrMissingKey)
		}
		key = getenv(cfg.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("model provider %q: environment variable %s is empty or unset: %w", name, cfg.APIKeyEnv, ErrMissingKey)
		}
	}
	if hc == nil {
		hc = &http.Client{}
	}
	h := &httpClient{name: name, base: base, model: cfg.Model, key: key, hc: hc, idle: o.idle,
		cls: classifier{provider: name, key: key, now: o.now}}
	switch cfg.Kind {
	case KindOpenAIResponses:
		return &responsesProvider{h}, nil
	case KindOpenAIChat:
		return &chatProvider{h}, nil
	default:
		return &anthropicProvider{h}, nil
	}
}

// httpClient is what the HTTP providers share: where to send, the key, and the classifier.
type httpClient struct {
	name  string
	base  string
	model string
	key   string
	hc    *http.Client
	idle  time.Duration
	cls   classifier
}

// modelFor returns the model of req, else the configured one.
func (h *httpClient) modelFor(req Request) (string, error) {
	if req.Model != "" {
		return req.Model, nil
	}
	if h.model != "" {
		return h.model, nil
	}
	return "", h.cls.invalid("no model configured (set the provider's model)")
}

// post sends body as JSON to base+path and returns the body of the 2xx streaming response;
// any other status becomes a classified *Error. It never retries. The stream fails with
// ErrStreamIdle when no byte arrives for the idle timeout (headers included).
func (h *httpClient) post(ctx context.Context, path string, body any, header http.Header) (io.ReadCloser, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, h.cls.invalid("encode request: %v", err)
	}
	reqCtx, cancel := context.WithCancelCause(ctx)
	ib := &idleBody{ctx: reqCtx, cancel: cancel, d: h.idle}
	if h.idle > 0 {
		ib.timer = time.AfterFunc(h.idle, func() { cancel(ErrStreamIdle) })
	}
	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, h.base+path, bytes.NewReader(buf))
	if err != nil {
		ib.Close()
		return nil, h.cls.invalid("build request: %v", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	for k, vs := range header {
		hreq.Header[k] = vs
	}
	resp, err := h.hc.Do(hreq)
	if err != nil {
		err = ib.idleErr(err)
		ib.Close()
		return nil, h.cls.fromTransport(ctx, err)
	}
	ib.rc = resp.Body
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer ib.Close()
		return nil, h.cls.fromHTTP(resp)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		// A server that ignored stream:true (or a proxy answering 200 with an error body):
		// reading it as a stream would look like a cut stream and be retried in vain.
		defer ib.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if a, ok := parseAPIError(body); ok {
			return nil, h.cls.fromStream(a)
		}
		return nil, h.cls.invalid("server answered with %s instead of a stream; does it support stream:true?", ct)
	}
	return ib, nil
}

// idleBody is a response body that cancels its request when no byte arrives for d.
type idleBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	d      time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.d)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = b.idleErr(err)
	}
	return n, err
}

// idleErr marks err as an idle timeout when the watchdog cancelled the request.
func (b *idleBody) idleErr(err error) error {
	if errors.Is(context.Cause(b.ctx), ErrStreamIdle) {
		return fmt.Errorf("%w: nothing received for %v (%w)", ErrStreamIdle, b.d, err)
	}
	return err
}

func (b *idleBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	var err error
	if b.rc != nil {
		err = b.rc.Close()
	}
	b.cancel(nil)
	return err
}
