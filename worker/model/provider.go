package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The provider kinds of config.ProviderConfig.Kind.
const (
	KindOpenAIResponses = workitems.ProviderOpenAIResponses
	KindOpenAIChat      = workitems.ProviderOpenAIChat
	KindAnthropic       = workitems.ProviderAnthropic
	KindReplay          = workitems.ProviderReplay
)

// Default base URLs, used when the config names none.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// Option adjusts a provider built by New.
type Option func(*options)

type options struct {
	clock workitems.Clock
	idle  time.Duration
}

// DefaultIdleTimeout is how long a stream may stay silent (no byte, headers included) before
// it fails as a transient ErrStreamIdle; reasoning models can think for minutes.
const DefaultIdleTimeout = 5 * time.Minute

// WithIdleTimeout sets the stream idle timeout; 0 disables it (then only ctx ends a stall).
func WithIdleTimeout(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithClock sets the clock used to turn a Retry-After HTTP date into a delay.
func WithClock(c workitems.Clock) Option { return func(o *options) { o.clock = c } }

// New builds the provider cfg.Kind names. The API key is read once, here, with
// getenv(cfg.APIKeyEnv); an empty APIKeyEnv means the server needs no key (a local vLLM or
// Ollama), while a named but unset variable is an error wrapping ErrMissingKey that names the
// variable. hc carries the requests (nil: a new client without timeout; the context bounds
// each call). cfg.BaseURL points the client at any compatible server. Nothing else is read
// from the environment: the SDKs' own variables (OPENAI_API_KEY, ANTHROPIC_BASE_URL, …) are
// ignored.
func New(cfg config.ProviderConfig, name string, getenv func(string) string, hc *http.Client, opts ...Option) (Provider, error) {
	o := options{clock: workitems.SystemClock{}, idle: DefaultIdleTimeout}
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
			workitems.JoinKinds(workitems.ProviderKinds()))
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
	c := &conn{name: name, model: cfg.Model, key: key, idle: o.idle, cls: classifier{provider: name, key: key, clock: o.clock}}
	// The SDKs resolve paths against the base URL, so it must end with a slash.
	base += "/"
	switch cfg.Kind {
	case KindOpenAIResponses:
		return newResponses(c, base, hc), nil
	case KindOpenAIChat:
		return newChat(c, base, hc), nil
	default:
		return newAnthropic(c, base, hc), nil
	}
}

// conn is what the SDK-backed providers share: the configured model, the key, the idle
// timeout and the classifier.
type conn struct {
	name  string
	model string
	key   string
	idle  time.Duration
	cls   classifier
}

// modelFor returns the model of req, else the configured one.
func (c *conn) modelFor(req Request) (string, error) {
	if req.Model != "" {
		return req.Model, nil
	}
	if c.model != "" {
		return c.model, nil
	}
	return "", c.cls.invalid("no model configured (set the provider's model)")
}

// exchange is one Stream call's HTTP exchange as its middleware (an SDK request option) saw
// it. The middleware holds what the SDKs leave to the caller: the idle watchdog, a bound on
// error bodies, and refusing a 200 answer that is not a stream. It keeps an error response's
// status, headers and (bounded) body for the classifier. The SDKs never retry (MaxRetries 0),
// so one Stream call is one exchange.
type exchange struct {
	c      *conn
	status int
	header http.Header
	body   []byte
}

func (c *conn) exchange() *exchange { return &exchange{c: c} }

// middleware has the shape of option.Middleware in both SDKs.
func (x *exchange) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	ib := &idleBody{ctx: ctx, cancel: cancel, d: x.c.idle}
	if ib.d > 0 {
		ib.timer = time.AfterFunc(ib.d, func() { cancel(ErrStreamIdle) })
	}
	resp, err := next(req.WithContext(ctx))
	if err != nil {
		err = ib.idleErr(err)
		ib.Close()
		return nil, err
	}
	ib.rc = resp.Body
	if resp.StatusCode >= 400 {
		defer ib.Close()
		x.status, x.header = resp.StatusCode, resp.Header
		x.body, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil {
			return nil, ib.idleErr(err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(x.body)) // what the SDK reads to build its error
		return resp, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		// A server that ignored stream:true (or a proxy answering 200 with an error body):
		// the SDKs would read it as an empty stream, which looks like a cut and is retried in
		// vain.
		defer ib.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if f, ok := bodyError(body); ok {
			return nil, x.c.cls.fromStream(f)
		}
		return nil, x.c.cls.invalid("server answered with %s instead of a stream; does it support stream:true?", mt)
	}
	resp.Body = ib
	return resp, nil
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
