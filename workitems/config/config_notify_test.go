package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
)

const notifySinks = `notify:
  base_url: https://ol.example.com
  events: [escalation, failure]
  sinks:
    hook: {kind: webhook, url: "https://hooks.example.com/ol", secret_env: OL_HOOK_SECRET}
    chat: {kind: slack, url_env: OL_SLACK_URL, events: [escalation]}
`

func TestNotifyConfigIsReadWithDefaultsAndPerTemplateTargets(t *testing.T) {
	t.Parallel()
	y := notifySinks + strings.Replace(validTemplate, "goal: do it", "goal: do it\n    daily_cost_cap_usd: 5", 1) + `  - name: t2
    goal: quiet
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    notify: {events: [daily_cap, failure], sinks: [hook]}
  - name: t3
    goal: silent
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    notify: {events: []}
`
	cfg, err := ParseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if n.Retry.MaxAttempts != DefaultNotifyMaxAttempts || n.Retry.Backoff.D() != DefaultNotifyBackoff ||
		n.Retry.MaxBackoff.D() != DefaultNotifyMaxBackoff || n.Timeout.D() != DefaultNotifyTimeout {
		t.Errorf("defaults not applied: %+v %v", n.Retry, n.Timeout)
	}
	tmpl := func(name string) *Template { t, _ := cfg.Template(name); return t }
	for _, c := range []struct {
		tmpl *Template
		ev   workitems.NotifyEvent
		want []string
	}{
		{tmpl("t1"), workitems.NotifyEscalation, []string{"chat", "hook"}},
		{tmpl("t1"), workitems.NotifyFailure, []string{"hook"}}, // chat takes escalations only
		{tmpl("t1"), workitems.NotifyDailyCap, nil},             // not in notify.events
		{tmpl("t2"), workitems.NotifyDailyCap, []string{"hook"}},
		{tmpl("t2"), workitems.NotifyEscalation, nil},
		{tmpl("t3"), workitems.NotifyFailure, nil}, // events: [] sends none
		{nil, workitems.NotifyEscalation, []string{"chat", "hook"}},
	} {
		if got := n.Targets(c.tmpl, c.ev); !slices.Equal(got, c.want) {
			name := "<gone>"
			if c.tmpl != nil {
				name = c.tmpl.Name
			}
			t.Errorf("%s %s: targets %v, want %v", name, c.ev, got, c.want)
		}
	}
	if d := (Notify{}).WithDefaults(); !slices.Equal(d.Events, workitems.AllNotifyEvents()) {
		t.Errorf("default events %v", d.Events)
	}
}

func TestNotifyConfigRejectsBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key in a sink", strings.Replace(notifySinks, "secret_env: OL_HOOK_SECRET", "secret_env: OL_HOOK_SECRET, token: x", 1),
			[]string{"notify.sinks.hook.token", "unknown key"}},
		{"unknown notify key", strings.Replace(notifySinks, "  events: [escalation, failure]\n", "  channels: [x]\n", 1),
			[]string{"notify.channels", "unknown key"}},
		{"unknown event kind", strings.Replace(notifySinks, "[escalation, failure]", "[escalation, fire]", 1),
			[]string{"notify.events[1]", `unknown event "fire"`, "escalation, failure, daily_cap"}},
		{"unknown sink event", strings.Replace(notifySinks, "events: [escalation]}", "events: [closed]}", 1),
			[]string{"notify.sinks.chat.events[0]", `"closed"`}},
		{"bad URL scheme", strings.Replace(notifySinks, "https://hooks.example.com/ol", "ftp://hooks.example.com/ol", 1),
			[]string{"notify.sinks.hook.url", `scheme "ftp"`}},
		{"URL without host", strings.Replace(notifySinks, "https://hooks.example.com/ol", "https:///ol", 1),
			[]string{"notify.sinks.hook.url", "no host"}},
		{"bad base URL", strings.Replace(notifySinks, "base_url: https://ol.example.com", "base_url: ol.example.com", 1),
			[]string{"notify.base_url"}},
		{"unknown sink kind", strings.Replace(notifySinks, "kind: slack", "kind: teams", 1),
			[]string{"notify.sinks.chat.kind", `"teams"`}},
		{"webhook without a secret", strings.Replace(notifySinks, ", secret_env: OL_HOOK_SECRET", "", 1),
			[]string{"notify.sinks.hook.secret_env", "missing"}},
		{"secret env not a variable name", strings.Replace(notifySinks, "OL_HOOK_SECRET", "hook-secret!", 1),
			[]string{"notify.sinks.hook.secret_env", "not an environment variable name"}},
		{"sink without a URL", strings.Replace(notifySinks, "url_env: OL_SLACK_URL, ", "", 1),
			[]string{"notify.sinks.chat.url", "missing"}},
		{"sink with both URLs", strings.Replace(notifySinks, "url_env: OL_SLACK_URL", "url_env: OL_SLACK_URL, url: https://x.example", 1),
			[]string{"notify.sinks.chat.url", "not both"}},
		{"zero attempts", strings.Replace(notifySinks, "  sinks:", "  retry: {max_attempts: -1}\n  sinks:", 1),
			[]string{"notify.retry.max_attempts"}},
		{"max backoff below backoff", strings.Replace(notifySinks, "  sinks:", "  retry: {backoff: 1m, max_backoff: 10s}\n  sinks:", 1),
			[]string{"notify.retry", "max_backoff"}},
		{"template names an unknown sink", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    notify: {sinks: [pager]}", 1),
			[]string{`template "t1"`, "notify.sinks[0]", `"pager"`}},
		{"template names an unknown event", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    notify: {events: [escalation, oops]}", 1),
			[]string{`template "t1"`, "notify.events[1]", `"oops"`}},
		{"unknown key in a template's notify", strings.Replace(validTemplate, "goal: do it", "goal: do it\n    notify: {when: always}", 1),
			[]string{`template "t1"`, "notify.when", "unknown key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y := tc.yaml
			if !strings.Contains(y, "templates:") {
				y += validTemplate
			}
			_, err := ParseConfig([]byte(y))
			if err == nil {
				t.Fatalf("accepted:\n%s", y)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hooks.example.com") {
				t.Errorf("error %q repeats a sink URL", err)
			}
		})
	}
}

