package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Alertmanager receivers. Alertmanager posts its notifications to
// POST /hooks/alertmanager/{name} (package alerts); each name is a receiver here, with the one
// way it authenticates — the ways Alertmanager's http_config can send:
//
//	alertmanager:
//	  receivers:
//	    outerloop: {token_env: AM_TOKEN}                              # authorization: {credentials_file: ...}
//	    staging:   {basic_auth: {username: am, password_file: /run/secrets/am}}
//
// Secrets are read at each notification (a rotated secret applies without a restart); an empty
// secret refuses every notification of the receiver.
type Alertmanager struct {
	Receivers map[string]AlertReceiver `yaml:"receivers" json:"receivers,omitempty"`
}

// AlertReceiver is one receiver: a bearer token or basic auth, from an env var or a file.
type AlertReceiver struct {
	TokenEnv  string          `yaml:"token_env" json:"token_env,omitempty"`
	TokenFile string          `yaml:"token_file" json:"token_file,omitempty"`
	BasicAuth *AlertBasicAuth `yaml:"basic_auth" json:"basic_auth,omitempty"`
}

// AlertBasicAuth is a receiver's basic auth: the username and where its password is.
type AlertBasicAuth struct {
	Username     string `yaml:"username" json:"username"`
	PasswordEnv  string `yaml:"password_env" json:"password_env,omitempty"`
	PasswordFile string `yaml:"password_file" json:"password_file,omitempty"`
}

// Secret reads the receiver's secret (the token, or the basic auth password) through getenv
// (os.Getenv when nil), or from its file with surrounding white space trimmed, as
// Alertmanager's credentials_file is.
func (r AlertReceiver) Secret(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	env, file := r.TokenEnv, r.TokenFile
	if r.BasicAuth != nil {
		env, file = r.BasicAuth.PasswordEnv, r.BasicAuth.PasswordFile
	}
	if env != "" {
		return getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("workitems: alertmanager secret: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ReceiverNames lists the receivers, sorted.
func (a Alertmanager) ReceiverNames() []string {
	return slices.Sorted(maps.Keys(a.Receivers))
}

func (a Alertmanager) names() string {
	if len(a.Receivers) == 0 {
		return "alertmanager.receivers is empty"
	}
	return strings.Join(a.ReceiverNames(), ", ")
}

func (a Alertmanager) validate() error {
	for _, name := range a.ReceiverNames() {
		r := a.Receivers[name]
		field := "alertmanager.receivers." + name
		bad := func(f, format string, args ...any) error {
			return &ConfigError{Field: field + f, Err: fmt.Errorf(format, args...)}
		}
		if !nameRE.MatchString(name) {
			return bad("", "use lower-case letters, digits, '.', '_' and '-' (at most 63)")
		}
		n := 0
		for _, set := range []bool{r.TokenEnv != "", r.TokenFile != "", r.BasicAuth != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return bad("", "give exactly one of token_env, token_file, basic_auth")
		}
		if b := r.BasicAuth; b != nil {
			if strings.TrimSpace(b.Username) == "" {
				return bad(".basic_auth.username", "missing")
			}
			if (b.PasswordEnv == "") == (b.PasswordFile == "") {
				return bad(".basic_auth", "give exactly one of password_env, password_file")
			}
		}
	}
	return nil
}

// AlertmanagerTrigger is a triggers: entry that subscribes to a receiver's alerts: a firing
// group makes an item when one of its firing alerts matches every matcher (package alerts).
//
//   - alertmanager: {receiver: outerloop, match: {alertname: PaymentsErrorRate}, match_re: {severity: "page|critical"}}
type AlertmanagerTrigger struct {
	// Receiver is a key of alertmanager.receivers.
	Receiver string `yaml:"receiver" json:"receiver"`
	// Match: label → value, compared for equality.
	Match map[string]string `yaml:"match" json:"match,omitempty"`
	// MatchRE: label → regular expression, anchored as Alertmanager's are (it must match the
	// whole label value; an absent label is the empty value).
	MatchRE map[string]string `yaml:"match_re" json:"match_re,omitempty"`
}

// Matches reports whether labels satisfy every matcher. A match_re that does not compile
// matches nothing (validation refuses it).
func (a *AlertmanagerTrigger) Matches(labels map[string]string) bool {
	for k, v := range a.Match {
		if labels[k] != v {
			return false
		}
	}
	for k, re := range a.MatchRE {
		r, err := anchored(re)
		if err != nil || !r.MatchString(labels[k]) {
			return false
		}
	}
	return true
}

// anchored compiles re to match a whole value, as Alertmanager does.
func anchored(re string) (*regexp.Regexp, error) { return regexp.Compile("^(?:" + re + ")$") }

func (a *AlertmanagerTrigger) key() string {
	var b strings.Builder
	b.WriteString("am\x00" + a.Receiver)
	for _, k := range slices.Sorted(maps.Keys(a.Match)) {
		b.WriteString("\x00=" + k + "\x00" + a.Match[k])
	}
	for _, k := range slices.Sorted(maps.Keys(a.MatchRE)) {
		b.WriteString("\x00~" + k + "\x00" + a.MatchRE[k])
	}
	return b.String()
}

// validate checks the entry; field names the field under triggers[j].alertmanager.
func (c *Config) validateAlertTrigger(a *AlertmanagerTrigger) (field string, err error) {
	if a.Receiver == "" {
		return ".receiver", fmt.Errorf("missing: name a receiver of alertmanager: (%s)", c.Alertmanager.names())
	}
	if _, ok := c.Alertmanager.Receivers[a.Receiver]; !ok {
		return ".receiver", fmt.Errorf("%q is not a receiver of alertmanager: (%s)", a.Receiver, c.Alertmanager.names())
	}
	for _, k := range slices.Sorted(maps.Keys(a.Match)) {
		if strings.TrimSpace(k) == "" {
			return ".match", errors.New("an empty label name")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.MatchRE)) {
		if strings.TrimSpace(k) == "" {
			return ".match_re", errors.New("an empty label name")
		}
		if _, err := anchored(a.MatchRE[k]); err != nil {
			return ".match_re." + k, fmt.Errorf("%q is not a regular expression: %v", a.MatchRE[k], err)
		}
	}
	return "", nil
}
