package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"outerloop/workitems"
)

// Triggers. A template's triggers: are forge events that make items of it, besides its
// schedule and a person's runs (scheduler/triggers.go matches the events; docs/triggers.md):
//
//	triggers:
//	  - {forge: gitea, event: check_failed, repo: acme/payments, branch: main, checks: [ci/test]}
//	  - {forge: gitea, event: labeled, label: outerloop-fix}
//
// check_failed needs repo and branch (a red build on a branch is what it is for: without a
// branch every failing pull request, outerloop's own among them, would make an item); checks
// narrows it to those check names (empty: any). labeled needs label; repo narrows it to one
// repository (empty: any repository of the forge).
//
// An api trigger lets any caller holding the template's secret make an item over HTTP
// (POST /api/templates/{name}/trigger, api/trigger.go):
//
//	triggers:
//	  - api: {secret_env: PAYMENTS_TRIGGER_SECRET}
//
// An alertmanager trigger subscribes to a receiver's alerts (alertmanager.go; package alerts):
//
//	  - alertmanager: {receiver: outerloop, match: {alertname: PaymentsErrorRate}, match_re: {severity: "page|critical"}}
//
// An entry is one kind: a forge trigger (forge, event, …), an api trigger or an alertmanager
// trigger; a template has at most one api trigger (one secret). A template's max_per_hour caps
// the items all its triggers make per hour (scheduler.Queue.SubmitTriggered).

// Trigger is one entry of a template's triggers:: a forge trigger (forge and event), an api
// trigger (API) or an alertmanager trigger (Alertmanager; alertmanager.go), one kind each.
type Trigger struct {
	// Forge is the key of forges: whose webhooks (POST /hooks/{forge}) are matched.
	Forge string                 `yaml:"forge" json:"forge,omitempty"`
	Event workitems.TriggerEvent `yaml:"event" json:"event,omitempty"`
	// Repo is owner/name (check_failed: required; labeled: empty matches any repository).
	Repo string `yaml:"repo" json:"repo,omitempty"`
	// Branch is the branch whose checks are watched (check_failed only, required).
	Branch string `yaml:"branch" json:"branch,omitempty"`
	// Checks are the check names that count (check_failed only; empty: any check).
	Checks []string `yaml:"checks" json:"checks,omitempty"`
	// Label is the label that makes an item (labeled only, required).
	Label string `yaml:"label" json:"label,omitempty"`
	// Alertmanager subscribes to a receiver's alerts instead of a forge's events.
	Alertmanager *AlertmanagerTrigger `yaml:"alertmanager" json:"alertmanager,omitempty"`
	// API makes the entry an api trigger (and none of the fields above may be set).
	API *APITrigger `yaml:"api" json:"api,omitempty"`
}

// APITrigger is the secret a caller of POST /api/templates/{name}/trigger proves, as a bearer
// token or as the key of an HMAC signature. Exactly one of SecretEnv and SecretFile is set;
// both are read at each request, so a rotated secret applies without a restart.
type APITrigger struct {
	// SecretEnv names the environment variable holding the secret.
	SecretEnv string `yaml:"secret_env" json:"secret_env,omitempty"`
	// SecretFile is a file holding the secret (surrounding white space is not part of it).
	SecretFile string `yaml:"secret_file" json:"secret_file,omitempty"`
}

// MinAPISecret is the shortest secret an api trigger accepts: a shorter one is treated as unset.
const MinAPISecret = 16

// Secret reads the trigger's secret through getenv (os.Getenv when nil) or its file. An empty
// or too short secret is an error naming where it was looked for, never containing it.
func (a APITrigger) Secret(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var s, where string
	if a.SecretEnv != "" {
		s, where = getenv(a.SecretEnv), "the environment variable "+a.SecretEnv
	} else {
		b, err := os.ReadFile(a.SecretFile)
		if err != nil {
			return "", fmt.Errorf("secret_file %s: %w", a.SecretFile, err)
		}
		s, where = strings.TrimSpace(string(b)), "the file "+a.SecretFile
	}
	switch {
	case s == "":
		return "", fmt.Errorf("%s is empty or unset", where)
	case len(s) < MinAPISecret:
		return "", fmt.Errorf("%s holds fewer than %d characters", where, MinAPISecret)
	}
	return s, nil
}

