package workitems

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"time"
)

// NotifyEvent is a kind of event that people are told about (the `notify:` section).
type NotifyEvent string

// The events notifications are sent for.
const (
	// NotifyEscalation: an item was escalated and waits for a person.
	NotifyEscalation NotifyEvent = "escalation"
	// NotifyFailure: an item failed for good (an invariant broke, e.g. its template is gone).
	NotifyFailure NotifyEvent = "failure"
	// NotifyDailyCap: a template reached its daily cost cap, so its ticks are skipped until
	// the next UTC day (told once per template and day).
	NotifyDailyCap NotifyEvent = "daily_cap"
	// NotifyFleetPaused: a fleet template's breaker paused it after consecutive failures
	// (fleet.pause_after_failures); it stays paused until a person resumes it.
	NotifyFleetPaused NotifyEvent = "fleet_paused"
)

// AllNotifyEvents lists every NotifyEvent.
func AllNotifyEvents() []NotifyEvent {
	return []NotifyEvent{NotifyEscalation, NotifyFailure, NotifyDailyCap, NotifyFleetPaused}
}

// NotifySinkKind is how a sink is called.
type NotifySinkKind string

// The sink kinds.
const (
	// SinkWebhook POSTs the notification as JSON, signed with HMAC-SHA256 of the body.
	SinkWebhook NotifySinkKind = "webhook"
	// SinkSlack POSTs a Slack-compatible incoming-webhook message ({"text": ...}).
	SinkSlack NotifySinkKind = "slack"
)

// AllNotifySinkKinds lists every NotifySinkKind.
func AllNotifySinkKinds() []NotifySinkKind { return []NotifySinkKind{SinkWebhook, SinkSlack} }

// Notify is the top-level `notify:` section: where people are told about events that need
// them, and which events. Deliveries go through an outbox in Redis (package notify).
type Notify struct {
	// BaseURL is the console's public address; messages link items as BaseURL/items/ID.
	BaseURL string `yaml:"base_url"`
	// Events are the events sent for templates that do not set notify.events
	// (default: every event).
	Events []NotifyEvent `yaml:"events"`
	// Sinks are the receivers, by name.
	Sinks map[string]NotifySink `yaml:"sinks"`
	// Retry bounds the delivery attempts of one notification to one sink.
	Retry NotifyRetry `yaml:"retry"`
	// Timeout bounds one HTTP request to a sink (default 10s).
	Timeout Duration `yaml:"timeout"`
}

// NotifySink is one receiver. Its URL is given either in the config (url) or, for URLs that
// are themselves secrets (Slack's incoming webhooks), by the environment variable url_env;
// a webhook's signing secret comes only from the environment (secret_env).
type NotifySink struct {
	Kind      NotifySinkKind `yaml:"kind"`
	URL       string         `yaml:"url"`
	URLEnv    string         `yaml:"url_env"`
	SecretEnv string         `yaml:"secret_env"` // webhook: HMAC-SHA256 key
	// Events narrows what this sink receives (default: all that a template sends).
	Events []NotifyEvent `yaml:"events"`
}

// NotifyRetry is the delivery retry policy: exponential backoff with jitter from Backoff up to
// MaxBackoff, MaxAttempts attempts in all, then the delivery is a dead letter (kept, listed).
type NotifyRetry struct {
	MaxAttempts int      `yaml:"max_attempts"` // default 8
	Backoff     Duration `yaml:"backoff"`      // first delay, default 5s
	MaxBackoff  Duration `yaml:"max_backoff"`  // default 10m
}

// TemplateNotify is a template's `notify:`: which events it sends and to which sinks.
type TemplateNotify struct {
	// Events, when given, replaces notify.events for this template; `events: []` sends none.
	Events *[]NotifyEvent `yaml:"events"`
	// Sinks, when given, limits the template's notifications to these sinks (default: all).
	Sinks []string `yaml:"sinks"`
}

// Notify defaults.
const (
	DefaultNotifyMaxAttempts = 8
	DefaultNotifyBackoff     = 5 * time.Second
	DefaultNotifyMaxBackoff  = 10 * time.Minute
	DefaultNotifyTimeout     = 10 * time.Second
)

// WithDefaults fills what the config left out.
func (n Notify) WithDefaults() Notify {
	if n.Events == nil {
		n.Events = AllNotifyEvents()
	}
	if n.Retry.MaxAttempts == 0 {
		n.Retry.MaxAttempts = DefaultNotifyMaxAttempts
	}
	if n.Retry.Backoff == 0 {
		n.Retry.Backoff = Duration(DefaultNotifyBackoff)
	}
	if n.Retry.MaxBackoff == 0 {
		n.Retry.MaxBackoff = Duration(DefaultNotifyMaxBackoff)
	}
	if n.Timeout == 0 {
		n.Timeout = Duration(DefaultNotifyTimeout)
	}
	return n
}

