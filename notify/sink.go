package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The headers of a delivery.
const (
	// HeaderSignature carries "sha256=" + hex(HMAC-SHA256(secret, body)) (webhooks only).
	HeaderSignature = "X-Outerloop-Signature"
	// HeaderEventID is the notification's id: the same for every retry, for deduplication.
	HeaderEventID = "X-Outerloop-Event-Id"
	// HeaderEvent is the event kind (escalation, failure, daily_cap).
	HeaderEvent = "X-Outerloop-Event"
	// HeaderAttempt is the delivery attempt, from 1.
	HeaderAttempt = "X-Outerloop-Delivery-Attempt"
)

// Sign returns the signature header's value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is body's signature under secret (constant time): what a
// receiver does.
func Verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// Target is one configured sink, as a Sink is given it with each delivery: the config may be
// reloaded between two deliveries, and secrets are read at each one (a rotated secret is used
// at once).
type Target struct {
	// Name is the sink's key under notify.sinks (it names the sink in errors, logs and metrics).
	Name string
	// Config is its settings; Config.Kind chose the Sink.
	Config config.NotifySink
	// Getenv reads its secret variables.
	Getenv func(string) string
}

// URL resolves the target's address: url, or the value of url_env (checked as url is). The
// error names the sink and the variable, never the value.
func (t Target) URL() (string, error) {
	if t.Config.URLEnv == "" {
		return t.Config.URL, nil
	}
	u := t.Getenv(t.Config.URLEnv)
	if u == "" {
		return "", fmt.Errorf("notify: sink %q: url_env %s is not set", t.Name, t.Config.URLEnv)
	}
	if err := config.ValidateSinkURL(u); err != nil {
		return "", fmt.Errorf("notify: sink %q: the URL in %s: %w", t.Name, t.Config.URLEnv, err)
	}
	return u, nil
}

// secret reads the variable named by secret_env; the error names the sink and the variable.
func (t Target) secret() ([]byte, error) {
	v := t.Getenv(t.Config.SecretEnv)
	if v == "" {
		return nil, fmt.Errorf("notify: sink %q: secret_env %s is not set", t.Name, t.Config.SecretEnv)
	}
	return []byte(v), nil
}

// Sink sends notifications to the sinks of one kind (notify.sinks.<name>.kind). The dispatcher
// looks it up in its Registry by the configured kind; the outbox around it retries, backs off
// and dead-letters whatever Send returns an error for.
type Sink interface {
	// Check reports whether to can be sent to — its secret variables are set — so that a
	// dispatcher does not start without them (NewDispatcher calls it for every sink).
	Check(to Target) error
	// Send makes one attempt to deliver d to to. Its error is stored as the delivery's
	// last_error and logged: it must name the sink, never a secret (a URL from url_env is one).
	Send(ctx context.Context, to Target, d Delivery) error
}

// SinkSettingsValidator is implemented by a Sink that checks its sinks' settings. Config
// validation with the Registry (config.SinkRegistry) calls it, so a new kind brings its own
// checks; a Sink without it is held to config.ValidateSinkAddress.
type SinkSettingsValidator interface {
	ValidateSink(s config.NotifySink) error
}

// Registry is the sinks of a process by kind: the dispatcher sends through it and config
// validation asks it which kinds exist (it is a config.SinkRegistry).
type Registry struct {
	mu    sync.RWMutex
	sinks map[workitems.NotifySinkKind]Sink
}

var _ config.SinkRegistry = (*Registry)(nil)

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{sinks: map[workitems.NotifySinkKind]Sink{}} }

// BuiltinSinks returns a registry of the built-in kinds (workitems.AllNotifySinkKinds), their
// requests sent by hc (nil: a client with the default notify.timeout).
func BuiltinSinks(hc *http.Client) *Registry {
	if hc == nil {
		hc = &http.Client{Timeout: config.DefaultNotifyTimeout}
	}
	return NewRegistry().Register(workitems.SinkWebhook, Webhook{HTTP: hc}).Register(workitems.SinkSlack, Slack{HTTP: hc})
}

// Register adds (or replaces) the sink of kind.
func (r *Registry) Register(kind workitems.NotifySinkKind, s Sink) *Registry {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sinks[kind] = s
	return r
}

// Sink returns the sink of kind.
func (r *Registry) Sink(kind workitems.NotifySinkKind) (Sink, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.sinks[kind]
	return s, ok
}

