package config

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"outerloop/workitems"
)

// triggersConfig is a valid config whose template t1 has the triggers given (YAML flow list
// entries, one a line).
func triggersConfig(triggers ...string) string {
	s := `
defaults:
  budget: {wall_time: 10m}
forges:
  gitea: {kind: gitea, base_url: "https://gitea.example.com"}
  github: {kind: github}
templates:
  - name: t1
    goal: do it
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`
	if len(triggers) > 0 {
		s += "    triggers:\n"
		for _, tr := range triggers {
			s += "      - " + tr + "\n"
		}
	}
	return s
}

// validTrigger is an accepted trigger of each event.
var validTrigger = map[workitems.TriggerEvent]string{
	workitems.TriggerCheckFailed: `{forge: gitea, event: check_failed, repo: acme/payments, branch: main, checks: [ci/test]}`,
	workitems.TriggerLabeled:     `{forge: gitea, event: labeled, label: outerloop-fix}`,
}

func TestEveryTriggerEventIsAcceptedByTheConfig(t *testing.T) {
	t.Parallel()
	for _, ev := range workitems.AllTriggerEvents() {
		t.Run(string(ev), func(t *testing.T) {
			t.Parallel()
			y, ok := validTrigger[ev]
			if !ok {
				t.Fatalf("event %q has no valid trigger in this test: add one", ev)
			}
			cfg, err := ParseConfig([]byte(triggersConfig(y)))
			if err != nil {
				t.Fatalf("a trigger of a supported event is refused: %v", err)
			}
			tm, _ := cfg.Template("t1")
			if len(tm.Triggers) != 1 || tm.Triggers[0].Event != ev || tm.Triggers[0].Forge != "gitea" {
				t.Errorf("triggers %+v", tm.Triggers)
			}
		})
	}
}

func TestTheSpecsTriggersParseAsWritten(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(triggersConfig(validTrigger[workitems.TriggerCheckFailed], validTrigger[workitems.TriggerLabeled])))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := cfg.Template("t1")
	want := []Trigger{
		{Forge: "gitea", Event: workitems.TriggerCheckFailed, Repo: "acme/payments", Branch: "main", Checks: []string{"ci/test"}},
		{Forge: "gitea", Event: workitems.TriggerLabeled, Label: "outerloop-fix"},
	}
	got, _ := json.Marshal(tm.Triggers)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("triggers\n got %s\nwant %s", got, exp)
	}
}

func TestTriggerValidationRefusesNamingTheTriggerAndField(t *testing.T) {
	t.Parallel()
	ok := validTrigger[workitems.TriggerCheckFailed]
	cases := []struct {
		name     string
		triggers []string
		field    string
		want     string
	}{
		{"no forge", []string{`{event: labeled, label: x}`}, "triggers[0].forge", "missing"},
		{"an unknown forge", []string{`{forge: gitlab, event: labeled, label: x}`}, "triggers[0].forge",
			`"gitlab" is not a key of forges (forges has gitea, github)`},
		{"an unknown event", []string{`{forge: gitea, event: pushed, repo: a/b}`}, "triggers[0].event",
			`"pushed" is not one of check_failed, labeled`},
		{"no event", []string{`{forge: gitea, repo: a/b}`}, "triggers[0].event", `"" is not one of`},
		{"a repo that is not owner/name", []string{`{forge: gitea, event: labeled, label: x, repo: payments}`},
			"triggers[0].repo", `"payments" is not owner/name`},
		{"check_failed without a repo", []string{`{forge: gitea, event: check_failed, branch: main}`},
			"triggers[0].repo", "missing"},
		{"check_failed without a branch", []string{`{forge: gitea, event: check_failed, repo: a/b}`},
			"triggers[0].branch", "missing"},
		{"check_failed on a bad branch name", []string{`{forge: gitea, event: check_failed, repo: a/b, branch: "a..b"}`},
			"triggers[0].branch", ""},
		{"an empty check name", []string{`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [ci/test, " "]}`},
			"triggers[0].checks[1]", "empty check name"},
		{"a check listed twice", []string{`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [ci/test, ci/test]}`},
			"triggers[0].checks[1]", `"ci/test" is listed twice`},
		{"a label on check_failed", []string{`{forge: gitea, event: check_failed, repo: a/b, branch: main, label: x}`},
			"triggers[0].label", "only for event labeled"},
		{"labeled without a label", []string{`{forge: gitea, event: labeled, repo: a/b}`},
			"triggers[0].label", "missing"},
		{"checks on labeled", []string{`{forge: gitea, event: labeled, label: x, checks: [ci/test]}`},
			"triggers[0].checks", "only for event check_failed"},
		{"a branch on labeled", []string{`{forge: gitea, event: labeled, label: x, branch: main}`},
			"triggers[0].branch", "only for event check_failed"},
		{"a duplicate", []string{ok, `{forge: gitea, event: labeled, label: x}`,
			`{forge: gitea, event: check_failed, repo: ACME/Payments, branch: main, checks: [ci/test]}`},
			"triggers[2]", "the same trigger as triggers[0]"},
		{"a duplicate with its checks in another order", []string{
			`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [lint, test]}`,
			`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [test, lint]}`},
			"triggers[1]", "the same trigger as triggers[0]"},
		{"an unknown key", []string{`{forge: gitea, event: labeled, label: x, labels: [y]}`},
			"triggers[0].labels", "unknown key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(triggersConfig(tc.triggers...)))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if ce.Template != "t1" || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (template %q, field %q), want template t1, field %q, containing %q",
					err, ce.Template, ce.Field, tc.field, tc.want)
			}
		})
	}
}

