package config

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"outerloop/workitems"
)

// Notify is the top-level `notify:` section: where people are told about events that need
// them, and which events. Deliveries go through an outbox in Redis (package notify).
type Notify struct {
	// BaseURL is the console's public address; messages link items as BaseURL/items/ID.
	BaseURL string `yaml:"base_url"`
	// Events are the events sent for templates that do not set notify.events
	// (default: every event).
	Events []workitems.NotifyEvent `yaml:"events"`
	// Sinks are the receivers, by name.
	Sinks map[string]NotifySink `yaml:"sinks"`
	// Retry bounds the delivery attempts of one notification to one sink.
	Retry NotifyRetry `yaml:"retry"`
	// Timeout bounds one HTTP request to a sink (default 10s).
	Timeout workitems.Duration `yaml:"timeout"`
}

// NotifySink is one receiver. Its URL is given either in the config (url) or, for URLs that
// are themselves secrets (Slack's incoming webhooks), by the environment variable url_env;
// a webhook's signing secret comes only from the environment (secret_env).
type NotifySink struct {
	Kind      workitems.NotifySinkKind `yaml:"kind"`
	URL       string                   `yaml:"url"`
	URLEnv    string                   `yaml:"url_env"`
	SecretEnv string                   `yaml:"secret_env"` // webhook: HMAC-SHA256 key
	// Events narrows what this sink receives (default: all that a template sends).
	Events []workitems.NotifyEvent `yaml:"events"`
}

// NotifyRetry is the delivery retry policy: exponential backoff with jitter from Backoff up to
// MaxBackoff, MaxAttempts attempts in all, then the delivery is a dead letter (kept, listed).
type NotifyRetry struct {
	MaxAttempts int                `yaml:"max_attempts"` // default 8
	Backoff     workitems.Duration `yaml:"backoff"`      // first delay, default 5s
	MaxBackoff  workitems.Duration `yaml:"max_backoff"`  // default 10m
}

