package config

import (
	"errors"
	"fmt"
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
// An entry may instead subscribe to Alertmanager's alerts (alertmanager.go; package alerts):
//
//	  - alertmanager: {receiver: outerloop, match: {alertname: PaymentsErrorRate}, match_re: {severity: "page|critical"}}
//
// and a template's max_per_hour caps the items all its triggers make per hour.

// Trigger is one entry of a template's triggers:: a forge trigger (forge and event) or an
// alertmanager trigger (Alertmanager; alertmanager.go), never both.
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
}

// Source is what the trigger listens to (the source label of its firings' metric).
func (tr Trigger) Source() workitems.TriggerSource {
	if tr.Alertmanager != nil {
		return workitems.TriggerSourceAlertmanager
	}
	return workitems.TriggerSourceForge
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
	for j, tr := range t.Triggers {
		bad := func(field, format string, args ...any) error {
			return &ConfigError{Template: t.Name, Field: fmt.Sprintf("triggers[%d]%s", j, field), Err: fmt.Errorf(format, args...)}
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
			return bad(".forge", "missing: name a key of forges (%s)", c.forgeNames())
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
	if slices.ContainsFunc(t.Triggers, func(tr Trigger) bool { return tr.Alertmanager != nil }) && strings.Contains(t.Goal, "{{") {
		// An alert's goal is a text/template of the alert (alerts.RenderGoal).
		if _, err := template.New("goal").Option("missingkey=zero").Parse(t.Goal); err != nil {
			return &ConfigError{Template: t.Name, Field: "goal", Err: fmt.Errorf("not a template of the alert: %v", err)}
		}
	}
	return nil
}