func TestTriggersThatDifferAreNotDuplicates(t *testing.T) {
	t.Parallel()
	_, err := ParseConfig([]byte(triggersConfig(
		`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [test]}`,
		`{forge: gitea, event: check_failed, repo: a/b, branch: main, checks: [lint]}`,
		`{forge: gitea, event: check_failed, repo: a/b, branch: release, checks: [test]}`,
		`{forge: github, event: check_failed, repo: a/b, branch: main, checks: [test]}`,
		`{forge: gitea, event: labeled, label: fix}`,
		`{forge: gitea, event: labeled, label: fix, repo: a/b}`,
	)))
	if err != nil {
		t.Fatal(err)
	}
}

func TestATemplateWithoutTriggersKeepsItsVersion(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(triggersConfig()))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := cfg.Template("t1")
	b, _ := json.Marshal(tm)
	if strings.Contains(string(b), "Triggers") {
		t.Errorf("a template without triggers marshals them (its version would change): %s", b)
	}
}

func TestTriggerItemIDsAreDeterministicAndApart(t *testing.T) {
	t.Parallel()
	sha := "9f1c2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b"
	id := workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/payments", sha)
	if want := "fix-ci@check-9f1c2a3b4c5d-"; !strings.HasPrefix(id, want) || len(id) != len(want)+8 {
		t.Errorf("check id %q, want %s and 8 hex digits", id, want)
	}
	if again := workitems.CheckTriggerItemID("fix-ci", "gitea", "ACME/Payments", strings.ToUpper(sha)); again != id {
		t.Errorf("the same commit of the same repository in other case: %q, want %q", again, id)
	}
	apart := map[string]string{
		"another template":   workitems.CheckTriggerItemID("other", "gitea", "acme/payments", sha),
		"another forge":      workitems.CheckTriggerItemID("fix-ci", "github", "acme/payments", sha),
		"another repository": workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/billing", sha),
		"another commit":     workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/payments", "0"+sha[1:]),
	}
	for what, other := range apart {
		if other == id {
			t.Errorf("%s makes the same id %q", what, id)
		}
	}
	lid := workitems.LabelTriggerItemID("triage", "gitea", "acme/payments", 42, "outerloop-fix")
	if !strings.HasPrefix(lid, "triage@label-42-") || lid != workitems.LabelTriggerItemID("triage", "gitea", "Acme/Payments", 42, "outerloop-fix") {
		t.Errorf("label id %q", lid)
	}
	for what, other := range map[string]string{
		"another issue": workitems.LabelTriggerItemID("triage", "gitea", "acme/payments", 43, "outerloop-fix"),
		"another label": workitems.LabelTriggerItemID("triage", "gitea", "acme/payments", 42, "outerloop-fix-now"),
		"another repo":  workitems.LabelTriggerItemID("triage", "gitea", "acme/billing", 42, "outerloop-fix"),
	} {
		if other == lid {
			t.Errorf("%s makes the same id %q", what, lid)
		}
	}
	for _, s := range []string{id, lid} {
		if strings.ContainsAny(s, "/ :") {
			t.Errorf("id %q holds a character a URL path or a key would trip on", s)
		}
	}
}

