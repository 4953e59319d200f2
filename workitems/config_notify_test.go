package workitems

import (
	"slices"
	"strings"
	"testing"
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
		ev   NotifyEvent
		want []string
	}{
		{tmpl("t1"), NotifyEscalation, []string{"chat", "hook"}},
		{tmpl("t1"), NotifyFailure, []string{"hook"}}, // chat takes escalations only
		{tmpl("t1"), NotifyDailyCap, nil},             // not in notify.events
		{tmpl("t2"), NotifyDailyCap, []string{"hook"}},
		{tmpl("t2"), NotifyEscalation, nil},
		{tmpl("t3"), NotifyFailure, nil}, // events: [] sends none
		{nil, NotifyEscalation, []string{"chat", "hook"}},
	} {
		if got := n.Targets(c.tmpl, c.ev); !slices.Equal(got, c.want) {
			name := "<gone>"
			if c.tmpl != nil {
				name = c.tmpl.Name
			}
			t.Errorf("%s %s: targets %v, want %v", name, c.ev, got, c.want)
		}
	}
	if d := (Notify{}).WithDefaults(); !slices.Equal(d.Events, AllNotifyEvents()) {
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