// Source is what the trigger listens to (the source label of its firings' metric).
func (tr Trigger) Source() workitems.TriggerSource {
	switch {
	case tr.API != nil:
		return workitems.TriggerSourceAPI
	case tr.Alertmanager != nil:
		return workitems.TriggerSourceAlertmanager
	}
	return workitems.TriggerSourceForge
}

// String says what the trigger listens to, in a line (the console's templates page):
// "gitea check_failed acme/payments@main [ci/test]", "alertmanager outerloop {alertname=X,
// severity=~page|critical}", "api".
func (tr Trigger) String() string {
	switch {
	case tr.API != nil:
		return "api"
	case tr.Alertmanager != nil:
		var m []string
		for _, k := range slices.Sorted(maps.Keys(tr.Alertmanager.Match)) {
			m = append(m, k+"="+tr.Alertmanager.Match[k])
		}
		for _, k := range slices.Sorted(maps.Keys(tr.Alertmanager.MatchRE)) {
			m = append(m, k+"=~"+tr.Alertmanager.MatchRE[k])
		}
		return "alertmanager " + tr.Alertmanager.Receiver + " {" + strings.Join(m, ", ") + "}"
	}
	s := tr.Forge + " " + string(tr.Event)
	switch {
	case tr.Repo != "" && tr.Branch != "":
		s += " " + tr.Repo + "@" + tr.Branch
	case tr.Repo != "":
		s += " " + tr.Repo
	}
	if tr.Label != "" {
		s += " " + tr.Label
	}
	if len(tr.Checks) > 0 {
		s += " [" + strings.Join(tr.Checks, ", ") + "]"
	}
	return s
}

// APITrigger returns the template's api trigger, if it has one.
func (t *Template) APITrigger() (*APITrigger, bool) {
	for _, tr := range t.Triggers {
		if tr.API != nil {
			return tr.API, true
		}
	}
	return nil, false
}

// key identifies a trigger for the duplicate check: repositories compare case-insensitively
// (as forges do), check names as a set.
func (tr Trigger) key() string {
	if tr.Alertmanager != nil {
		return tr.Alertmanager.key()
	}
	checks := slices.Clone(tr.Checks)
	slices.Sort(checks)
	return strings.Join([]string{tr.Forge, string(tr.Event), strings.ToLower(tr.Repo), tr.Branch,
		strings.Join(checks, "\x1f"), tr.Label}, "\x00")
}