// validSink returns settings a sink of kind passes its built-in checks with.
func validSink(kind workitems.NotifySinkKind) string {
	switch kind {
	case workitems.SinkWebhook:
		return `{kind: webhook, url: "https://hooks.example.com/ol", secret_env: OL_HOOK_SECRET}`
	case workitems.SinkSlack:
		return `{kind: slack, url_env: OL_SLACK_URL}`
	}
	return ""
}

func TestEveryBuiltinSinkKindIsAcceptedAndAnUnknownOneIsRefusedNamingTheKinds(t *testing.T) {
	t.Parallel()
	if got := BuiltinSinkKinds().SinkKinds(); !slices.Equal(got, slices.Sorted(slices.Values(workitems.AllNotifySinkKinds()))) {
		t.Errorf("built-in sink kinds %v, want AllNotifySinkKinds %v", got, workitems.AllNotifySinkKinds())
	}
	for _, k := range workitems.AllNotifySinkKinds() {
		s := validSink(k)
		if s == "" {
			t.Errorf("kind %s: no valid settings in this test: add them", k)
			continue
		}
		cfg, err := ParseConfig([]byte("notify:\n  sinks:\n    s1: " + s + "\n" + validTemplate))
		if err != nil {
			t.Errorf("kind %s refused: %v", k, err)
			continue
		}
		if cfg.Notify.Sinks["s1"].Kind != k {
			t.Errorf("kind %s read as %q", k, cfg.Notify.Sinks["s1"].Kind)
		}
	}
	for _, c := range []struct{ kind, want string }{
		{"teams", `"teams" is not one of slack, webhook`},
		{`""`, "missing (one of slack, webhook)"},
	} {
		_, err := ParseConfig([]byte("notify:\n  sinks:\n    s1: {kind: " + c.kind + `, url: "https://x.example/h"}` + "\n" + validTemplate))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "notify.sinks.s1.kind" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kind %s: error %v, want field notify.sinks.s1.kind and %q", c.kind, err, c.want)
		}
	}
}

// ntfyKind is a sink kind a process registers (not a built-in one).
const ntfyKind workitems.NotifySinkKind = "ntfy"

func TestARegisteredSinkKindIsAcceptedWithItsOwnChecks(t *testing.T) {
	t.Parallel()
	y := []byte("notify:\n  sinks:\n    phone: {kind: ntfy, url: \"https://ntfy.example/ol\"}\n    hook: " + validSink(workitems.SinkWebhook) + "\n" + validTemplate)
	if _, err := ParseConfig(y); err == nil || !strings.Contains(err.Error(), "notify.sinks.phone.kind") {
		t.Fatalf("the built-in kinds accepted ntfy: %v", err)
	}
	noSecret := func(s NotifySink) error {
		if s.SecretEnv != "" {
			return &ConfigError{Field: "secret_env", Err: errors.New("ntfy is not signed")}
		}
		return ValidateSinkAddress(s)
	}
	kinds := BuiltinSinkKinds().Add(ntfyKind, noSecret)
	cfg, err := ParseConfigWith(y, Kinds{Sinks: kinds})
	if err != nil {
		t.Fatalf("a registered kind refused: %v", err)
	}
	if err := cfg.ValidateSinks(kinds); err != nil {
		t.Errorf("ValidateSinks: %v", err)
	}
	if err := cfg.ValidateSinks(BuiltinSinkKinds()); err == nil || !strings.Contains(err.Error(), `"ntfy" is not one of slack, webhook`) {
		t.Errorf("ValidateSinks with the built-in kinds: %v", err)
	}
	// The kind's own checks run, named under the sink; the built-in ones still apply to theirs.
	for _, c := range []struct{ from, to, field string }{
		{`url: "https://ntfy.example/ol"}`, `url: "https://ntfy.example/ol", secret_env: K}`, "notify.sinks.phone.secret_env"},
		{`url: "https://ntfy.example/ol"}`, `url_env: "not a var"}`, "notify.sinks.phone.url_env"},
		{"secret_env: OL_HOOK_SECRET", "url_env: OL_HOOK", "notify.sinks.hook.url"},
	} {
		_, err := ParseConfigWith([]byte(strings.Replace(string(y), c.from, c.to, 1)), Kinds{Sinks: kinds})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: error %v, want field %s", c.to, err, c.field)
		}
	}
	// A kind registered without checks is held to an address.
	bare := BuiltinSinkKinds().Add(ntfyKind, nil)
	_, err = ParseConfigWith([]byte(strings.Replace(string(y), `url: "https://ntfy.example/ol"`, `events: [failure]`, 1)), Kinds{Sinks: bare})
	if err == nil || !strings.Contains(err.Error(), "notify.sinks.phone.url: missing") {
		t.Errorf("a kind without checks accepted no address: %v", err)
	}
}