// SinkNames returns the sinks' names, sorted.
func (n Notify) SinkNames() []string {
	out := make([]string, 0, len(n.Sinks))
	for k := range n.Sinks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Targets returns the sinks (sorted by name) that an event of template t is sent to: the
// template's events (or notify.events), its sinks (or all), and each sink's own event filter.
// t may be nil (a template no longer configured): the defaults apply.
func (n Notify) Targets(t *Template, ev NotifyEvent) []string {
	events := n.Events
	var only []string
	if t != nil {
		if t.Notify.Events != nil {
			events = *t.Notify.Events
		}
		only = t.Notify.Sinks
	}
	if !slices.Contains(events, ev) {
		return nil
	}
	var out []string
	for _, name := range n.SinkNames() {
		s := n.Sinks[name]
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		if len(s.Events) > 0 && !slices.Contains(s.Events, ev) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func validateNotifyEvents(field string, evs []NotifyEvent) error {
	for i, e := range evs {
		if !slices.Contains(AllNotifyEvents(), e) {
			return &ConfigError{Field: fmt.Sprintf("%s[%d]", field, i),
				Err: fmt.Errorf("unknown event %q (one of %s)", e, JoinKinds(AllNotifyEvents()))}
		}
	}
	return nil
}

// ValidateSinkURL checks a sink's URL: absolute http or https with a host. The error never
// repeats the URL (a Slack URL is a secret).
func ValidateSinkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}

// validate checks the section's shape; whether the named environment variables are set is
// checked where notifications are sent (notify.NewDispatcher), so that commands which send
// none run without the secrets.
func (n Notify) validate() error {
	bad := func(field string, err error) error { return &ConfigError{Field: "notify." + field, Err: err} }
	if n.BaseURL != "" {
		if err := ValidateSinkURL(n.BaseURL); err != nil {
			return bad("base_url", err)
		}
	}
	if err := validateNotifyEvents("notify.events", n.Events); err != nil {
		return err
	}
	for _, name := range n.SinkNames() {
		s := n.Sinks[name]
		f := "sinks." + name + "."
		if !nameRE.MatchString(name) {
			return bad("sinks."+name, errors.New("use lower-case letters, digits, '.', '_' and '-' (at most 63)"))
		}
		if !slices.Contains(AllNotifySinkKinds(), s.Kind) {
			return bad(f+"kind", fmt.Errorf("%q is not one of %s", s.Kind, JoinKinds(AllNotifySinkKinds())))
		}
		switch {
		case s.URL != "" && s.URLEnv != "":
			return bad(f+"url", errors.New("give url or url_env, not both"))
		case s.URL == "" && s.URLEnv == "":
			return bad(f+"url", errors.New("missing (give url, or url_env naming the variable that holds it)"))
		case s.URL != "":
			if err := ValidateSinkURL(s.URL); err != nil {
				return bad(f+"url", err)
			}
		case !envNameRE.MatchString(s.URLEnv):
			return bad(f+"url_env", fmt.Errorf("%q is not an environment variable name", s.URLEnv))
		}
		switch s.Kind {
		case SinkWebhook:
			if s.SecretEnv == "" {
				return bad(f+"secret_env", errors.New("missing: a webhook is signed with the secret in this environment variable"))
			}
			if !envNameRE.MatchString(s.SecretEnv) {
				return bad(f+"secret_env", fmt.Errorf("%q is not an environment variable name", s.SecretEnv))
			}
		case SinkSlack:
			if s.SecretEnv != "" {
				return bad(f+"secret_env", errors.New("slack incoming webhooks are not signed: the URL is the secret (use url_env)"))
			}
		}
		if err := validateNotifyEvents("notify."+f+"events", s.Events); err != nil {
			return err
		}
	}
	if n.Retry.MaxAttempts < 1 {
		return bad("retry.max_attempts", errors.New("must be at least 1"))
	}
	if n.Retry.Backoff <= 0 || n.Retry.MaxBackoff < n.Retry.Backoff {
		return bad("retry", errors.New("backoff must be positive and max_backoff at least backoff"))
	}
	if n.Timeout <= 0 {
		return bad("timeout", errors.New("must be positive"))
	}
	return nil
}

// validateTemplateNotify checks a template's notify: against the deployment's sinks.
func (c *Config) validateTemplateNotify(t *Template) error {
	if t.Notify.Events != nil {
		if err := validateNotifyEvents("notify.events", *t.Notify.Events); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				ce.Template = t.Name
			}
			return err
		}
	}
	for i, s := range t.Notify.Sinks {
		if _, ok := c.Notify.Sinks[s]; !ok {
			return &ConfigError{Template: t.Name, Field: fmt.Sprintf("notify.sinks[%d]", i),
				Err: fmt.Errorf("%q is not in notify.sinks", s)}
		}
	}
	return nil
}
