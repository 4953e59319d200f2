package workitems

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// TriggerEvent is the forge event a trigger subscribes to.
type TriggerEvent string

// The trigger events.
const (
	// TriggerCheckFailed: a check (commit status or check run) failed on the head of a branch.
	TriggerCheckFailed TriggerEvent = "check_failed"
	// TriggerLabeled: an issue or a pull request got a label.
	TriggerLabeled TriggerEvent = "labeled"
)

// AllTriggerEvents lists every trigger event.
func AllTriggerEvents() []TriggerEvent { return []TriggerEvent{TriggerCheckFailed, TriggerLabeled} }

// Trigger is one entry of a template's triggers:.
type Trigger struct {
	// Forge is the key of forges: whose webhooks (POST /hooks/{forge}) are matched.
	Forge string       `yaml:"forge" json:"forge"`
	Event TriggerEvent `yaml:"event" json:"event"`
	// Repo is owner/name (check_failed: required; labeled: empty matches any repository).
	Repo string `yaml:"repo" json:"repo,omitempty"`
	// Branch is the branch whose checks are watched (check_failed only, required).
	Branch string `yaml:"branch" json:"branch,omitempty"`
	// Checks are the check names that count (check_failed only; empty: any check).
	Checks []string `yaml:"checks" json:"checks,omitempty"`
	// Label is the label that makes an item (labeled only, required).
	Label string `yaml:"label" json:"label,omitempty"`
}

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
		if !slices.Contains(AllTriggerEvents(), tr.Event) {
			return bad(".event", "%q is not one of %s", tr.Event, JoinKinds(AllTriggerEvents()))
		}
		if tr.Repo != "" {
			if _, _, err := ParseRepoSlug(tr.Repo); err != nil {
				return bad(".repo", "%v", err)
			}
		}
		switch tr.Event {
		case TriggerCheckFailed:
			if tr.Repo == "" {
				return bad(".repo", "missing: check_failed watches one repository (owner/name)")
			}
			if tr.Branch == "" {
				return bad(".branch", "missing: check_failed watches the head of one branch (e.g. main)")
			}
			if err := CheckBranchName(tr.Branch); err != nil {
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
		case TriggerLabeled:
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

// CheckTriggerItemID is the deterministic id of the item a check_failed trigger makes for a
// commit: one per (template, forge, repository, commit), so a second failing check on the
// same commit, a delivery replayed, or another replica handling the same delivery makes none.
// It reads <template>@check-<sha, 12 digits>-<8 hex digits of a hash of forge, repo and sha>.
func CheckTriggerItemID(template, forge, repo, sha string) string {
	return template + "@check-" + shortSHA(sha) + "-" + triggerHash(forge, repo, strings.ToLower(sha))
}

// LabelTriggerItemID is the deterministic id of the item a labeled trigger makes: one per
// (template, forge, repository, issue or pull request number, label).
// It reads <template>@label-<number>-<8 hex digits of a hash of forge, repo, number and label>.
func LabelTriggerItemID(template, forge, repo string, number int, label string) string {
	n := strconv.Itoa(number)
	return template + "@label-" + n + "-" + triggerHash(forge, repo, n, label)
}

// triggerHash hashes a trigger's identifying facts; the repository case-insensitively.
func triggerHash(forge, repo string, rest ...string) string {
	h := sha256.New()
	for _, s := range append([]string{forge, strings.ToLower(repo)}, rest...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

func shortSHA(sha string) string {
	sha = strings.ToLower(sha)
	if len(sha) > 12 {
		sha = sha[:12]
	}
	var b strings.Builder
	for _, r := range sha {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