func TestAnAPITriggerParsesAndIsOfSourceAPI(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte(triggersConfig(validTrigger[workitems.TriggerLabeled], `api: {secret_env: PAYMENTS_TRIGGER_SECRET}`)))
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := cfg.Template("t1")
	if len(tm.Triggers) != 2 || tm.Triggers[1].API == nil || tm.Triggers[1].API.SecretEnv != "PAYMENTS_TRIGGER_SECRET" {
		t.Fatalf("triggers %+v", tm.Triggers)
	}
	if tm.Triggers[0].Source() != workitems.TriggerSourceForge || tm.Triggers[1].Source() != workitems.TriggerSourceAPI {
		t.Errorf("sources %s, %s", tm.Triggers[0].Source(), tm.Triggers[1].Source())
	}
	if a, ok := tm.APITrigger(); !ok || a != tm.Triggers[1].API {
		t.Errorf("APITrigger() = %v, %v", a, ok)
	}
	if _, err := ParseConfig([]byte(triggersConfig(`api: {secret_file: /etc/outerloop/trigger.secret}`))); err != nil {
		t.Errorf("secret_file refused: %v", err)
	}
}

func TestAPITriggerValidationNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, trigger, field, want string
		goal                       string
		more                       []string
	}{
		{name: "no secret", trigger: `api: {}`, field: "triggers[0].api.secret_env", want: "missing"},
		{name: "both places", trigger: `api: {secret_env: S, secret_file: /s}`, field: "triggers[0].api.secret_file", want: "not with secret_env"},
		{name: "bad env name", trigger: `api: {secret_env: "A-B"}`, field: "triggers[0].api.secret_env", want: "not an environment variable name"},
		{name: "relative file", trigger: `api: {secret_file: secret.txt}`, field: "triggers[0].api.secret_file", want: "not an absolute path"},
		{name: "forge and api", trigger: `{forge: gitea, api: {secret_env: S}}`, field: "triggers[0].forge", want: "never both"},
		{name: "label and api", trigger: `{label: x, api: {secret_env: S}}`, field: "triggers[0].label", want: "never both"},
		{name: "two api triggers", trigger: `api: {secret_env: S}`, more: []string{`api: {secret_env: T}`},
			field: "triggers[1].api", want: "one api trigger"},
		{name: "bad goal", trigger: `api: {secret_env: S}`, goal: `"Fix {{ .title"`, field: "goal", want: "text/template"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y := triggersConfig(append([]string{tc.trigger}, tc.more...)...)
			if tc.goal != "" {
				y = strings.Replace(y, "goal: do it", "goal: "+tc.goal, 1)
			}
			_, err := ParseConfig([]byte(y))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *ConfigError", err)
			}
			if ce.Template != "t1" || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q (field %q), want field %q containing %q", err, ce.Field, tc.field, tc.want)
			}
		})
	}
}

func TestAPITriggerSecretIsReadAtEachCallAndNeverShown(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHORT": "abc", "GOOD": "0123456789abcdef-xyz"}
	getenv := func(k string) string { return env[k] }
	if s, err := (APITrigger{SecretEnv: "GOOD"}).Secret(getenv); err != nil || s != env["GOOD"] {
		t.Errorf("GOOD: %q, %v", s, err)
	}
	for _, name := range []string{"UNSET", "SHORT"} {
		_, err := (APITrigger{SecretEnv: name}).Secret(getenv)
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "abc") {
			t.Errorf("%s: error %v, want one naming the variable and not its value", name, err)
		}
	}
	f := t.TempDir() + "/secret"
	if err := os.WriteFile(f, []byte(env["GOOD"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := (APITrigger{SecretFile: f}).Secret(getenv); err != nil || s != env["GOOD"] {
		t.Errorf("file: %q, %v", s, err)
	}
}

func TestATriggerSaysWhatItListensTo(t *testing.T) {
	for _, c := range []struct {
		tr   Trigger
		want string
	}{
		{Trigger{Forge: "gitea", Event: workitems.TriggerCheckFailed, Repo: "acme/pay", Branch: "main", Checks: []string{"ci/test", "ci/lint"}},
			"gitea check_failed acme/pay@main [ci/test, ci/lint]"},
		{Trigger{Forge: "gitea", Event: workitems.TriggerLabeled, Label: "outerloop-fix"}, "gitea labeled outerloop-fix"},
		{Trigger{API: &APITrigger{SecretEnv: "X"}}, "api"},
		{Trigger{Alertmanager: &AlertmanagerTrigger{Receiver: "ol", Match: map[string]string{"severity": "page", "alertname": "A"},
			MatchRE: map[string]string{"team": "pay|core"}}}, "alertmanager ol {alertname=A, severity=page, team=~pay|core}"},
	} {
		if got := c.tr.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.tr, got, c.want)
		}
	}
}