// validateTriggers checks a template's triggers; the error names triggers[j] and its field.
func (c *Config) validateTriggers(t *Template) error {
	seen := map[string]int{}
	apiAt := -1
	for j, tr := range t.Triggers {
		bad := func(field, format string, args ...any) error {
			return &ConfigError{Template: t.Name, Field: fmt.Sprintf("triggers[%d]%s", j, field), Err: fmt.Errorf(format, args...)}
		}
		if tr.API != nil && tr.Alertmanager != nil {
			return bad(".api", "not with alertmanager: an entry is one kind of trigger")
		}
		if tr.API != nil {
			if err := validateAPITrigger(tr, bad); err != nil {
				return err
			}
			if apiAt >= 0 {
				return bad(".api", "a template has one api trigger (one secret); triggers[%d] is one", apiAt)
			}
			apiAt = j
			continue
		}
		if tr.Alertmanager != nil {
			if tr.Forge != "" || tr.Event != "" || tr.Repo != "" || tr.Branch != "" || len(tr.Checks) > 0 || tr.Label != "" {
				return bad(".alertmanager", "an entry is a forge trigger (forge, event, ...) or an alertmanager trigger, not both")
			}
			if f, err := c.validateAlertTrigger(tr.Alertmanager); err != nil {
				return bad(".alertmanager"+f, "%v", err)
			}
			if k, dup := seen[tr.key()]; dup {
				return bad("", "the same trigger as triggers[%d]", k)
			}
			seen[tr.key()] = j
			continue
		}
		if tr.Forge == "" {
			return bad(".forge", "missing: name a key of forges (%s), or make it an api or alertmanager trigger", c.forgeNames())
		}
		if _, ok := c.Forges[tr.Forge]; !ok {
			return bad(".forge", "%q is not a key of forges (%s)", tr.Forge, c.forgeNames())
		}
		if !slices.Contains(workitems.AllTriggerEvents(), tr.Event) {
			return bad(".event", "%q is not one of %s", tr.Event, workitems.JoinKinds(workitems.AllTriggerEvents()))
		}
		if tr.Repo != "" {
			if _, _, err := workitems.ParseRepoSlug(tr.Repo); err != nil {
				return bad(".repo", "%v", err)
			}
		}
		switch tr.Event {
		case workitems.TriggerCheckFailed:
			if tr.Repo == "" {
				return bad(".repo", "missing: check_failed watches one repository (owner/name)")
			}
			if tr.Branch == "" {
				return bad(".branch", "missing: check_failed watches the head of one branch (e.g. main)")
			}
			if err := workitems.CheckBranchName(tr.Branch); err != nil {
				return bad(".branch", "%v", err)
			}
			for k, name := range tr.Checks {
				if strings.TrimSpace(name) == "" {
					return bad(fmt.Sprintf(".checks[%d]", k), "empty check name")
				}
				if slices.Contains(tr.Checks[:k], name) {
					return bad(fmt.Sprintf(".checks[%d]", k), "%q is listed twice", name)
				}
			}
			if tr.Label != "" {
				return bad(".label", "only for event labeled")
			}
		case workitems.TriggerLabeled:
			if strings.TrimSpace(tr.Label) == "" {
				return bad(".label", "missing: name the label that makes an item")
			}
			if tr.Branch != "" {
				return bad(".branch", "only for event check_failed")
			}
			if len(tr.Checks) > 0 {
				return bad(".checks", "only for event check_failed")
			}
		}
		if k, dup := seen[tr.key()]; dup {
			return bad("", "the same trigger as triggers[%d]", k)
		}
		seen[tr.key()] = j
	}
	if t.MaxPerHour > 0 && len(t.Triggers) == 0 {
		return &ConfigError{Template: t.Name, Field: "max_per_hour", Err: errors.New("caps the items of triggers: and the template has none")}
	}
	rendered := apiAt >= 0 || slices.ContainsFunc(t.Triggers, func(tr Trigger) bool { return tr.Alertmanager != nil })
	if rendered && strings.Contains(t.Goal, "{{") {
		// A caller's fields (api/trigger.go) or an alert (alerts.RenderGoal) fill the goal; a
		// goal that cannot be parsed would refuse every firing.
		if _, err := template.New("goal").Option("missingkey=zero").Parse(t.Goal); err != nil {
			return &ConfigError{Template: t.Name, Field: "goal", Err: fmt.Errorf("not a valid text/template: %w", err)}
		}
	}
	return nil
}

// validateAPITrigger checks an api trigger: no forge fields, exactly one place for the secret.
func validateAPITrigger(tr Trigger, bad func(field, format string, args ...any) error) error {
	forgeFields := []struct {
		name string
		set  bool
	}{{"forge", tr.Forge != ""}, {"event", tr.Event != ""}, {"repo", tr.Repo != ""}, {"branch", tr.Branch != ""},
		{"checks", len(tr.Checks) > 0}, {"label", tr.Label != ""}}
	for _, f := range forgeFields {
		if f.set {
			return bad("."+f.name, "not with api: an entry is a forge trigger or an api trigger, never both")
		}
	}
	a := tr.API
	switch {
	case a.SecretEnv == "" && a.SecretFile == "":
		return bad(".api.secret_env", "missing: name the environment variable holding the caller's secret (or set secret_file)")
	case a.SecretEnv != "" && a.SecretFile != "":
		return bad(".api.secret_file", "not with secret_env: the secret is in one place")
	case a.SecretEnv != "" && !envNameRE.MatchString(a.SecretEnv):
		return bad(".api.secret_env", "%q is not an environment variable name", a.SecretEnv)
	case a.SecretFile != "" && !filepath.IsAbs(a.SecretFile):
		return bad(".api.secret_file", "%q is not an absolute path", a.SecretFile)
	}
	return nil
}
