package config

import (
	"fmt"
	"slices"
	"strings"

	"outerloop/workitems"
)

// A fleet template names many repositories (repos:, or repos_from: discovered through a forge
// at every tick); one tick makes one item per repository, each with its own workspace, branch
// and pull request (Template.ForRepo). fleet: bounds what a night of them may open and run.

// ReposFrom is repos_from: the repositories a forge lists for an owner, filtered.
type ReposFrom struct {
	Forge string `yaml:"forge" json:"forge"` // a key of forges
	Owner string `yaml:"owner" json:"owner"` // organisation or user
	// Topic keeps only repositories with this topic ("" keeps all).
	Topic string `yaml:"topic" json:"topic,omitempty"`
	// Exclude drops these owner/name repositories.
	Exclude []string `yaml:"exclude" json:"exclude,omitempty"`
	// Archived includes archived repositories (default false: skipped and counted).
	Archived bool `yaml:"archived" json:"archived,omitempty"`
}

// Fleet is fleet: the limits of a template's items across all workers and scheduler replicas
// (0: no limit). Items past a limit wait their turn, in order, holding no worker.
type Fleet struct {
	// MaxOpenPRs bounds the template's open pull requests (an item that may open one counts
	// from when it starts).
	MaxOpenPRs int `yaml:"max_open_prs" json:"max_open_prs,omitempty"`
	// PRsPerHour bounds the pull requests the template opens in any hour.
	PRsPerHour int `yaml:"prs_per_hour" json:"prs_per_hour,omitempty"`
	// Concurrency bounds the template's items running at once.
	Concurrency int `yaml:"concurrency" json:"concurrency,omitempty"`
	// PauseAfterFailures pauses the template after this many consecutive items of it (across
	// repositories) ended failed or escalated; a closed item resets the count.
	PauseAfterFailures int `yaml:"pause_after_failures" json:"pause_after_failures,omitempty"`
}

// Limited reports whether any limit gates the template's items.
func (f *Fleet) Limited() bool {
	return f != nil && (f.MaxOpenPRs > 0 || f.PRsPerHour > 0 || f.Concurrency > 0)
}

// RebasePolicy is deliver.rebase, conflicted when not given (left empty in the template, so a
// template written before rebase: keeps its version).
func (d *Deliver) RebasePolicy() workitems.RebasePolicy {
	if d.Rebase == "" {
		return workitems.RebaseConflicted
	}
	return d.Rebase
}

// IsFleet reports whether the template names many repositories (repos: or repos_from:).
func (t *Template) IsFleet() bool { return len(t.Repos) > 0 || t.ReposFrom != nil }

// ForRepo is the template as one repository of its fleet sees it: repo set, and the forge
// repository that delivery and CI use derived from it. Every reader of an item's template goes
// through Config.ItemTemplate, so the rest of the pipeline never knows it ran in a fleet.
func (t *Template) ForRepo(repo string) *Template {
	c := *t
	c.Repo, c.Repos, c.ReposFrom = repo, nil, nil
	slug, _ := workitems.RepoSlugFromURL(repo) // validated for a forge: Config.validateFleet
	if c.Deliver.Forge != "" {
		c.Deliver.Repo = slug
	}
	if ci := t.DoneCheck.CI; ci != nil && ci.Forge != "" {
		cp := *ci
		cp.Repo = slug
		c.DoneCheck.CI = &cp
	}
	return &c
}

// ItemTemplate returns the template an item runs with: its template, as its repository sees
// it when the item belongs to a fleet.
func (c *Config) ItemTemplate(it *workitems.Item) (*Template, bool) {
	t, ok := c.Template(it.Template)
	if !ok || it.Repo == "" || !t.IsFleet() {
		return t, ok
	}
	return t.ForRepo(it.Repo), true
}

// fleetProbeRepo stands for a discovered repository when a repos_from template's deliver and
// CI sections are checked.
const fleetProbeRepo = "https://fleet.invalid/owner/repository.git"

func (c *Config) validateFleet(t *Template, bad func(field, format string, args ...any) error) error {
	if t.Deliver.Rebase != "" && !slices.Contains(workitems.AllRebasePolicies(), t.Deliver.Rebase) {
		return bad("deliver.rebase", "%q is not one of %s", t.Deliver.Rebase, workitems.JoinKinds(workitems.AllRebasePolicies()))
	}
	if f := t.Fleet; f != nil {
		if f.MaxOpenPRs < 0 || f.PRsPerHour < 0 || f.Concurrency < 0 || f.PauseAfterFailures < 0 {
			return bad("fleet", "limits must not be negative")
		}
		if !t.IsFleet() {
			return bad("fleet", "applies to many repositories: give repos or repos_from instead of repo")
		}
		if f.PauseAfterFailures > 0 && t.Schedule == "" && len(t.Triggers) == 0 {
			return bad("fleet.pause_after_failures", "the breaker pauses the template's schedule and triggers: it has neither")
		}
		if (f.MaxOpenPRs > 0 || f.PRsPerHour > 0) && t.Deliver.Mode != workitems.DeliverPullRequest {
			return bad("fleet", "max_open_prs and prs_per_hour count pull requests: deliver.mode is %s", t.Deliver.Mode)
		}
	}
	if !t.IsFleet() {
		return nil
	}
	switch {
	case t.Repo != "":
		return bad("repo", "give repo (one repository) or repos/repos_from (a fleet), not both")
	case len(t.Repos) > 0 && t.ReposFrom != nil:
		return bad("repos_from", "give repos or repos_from, not both")
	case t.Deliver.Repo != "":
		return bad("deliver.repo", "a fleet delivers to each repository's own: drop it")
	case t.DoneCheck.CI != nil && t.DoneCheck.CI.Repo != "":
		return bad("done_check.ci.repo", "a fleet reads each repository's own CI: drop it")
	}
	seen := map[string]bool{}
	for i, r := range t.Repos {
		field := fmt.Sprintf("repos[%d]", i)
		if strings.TrimSpace(r) == "" {
			return bad(field, "empty")
		}
		k := workitems.RepoKey(r)
		if seen[k] {
			return bad(field, "%q is listed twice", r)
		}
		seen[k] = true
		if t.Deliver.Forge != "" || (t.DoneCheck.CI != nil && t.DoneCheck.CI.Forge != "") {
			if _, err := workitems.RepoSlugFromURL(r); err != nil {
				return bad(field, "%v: delivery through a forge needs each repository's URL", err)
			}
		}
	}
	if rf := t.ReposFrom; rf != nil {
		if _, ok := c.Forges[rf.Forge]; !ok {
			return bad("repos_from.forge", "%q is not a key of forges (%s)", rf.Forge, c.forgeNames())
		}
		if !repoPartRE.MatchString(rf.Owner) {
			return bad("repos_from.owner", "%q is not an owner name", rf.Owner)
		}
		for i, e := range rf.Exclude {
			if _, _, err := workitems.ParseRepoSlug(e); err != nil {
				return bad(fmt.Sprintf("repos_from.exclude[%d]", i), "%v", err)
			}
		}
	}
	return nil
}

// fleetProbe is the template whose deliver and CI sections stand for every repository's.
func (t *Template) fleetProbe() *Template {
	if len(t.Repos) > 0 {
		return t.ForRepo(t.Repos[0])
	}
	return t.ForRepo(fleetProbeRepo)
}