// TemplateNotify is a template's `notify:`: which events it sends and to which sinks.
type TemplateNotify struct {
	// Events, when given, replaces notify.events for this template; `events: []` sends none.
	Events *[]workitems.NotifyEvent `yaml:"events"`
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
		n.Events = workitems.AllNotifyEvents()
	}
	if n.Retry.MaxAttempts == 0 {
		n.Retry.MaxAttempts = DefaultNotifyMaxAttempts
	}
	if n.Retry.Backoff == 0 {
		n.Retry.Backoff = workitems.Duration(DefaultNotifyBackoff)
	}
	if n.Retry.MaxBackoff == 0 {
		n.Retry.MaxBackoff = workitems.Duration(DefaultNotifyMaxBackoff)
	}
	if n.Timeout == 0 {
		n.Timeout = workitems.Duration(DefaultNotifyTimeout)
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
func (n Notify) Targets(t *Template, ev workitems.NotifyEvent) []string {
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

func validateNotifyEvents(field string, evs []workitems.NotifyEvent) error {
	for i, e := range evs {
		if !slices.Contains(workitems.AllNotifyEvents(), e) {
			return &ConfigError{Field: fmt.Sprintf("%s[%d]", field, i),
				Err: fmt.Errorf("unknown event %q (one of %s)", e, workitems.JoinKinds(workitems.AllNotifyEvents()))}
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

// SinkRegistry is what config validation asks about notification sink kinds: which kinds exist
// and whether a sink's settings suit its kind. The registry of sinks a dispatcher is given
// (notify.Registry) implements it, so registering a new kind there needs no edit of a list
// here; the dependency points inward, from notify to workitems.
type SinkRegistry interface {
	// SinkKinds lists the registered kinds, sorted.
	SinkKinds() []workitems.NotifySinkKind
	// ValidateSink checks the settings of the sink called name against its kind. It returns a
	// *ConfigError naming the field (notify.sinks.<name>.kind for a kind nobody registered).
	ValidateSink(name string, s NotifySink) error
}

// SinkValidator checks a sink's settings for one kind. A *ConfigError names the field relative
// to the sink ("url", "secret_env"); any other error is reported against the sink.
type SinkValidator func(s NotifySink) error

// SinkKindSet is a SinkRegistry of kinds and their validators.
type SinkKindSet struct {
	v map[workitems.NotifySinkKind]SinkValidator
}

// NewSinkKindSet returns an empty set.
func NewSinkKindSet() *SinkKindSet {
	return &SinkKindSet{v: map[workitems.NotifySinkKind]SinkValidator{}}
}

// Add registers kind with its validator (nil: ValidateSinkAddress).
func (k *SinkKindSet) Add(kind workitems.NotifySinkKind, v SinkValidator) *SinkKindSet {
	if v == nil {
		v = ValidateSinkAddress
	}
	k.v[kind] = v
	return k
}

// SinkKinds lists the kinds of k, sorted.
func (k *SinkKindSet) SinkKinds() []workitems.NotifySinkKind {
	return slices.Sorted(maps.Keys(k.v))
}

// ValidateSink checks s with its kind's validator.
func (k *SinkKindSet) ValidateSink(name string, s NotifySink) error {
	v, ok := k.v[s.Kind]
	if !ok {
		return UnknownSinkKind(name, s, k.SinkKinds())
	}
	return SinkError(name, v(s))
}

// BuiltinSinkKinds is the set of the sink kinds every binary registers (AllNotifySinkKinds) with
// their settings' validation. ParseConfig uses it; notify's built-in sinks reuse these
// validators.
func BuiltinSinkKinds() *SinkKindSet {
	return NewSinkKindSet().Add(workitems.SinkWebhook, ValidateWebhookSink).Add(workitems.SinkSlack, ValidateSlackSink)
}

// UnknownSinkKind is the error for the sink called name whose kind is missing or not in kinds.
func UnknownSinkKind(name string, s NotifySink, kinds []workitems.NotifySinkKind) error {
	f := "notify.sinks." + name + ".kind"
	if s.Kind == "" {
		return &ConfigError{Field: f, Err: fmt.Errorf("missing (one of %s)", workitems.JoinKinds(kinds))}
	}
	return &ConfigError{Field: f, Err: fmt.Errorf("%q is not one of %s", s.Kind, workitems.JoinKinds(kinds))}
}

// SinkError names the sink called name in a validator's error: a *ConfigError's field is put
// under notify.sinks.<name>, any other error is reported against the sink itself.
func SinkError(name string, err error) error {
	if err == nil {
		return nil
	}
	prefix := "notify.sinks." + name
	var ce *ConfigError
	if errors.As(err, &ce) {
		if !strings.HasPrefix(ce.Field, prefix) {
			ce.Field = prefix + "." + ce.Field
		}
		return ce
	}
	return &ConfigError{Field: prefix, Err: err}
}

// ValidateSinkAddress checks where a sink is sent: url, or url_env naming the variable that
// holds it (for URLs that are secrets). It is every built-in kind's first check, and what a
// registered kind without checks of its own is held to.
func ValidateSinkAddress(s NotifySink) error {
	switch {
	case s.URL != "" && s.URLEnv != "":
		return &ConfigError{Field: "url", Err: errors.New("give url or url_env, not both")}
	case s.URL == "" && s.URLEnv == "":
		return &ConfigError{Field: "url", Err: errors.New("missing (give url, or url_env naming the variable that holds it)")}
	case s.URL != "":
		if err := ValidateSinkURL(s.URL); err != nil {
			return &ConfigError{Field: "url", Err: err}
		}
	case !envNameRE.MatchString(s.URLEnv):
		return &ConfigError{Field: "url_env", Err: fmt.Errorf("%q is not an environment variable name", s.URLEnv)}
	}
	return nil
}

// ValidateWebhookSink checks a webhook sink: an address and the variable of its signing secret.
func ValidateWebhookSink(s NotifySink) error {
	if err := ValidateSinkAddress(s); err != nil {
		return err
	}
	if s.SecretEnv == "" {
		return &ConfigError{Field: "secret_env", Err: errors.New("missing: a webhook is signed with the secret in this environment variable")}
	}
	if !envNameRE.MatchString(s.SecretEnv) {
		return &ConfigError{Field: "secret_env", Err: fmt.Errorf("%q is not an environment variable name", s.SecretEnv)}
	}
	return nil
}

// ValidateSlackSink checks a Slack sink: an address and no signing secret.
func ValidateSlackSink(s NotifySink) error {
	if err := ValidateSinkAddress(s); err != nil {
		return err
	}
	if s.SecretEnv != "" {
		return &ConfigError{Field: "secret_env", Err: errors.New("slack incoming webhooks are not signed: the URL is the secret (use url_env)")}
	}
	return nil
}

// ValidateSinks checks every sink against sinks alone (the rest of the config was validated
// when it was parsed), as ValidateLoops does for loops.
func (c *Config) ValidateSinks(sinks SinkRegistry) error {
	for _, name := range c.Notify.SinkNames() {
		if err := sinks.ValidateSink(name, c.Notify.Sinks[name]); err != nil {
			return err
		}
	}
	return nil
}

// validate checks the section's shape and each sink against its kind in sinks; whether the
// named environment variables are set is checked where notifications are sent
// (notify.NewDispatcher), so that commands which send none run without the secrets.
func (n Notify) validate(sinks SinkRegistry) error {
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
		if !nameRE.MatchString(name) {
			return bad("sinks."+name, errors.New("use lower-case letters, digits, '.', '_' and '-' (at most 63)"))
		}
		if err := sinks.ValidateSink(name, s); err != nil {
			return err
		}
		if err := validateNotifyEvents("notify.sinks."+name+".events", s.Events); err != nil {
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
