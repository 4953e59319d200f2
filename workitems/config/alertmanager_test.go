package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/workitems"
)

// alertConfig is triggersConfig with alertmanager receivers and extra template lines.
func alertConfig(receivers, templateExtra string, triggers ...string) string {
	s := triggersConfig(triggers...)
	s = strings.Replace(s, "templates:\n", "alertmanager:\n  receivers:\n"+receivers+"templates:\n", 1)
	return s + templateExtra
}

const twoReceivers = "    outerloop: {token_env: AM_TOKEN}\n    basic: {basic_auth: {username: am, password_file: /run/am}}\n"

func TestAnAlertmanagerTriggerParsesAsTheSpecWritesIt(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(alertConfig(twoReceivers, "    max_per_hour: 4\n",
		`alertmanager: {receiver: outerloop, match: {alertname: PaymentsErrorRate, severity: page}}`,
		`alertmanager: {receiver: basic, match_re: {severity: "page|critical"}}`,
		validTrigger[workitems.TriggerLabeled])))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := cfg.Template("t1")
	if tm.MaxPerHour != 4 || len(tm.Triggers) != 3 {
		t.Fatalf("max_per_hour %d, triggers %+v", tm.MaxPerHour, tm.Triggers)
	}
	am := tm.Triggers[0].Alertmanager
	if am == nil || am.Receiver != "outerloop" || am.Match["severity"] != "page" || tm.Triggers[0].Source() != workitems.TriggerSourceAlertmanager {
		t.Errorf("trigger %+v", tm.Triggers[0])
	}
	if tm.Triggers[2].Source() != workitems.TriggerSourceForge {
		t.Errorf("the forge trigger's source is %s", tm.Triggers[2].Source())
	}
}

func TestAlertmanagerMatchersAreAnchored(t *testing.T) {
	t.Parallel()
	tr := &AlertmanagerTrigger{Receiver: "r", Match: map[string]string{"alertname": "A"}, MatchRE: map[string]string{"severity": "page|critical"}}
	for labels, want := range map[[2]string]bool{
		{"A", "page"}: true, {"A", "critical"}: true, {"A", "pager"}: false, {"A", "xpage"}: false,
		{"A", ""}: false, {"AB", "page"}: false, {"a", "page"}: false,
	} {
		if got := tr.Matches(map[string]string{"alertname": labels[0], "severity": labels[1]}); got != want {
			t.Errorf("%v: matches %v, want %v", labels, got, want)
		}
	}
	// An absent label is the empty value, as in Alertmanager.
	if !(&AlertmanagerTrigger{MatchRE: map[string]string{"team": ".*"}}).Matches(map[string]string{}) {
		t.Error(`team=~".*" does not match an alert without team`)
	}
}

func TestAlertmanagerValidationNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, receivers, extra string
		triggers               []string
		tmpl, field, want      string
	}{
		{"an unknown receiver", twoReceivers, "", []string{`alertmanager: {receiver: x}`}, "t1", "triggers[0].alertmanager.receiver",
			`"x" is not a receiver of alertmanager: (basic, outerloop)`},
		{"no receiver", twoReceivers, "", []string{`alertmanager: {match: {a: b}}`}, "t1", "triggers[0].alertmanager.receiver", "missing"},
		{"a bad regex", twoReceivers, "", []string{`alertmanager: {receiver: outerloop, match_re: {severity: "(page"}}`}, "t1",
			"triggers[0].alertmanager.match_re.severity", "is not a regular expression"},
		{"forge and alertmanager at once", twoReceivers, "", []string{`{forge: gitea, event: labeled, label: x, alertmanager: {receiver: outerloop}}`},
			"t1", "triggers[0].alertmanager", "not both"},
		{"a duplicate", twoReceivers, "", []string{`alertmanager: {receiver: outerloop, match: {a: b}}`, `alertmanager: {receiver: outerloop, match: {a: b}}`},
			"t1", "triggers[1]", "the same trigger as triggers[0]"},
		{"a negative max_per_hour", twoReceivers, "    max_per_hour: -1\n", []string{`alertmanager: {receiver: outerloop}`}, "t1", "max_per_hour", "negative"},
		{"a goal that is not a template", twoReceivers, "", []string{`alertmanager: {receiver: outerloop}`}, "t1", "goal", "not a valid text/template"},
		{"a receiver with two secrets", "    outerloop: {token_env: A, token_file: /b}\n", "", nil, "", "alertmanager.receivers.outerloop", "exactly one"},
		{"basic auth without a username", "    outerloop: {basic_auth: {password_env: P}}\n", "", nil, "", "alertmanager.receivers.outerloop.basic_auth.username", "missing"},
		{"basic auth without a password", "    outerloop: {basic_auth: {username: am}}\n", "", nil, "", "alertmanager.receivers.outerloop.basic_auth", "exactly one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y := alertConfig(tc.receivers, tc.extra, tc.triggers...)
			if tc.name == "a goal that is not a template" {
				y = strings.Replace(y, "goal: do it", `goal: "fix {{ .alert.labels.x"`, 1)
			}
			_, err := ParseConfig([]byte(y))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if ce.Template != tc.tmpl || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (template %q, field %q), want template %q, field %q, containing %q",
					err, ce.Template, ce.Field, tc.tmpl, tc.field, tc.want)
			}
		})
	}
}

func TestAReceiverReadsItsSecretFromEnvOrFile(t *testing.T) {
	t.Parallel()
	env := func(k string) string { return map[string]string{"AM_TOKEN": "tok", "AM_PW": "pw"}[k] }
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    AlertReceiver
		want string
	}{
		{AlertReceiver{TokenEnv: "AM_TOKEN"}, "tok"},
		{AlertReceiver{TokenFile: p}, "from-file"},
		{AlertReceiver{BasicAuth: &AlertBasicAuth{Username: "am", PasswordEnv: "AM_PW"}}, "pw"},
		{AlertReceiver{BasicAuth: &AlertBasicAuth{Username: "am", PasswordFile: p}}, "from-file"},
	} {
		got, err := c.r.Secret(env)
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.r, got, err, c.want)
		}
	}
}