// SinkKinds lists the registered kinds, sorted (config.SinkRegistry).
func (r *Registry) SinkKinds() []workitems.NotifySinkKind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := config.NewSinkKindSet()
	for k := range r.sinks {
		set.Add(k, nil)
	}
	return set.SinkKinds()
}

// ValidateSink checks the settings of the sink called name with the sink of its kind
// (config.SinkRegistry): a kind nobody registered is refused naming its field and the
// registered kinds.
func (r *Registry) ValidateSink(name string, s config.NotifySink) error {
	sk, ok := r.Sink(s.Kind)
	if !ok {
		return config.UnknownSinkKind(name, s, r.SinkKinds())
	}
	if v, ok := sk.(SinkSettingsValidator); ok {
		return config.SinkError(name, v.ValidateSink(s))
	}
	return config.SinkError(name, config.ValidateSinkAddress(s))
}

// lookup returns the sink of to's kind; the error names the sink and its kind.
func (r *Registry) lookup(to Target) (Sink, error) {
	s, ok := r.Sink(to.Config.Kind)
	if !ok {
		return nil, fmt.Errorf("notify: sink %q: kind %q is not registered in this process (one of %s)",
			to.Name, to.Config.Kind, workitems.JoinKinds(r.SinkKinds()))
	}
	return s, nil
}

// Webhook is the built-in webhook kind: the notification as JSON, signed with HMAC-SHA256 of
// the body under the secret in secret_env (HeaderSignature).
type Webhook struct{ HTTP *http.Client }

// Check reports whether the URL and signing secret are set.
func (w Webhook) Check(to Target) error {
	if _, err := to.URL(); err != nil {
		return err
	}
	_, err := to.secret()
	return err
}

// ValidateSink holds the settings to config.ValidateWebhookSink.
func (Webhook) ValidateSink(s config.NotifySink) error { return config.ValidateWebhookSink(s) }

// Send POSTs the signed JSON body.
func (w Webhook) Send(ctx context.Context, to Target, d Delivery) error {
	u, err := to.URL()
	if err != nil {
		return err
	}
	secret, err := to.secret()
	if err != nil {
		return err
	}
	body, err := webhookBody(d.Notification)
	if err != nil {
		return fmt.Errorf("notify: sink %q: %w", to.Name, err)
	}
	return post(ctx, w.HTTP, to.Name, u, d, body, Sign(secret, body))
}

// Slack is the built-in slack kind: one Slack-compatible incoming-webhook message, unsigned
// (the URL, from url_env, is the secret).
type Slack struct{ HTTP *http.Client }

// Check reports whether the URL is set.
func (Slack) Check(to Target) error {
	_, err := to.URL()
	return err
}

// ValidateSink holds the settings to config.ValidateSlackSink.
func (Slack) ValidateSink(s config.NotifySink) error { return config.ValidateSlackSink(s) }

// Send POSTs the message.
func (s Slack) Send(ctx context.Context, to Target, d Delivery) error {
	u, err := to.URL()
	if err != nil {
		return err
	}
	body, err := slackBody(d.Notification)
	if err != nil {
		return fmt.Errorf("notify: sink %q: %w", to.Name, err)
	}
	return post(ctx, s.HTTP, to.Name, u, d, body, "")
}

// errorBodyBytes bounds how much of a refusing sink's answer is kept in last_error.
const errorBodyBytes = 200

// post makes one HTTP attempt of d's JSON body to the sink called name at u, with the
// delivery headers and, when sig is not empty, the signature.
func post(ctx context.Context, hc *http.Client, name, u string, d Delivery, body []byte, sig string) error {
	if hc == nil {
		hc = &http.Client{Timeout: config.DefaultNotifyTimeout}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: sink %q: bad request", name) // the URL may be a secret: not repeated
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "outerloop-notify")
	req.Header.Set(HeaderEventID, d.Notification.ID)
	req.Header.Set(HeaderEvent, string(d.Event))
	req.Header.Set(HeaderAttempt, fmt.Sprint(d.Attempts+1))
	if sig != "" {
		req.Header.Set(HeaderSignature, sig)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("notify: sink %q: %w", name, WithoutURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "?"))
		if msg != "" {
			msg = ": " + msg
		}
		return fmt.Errorf("notify: sink %q answered %s%s", name, resp.Status, msg)
	}
	return nil
}

// WithoutURL strips the URL an http.Client's error repeats (a sink's URL may be a secret):
// what a Sink sending over HTTP wraps its client's errors with.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
