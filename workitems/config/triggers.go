package config

import (
	"fmt"
	"slices"
	"strings"

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

// Trigger is one entry of a template's triggers:.
type Trigger struct {
	// Forge is the key of forges: whose webhooks (POST /hooks/{forge}) are matched.
	Forge string                 `yaml:"forge" json:"forge"`
	Event workitems.TriggerEvent `yaml:"event" json:"event"`
	// Repo is owner/name (check_failed: required; labeled: empty matches any repository).
	Repo string `yaml:"repo" json:"repo,omitempty"`
	// Branch is the branch whose checks are watched (check_failed only, required).
	Branch string `yaml:"branch" json:"branch,omitempty"`
	// Checks are the check names that count (check_failed only; empty: any check).
	Checks []string `yaml:"checks" json:"checks,omitempty"`
	// Label is the label that makes an item (labeled only, required).
	Label string `yaml:"label" json:"label,omitempty"`
}

// Source is what the trigger listens to (the source label of its firings' metric).
func (tr Trigger) Source() workitems.TriggerSource { return workitems.TriggerSourceForge }

// key identifies a trigger for the duplicate check: repositories compare case-insensitively
// (as forges do), check names as a set.
func (tr Trigger) key() string {
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
	return nil
}
