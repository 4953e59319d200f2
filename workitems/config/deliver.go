package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"outerloop/workitems"
)

// DefaultGitHubAPI is the REST API root of github.com.
const DefaultGitHubAPI = "https://api.github.com"

// ForgeConfig is one entry of the deployment's forges: map. The token is read from the
// environment variable TokenEnv when it is used; it never appears in config, logs or events.
type ForgeConfig struct {
	Kind workitems.ForgeKind `yaml:"kind" json:"kind"`
	// BaseURL is the API root for github (default https://api.github.com; GitHub Enterprise:
	// https://HOST/api/v3) and the server's URL for gitea (required).
	BaseURL string `yaml:"base_url" json:"base_url"`
	// TokenEnv names the environment variable holding the token (default GITHUB_TOKEN for
	// github, GITEA_TOKEN for gitea).
	TokenEnv string `yaml:"token_env" json:"token_env"`
	// WebhookSecretEnv names the environment variable holding the secret the forge signs its
	// webhooks with (read at each delivery, so it rotates without a restart). Without it the
	// forge's webhooks (POST /hooks/{forge}) are refused.
	WebhookSecretEnv string `yaml:"webhook_secret_env" json:"webhook_secret_env,omitempty"`
}

// DefaultBranchPattern is the branch a template delivers to unless it names one: one branch per
// template means at most one open pull request, which retries and later ticks update.
const DefaultBranchPattern = "outerloop/{template}"

// Deliver is a template's deliver: section.
type Deliver struct {
	Forge string `yaml:"forge" json:"forge,omitempty"` // a key of forges
	// Repo is owner/name on the forge (default parsed from the template's repo URL).
	Repo string                 `yaml:"repo" json:"repo,omitempty"`
	Mode workitems.DeliveryMode `yaml:"mode" json:"mode"` // default pull_request with a forge, patch without
	// Base is the branch the change goes to; "" is the remote's default branch.
	Base string `yaml:"base" json:"base,omitempty"`
	// Branch is the branch pushed to; {template} and {item} expand (BranchFor).
	Branch string `yaml:"branch" json:"branch"`
	// Title is the pull request's title and the commit's subject (default: the goal's first line).
	Title       string                `yaml:"title" json:"title"`
	Labels      []string              `yaml:"labels" json:"labels,omitempty"`
	Draft       bool                  `yaml:"draft" json:"draft,omitempty"`
	Automerge   bool                  `yaml:"automerge" json:"automerge,omitempty"` // merge once the verifier closes the item
	MergeMethod workitems.MergeMethod `yaml:"merge_method" json:"merge_method"`     // default squash
	// Author is "Name <email>" for the delivery commit (default DefaultAuthor).
	Author string `yaml:"author" json:"author,omitempty"`
	// Review makes the pull request's review evidence: the item waits for it after green CI
	// (nil: no review is waited for, the item closes on its evidence).
	Review *Review `yaml:"review" json:"review,omitempty"`
	// Rebase says when an open pull request whose base moved gets a new commit (default
	// conflicted); a retry or a review round always may.
	Rebase workitems.RebasePolicy `yaml:"rebase" json:"rebase,omitempty"`
	// OnForeignCommits says what to do with a branch someone else committed to since
	// outerloop's last push (default stop: never rewrite a commit outerloop did not push).
	OnForeignCommits workitems.ForeignCommitPolicy `yaml:"on_foreign_commits" json:"on_foreign_commits,omitempty"`
	// DraftUntil opens the pull request as a draft until the condition holds ("" : as Draft says).
	DraftUntil workitems.DraftUntil `yaml:"draft_until" json:"draft_until,omitempty"`
	// KeepBranch keeps the branch after its pull request is merged or closed (default: outerloop
	// deletes its own branch, unless a person committed to it).
	KeepBranch bool `yaml:"keep_branch" json:"keep_branch,omitempty"`
}

// ForeignCommits is deliver.on_foreign_commits, stop when not given.
func (d *Deliver) ForeignCommits() workitems.ForeignCommitPolicy {
	if d.OnForeignCommits == "" {
		return workitems.ForeignStop
	}
	return d.OnForeignCommits
}

// OpensDraft reports whether a new pull request is opened as a draft.
func (d *Deliver) OpensDraft() bool { return d.Draft || d.DraftUntil != "" }

// ForgeRepo is the forge and repository d delivers to (workitems.DeliverTarget); "" and "" for
// a nil d.
func (d *Deliver) ForgeRepo() (forge, repo string) {
	if d == nil {
		return "", ""
	}
	return d.Forge, d.Repo
}

// Review is deliver.review: the pull request's review as evidence.
type Review struct {
	// RequiredApprovals is how many approvals (by accounts other than outerloop's, of the
	// pushed commit) close the item (default 1).
	RequiredApprovals int `yaml:"required_approvals" json:"required_approvals"`
	// OnChangesRequested: retry (default) or escalate.
	OnChangesRequested workitems.OnChangesRequested `yaml:"on_changes_requested" json:"on_changes_requested"`
	// MaxRounds bounds the retries a review may start (default 3); past it the item escalates.
	MaxRounds int `yaml:"max_rounds" json:"max_rounds"`
	// Wait is how long the item waits for a review before it escalates (default 72h).
	Wait workitems.Duration `yaml:"wait" json:"wait"`
}

// The review defaults.
const (
	DefaultReviewRounds = 3
	DefaultReviewWait   = workitems.Duration(72 * time.Hour)
)

// branchPlaceholders are the placeholders Deliver.Branch may use.
var branchPlaceholders = []string{"{template}", "{item}"}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// BranchFor expands the branch pattern for one item. Characters git refuses in a ref name are
// replaced by '-', so any item id gives a valid branch.
func (d *Deliver) BranchFor(template, item string) string {
	// One pass by hand: a strings.Replacer built per call was an eighth of parsing a config of
	// 10k templates (validation expands every template's branch).
	t, it := refSafe(template), refSafe(item)
	var b strings.Builder
	for s := d.Branch; s != ""; {
		switch {
		case strings.HasPrefix(s, "{template}"):
			b.WriteString(t)
			s = s[len("{template}"):]
		case strings.HasPrefix(s, "{item}"):
			b.WriteString(it)
			s = s[len("{item}"):]
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String()
}

// refSafe replaces what git-check-ref-format forbids inside one component.
func refSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\/", r) {
			return '-'
		}
		return r
	}, s)
	s = strings.ReplaceAll(s, "..", "-")
	s = strings.ReplaceAll(s, "@{", "-")
	for {
		t := strings.TrimSuffix(strings.Trim(s, "."), ".lock")
		if t == s {
			return s
		}
		s = t
	}
}

// firstLine is s's first non-blank line, trimmed and clipped to n runes.
func firstLine(s string, n int) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if r := []rune(l); len(r) > n {
				return strings.TrimSpace(string(r[:n-1])) + "…"
			}
			return l
		}
	}
	return ""
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// repoPartRE is one part of owner/name, as workitems.ParseRepoSlug checks it.
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// reservedForgeName is the CI provider name a forge key may not take (done_check.ci looks
// sources up by forge key or provider in one namespace).
const reservedForgeName = string(workitems.CIProviderWebhook)

func (c *Config) applyForgeDefaults() {
	for name, f := range c.Forges {
		if f.BaseURL == "" && f.Kind == workitems.ForgeGitHub {
			f.BaseURL = DefaultGitHubAPI
		}
		if f.TokenEnv == "" {
			switch f.Kind {
			case workitems.ForgeGitHub:
				f.TokenEnv = "GITHUB_TOKEN"
			case workitems.ForgeGitea:
				f.TokenEnv = "GITEA_TOKEN"
			}
		}
		c.Forges[name] = f
	}
	// done_check.ci.provider: github (configs written before forges:) reads from the forge of
	// kind github; with none, from a default one at api.github.com with GITHUB_TOKEN.
	for i := range c.Templates {
		ci := c.Templates[i].DoneCheck.CI
		if ci == nil || ci.Forge != "" || ci.Provider != workitems.CIProviderGitHub {
			continue
		}
		names := c.forgesOfKind(workitems.ForgeGitHub)
		switch {
		case len(names) == 1:
			ci.Forge = names[0]
		case len(names) == 0:
			if _, taken := c.Forges["github"]; taken {
				continue // Validate names the conflict
			}
			if c.Forges == nil {
				c.Forges = map[string]ForgeConfig{}
			}
			c.Forges["github"] = ForgeConfig{Kind: workitems.ForgeGitHub, BaseURL: DefaultGitHubAPI, TokenEnv: "GITHUB_TOKEN"}
			ci.Forge = "github"
		}
	}
}

// forgesOfKind returns the keys of the forges of kind k, sorted.
func (c *Config) forgesOfKind(k workitems.ForgeKind) []string {
	var names []string
	for n, f := range c.Forges {
		if f.Kind == k {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

func (c *Config) forgeNames() string {
	var names []string
	for n := range c.Forges {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "forges: is empty"
	}
	slices.Sort(names)
	return "forges has " + strings.Join(names, ", ")
}

func applyDeliverDefaults(t *Template) {
	d := &t.Deliver
	if d.Mode == "" {
		d.Mode = workitems.DeliverPatch
		if d.Forge != "" {
			d.Mode = workitems.DeliverPullRequest
		}
	}
	if d.Branch == "" {
		d.Branch = DefaultBranchPattern
	}
	if d.MergeMethod == "" {
		d.MergeMethod = workitems.MergeSquash
	}
	if d.Title == "" {
		d.Title = firstLine(t.Goal, 120)
	}
	if d.Repo == "" && d.Forge != "" {
		d.Repo, _ = workitems.RepoSlugFromURL(t.Repo) // validated: a forge needs a repo
	}
	if ci := t.DoneCheck.CI; ci != nil && ci.Repo == "" && ci.Forge != "" {
		ci.Repo = d.Repo
		if ci.Repo == "" {
			ci.Repo, _ = workitems.RepoSlugFromURL(t.Repo)
		}
	}
}

func (c *Config) validateForges(forges ForgeRegistry) error {
	kinds := forges.ForgeKinds()
	for name, f := range c.Forges {
		field := "forges." + name
		bad := func(sub string, err error) error { return &ConfigError{Field: field + sub, Err: err} }
		if !nameRE.MatchString(name) {
			return bad("", errors.New("use lower-case letters, digits, '.', '_' and '-' (at most 63)"))
		}
		if name == reservedForgeName {
			return bad("", errors.New(`the name "webhook" is reserved for done_check.ci.provider: webhook`))
		}
		if !slices.Contains(kinds, f.Kind) {
			return bad(".kind", fmt.Errorf("%q is not one of %s", f.Kind, workitems.JoinKinds(kinds)))
		}
		if f.BaseURL == "" {
			return bad(".base_url", errors.New("missing (the server's URL, e.g. https://gitea.example.com)"))
		}
		u, err := url.Parse(f.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return bad(".base_url", fmt.Errorf("%q is not an http(s) URL", f.BaseURL))
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			// A token in the URL would end up in logs; it belongs in token_env.
			return bad(".base_url", errors.New("must not carry credentials, a query or a fragment (put the token in token_env)"))
		}
		if !envNameRE.MatchString(f.TokenEnv) {
			// Only the name is checked here: the variable is read when the forge is used.
			return bad(".token_env", fmt.Errorf("%q is not an environment variable name", f.TokenEnv))
		}
		if f.WebhookSecretEnv != "" && !envNameRE.MatchString(f.WebhookSecretEnv) {
			return bad(".webhook_secret_env", fmt.Errorf("%q is not an environment variable name", f.WebhookSecretEnv))
		}
	}
	return nil
}

func (c *Config) validateDeliver(t *Template, bad func(field, format string, args ...any) error) error {
	d := &t.Deliver
	if d.Forge != "" {
		if _, ok := c.Forges[d.Forge]; !ok {
			return bad("deliver.forge", "%q is not a key of forges (%s)", d.Forge, c.forgeNames())
		}
	}
	if !slices.Contains(workitems.AllDeliveryModes(), d.Mode) {
		return bad("deliver.mode", "%q is not one of %s", d.Mode, workitems.JoinKinds(workitems.AllDeliveryModes()))
	}
	if d.Mode != workitems.DeliverPatch && d.Forge == "" {
		return bad("deliver.forge", "mode %s needs a forge (a key of forges)", d.Mode)
	}
	if d.Forge != "" {
		if d.Repo == "" {
			return bad("deliver.repo", "missing, and repo %q gives no owner/name: name the forge's owner/name", t.Repo)
		}
		if _, _, err := workitems.ParseRepoSlug(d.Repo); err != nil {
			return bad("deliver.repo", "%v", err)
		}
	}
	if d.Base != "" {
		if err := workitems.CheckBranchName(d.Base); err != nil {
			return bad("deliver.base", "%v", err)
		}
	}
	for _, p := range placeholderRE.FindAllString(d.Branch, -1) {
		if !slices.Contains(branchPlaceholders, p) {
			return bad("deliver.branch", "unknown placeholder %s (known: %s)", p, strings.Join(branchPlaceholders, ", "))
		}
	}
	if strings.ContainsAny(placeholderRE.ReplaceAllString(d.Branch, ""), "{}") {
		return bad("deliver.branch", "%q has an unbalanced brace", d.Branch)
	}
	if err := workitems.CheckBranchName(d.BranchFor(t.Name, t.Name+"@20060102T150405Z")); err != nil {
		return bad("deliver.branch", "%v", err)
	}
	if d.Base != "" && d.Base == d.Branch {
		return bad("deliver.branch", "%q is also the base branch", d.Branch)
	}
	seen := map[string]bool{}
	for _, l := range d.Labels {
		switch {
		case strings.TrimSpace(l) == "":
			return bad("deliver.labels", "a label is empty")
		case len([]rune(l)) > 50:
			return bad("deliver.labels", "%q is longer than 50 characters", l)
		case seen[l]:
			return bad("deliver.labels", "%q is listed twice", l)
		}
		seen[l] = true
	}
	if !slices.Contains(workitems.AllMergeMethods(), d.MergeMethod) {
		return bad("deliver.merge_method", "%q is not one of %s", d.MergeMethod, workitems.JoinKinds(workitems.AllMergeMethods()))
	}
	if d.Automerge && d.Mode != workitems.DeliverPullRequest {
		return bad("deliver.automerge", "needs mode pull_request (mode is %s)", d.Mode)
	}
	if d.Automerge && d.Draft {
		return bad("deliver.automerge", "a draft pull request cannot be merged: drop draft or automerge")
	}
	if d.OnForeignCommits != "" && !slices.Contains(workitems.AllForeignCommitPolicies(), d.OnForeignCommits) {
		return bad("deliver.on_foreign_commits", "%q is not one of %s", d.OnForeignCommits, workitems.JoinKinds(workitems.AllForeignCommitPolicies()))
	}
	if d.DraftUntil != "" {
		if !slices.Contains(workitems.AllDraftUntil(), d.DraftUntil) {
			return bad("deliver.draft_until", "%q is not one of %s", d.DraftUntil, workitems.JoinKinds(workitems.AllDraftUntil()))
		}
		if d.Mode != workitems.DeliverPullRequest {
			return bad("deliver.draft_until", "needs mode pull_request (mode is %s)", d.Mode)
		}
		if d.Draft {
			return bad("deliver.draft_until", "draft keeps the pull request a draft for good: give draft or draft_until, not both")
		}
		if t.DoneCheck.CI == nil {
			return bad("deliver.draft_until", "%s waits for the required CI checks: the template names none (done_check.ci)", d.DraftUntil)
		}
	}
	if d.Author != "" {
		if _, err := workitems.ParseAuthor(d.Author); err != nil {
			return bad("deliver.author", "%v", err)
		}
	}
	if r := d.Review; r != nil {
		if d.Mode != workitems.DeliverPullRequest {
			return bad("deliver.review", "needs mode pull_request (mode is %s): only a pull request is reviewed", d.Mode)
		}
		if r.RequiredApprovals < 0 || r.RequiredApprovals > 20 {
			return bad("deliver.review.required_approvals", "%d is not between 0 and 20", r.RequiredApprovals)
		}
		if r.RequiredApprovals == 0 {
			r.RequiredApprovals = 1
		}
		if r.OnChangesRequested == "" {
			r.OnChangesRequested = workitems.ChangesRetry
		}
		if !slices.Contains(workitems.AllOnChangesRequested(), r.OnChangesRequested) {
			return bad("deliver.review.on_changes_requested", "%q is not one of %s", r.OnChangesRequested, workitems.JoinKinds(workitems.AllOnChangesRequested()))
		}
		if r.MaxRounds < 0 || r.MaxRounds > 50 {
			return bad("deliver.review.max_rounds", "%d is not between 0 and 50", r.MaxRounds)
		}
		if r.MaxRounds == 0 {
			r.MaxRounds = DefaultReviewRounds
		}
		if r.Wait < 0 {
			return bad("deliver.review.wait", "must not be negative")
		}
		if r.Wait == 0 {
			r.Wait = DefaultReviewWait
		}
	}
	return nil
}

func (c *Config) validateCI(t *Template, bad func(field, format string, args ...any) error) error {
	ci := t.DoneCheck.CI
	if ci == nil {
		return nil
	}
	if ci.Provider != "" && !slices.Contains(workitems.AllCIProviders(), ci.Provider) {
		return bad("done_check.ci.provider", "%q is not one of %s (or give ci.forge)", ci.Provider, workitems.JoinKinds(workitems.AllCIProviders()))
	}
	if ci.Provider == workitems.CIProviderWebhook && ci.Forge != "" {
		return bad("done_check.ci.forge", "provider webhook reads results posted to /api/evidence: drop forge or provider")
	}
	if ci.Provider == "" && ci.Forge == "" {
		return bad("done_check.ci.forge", "missing: name a key of forges (or provider: webhook)")
	}
	if ci.Provider == workitems.CIProviderGitHub && ci.Forge == "" {
		if names := c.forgesOfKind(workitems.ForgeGitHub); len(names) > 1 {
			return bad("done_check.ci.provider", "github is ambiguous: forges %s are of kind github; name one in ci.forge", strings.Join(names, ", "))
		}
		return bad("done_check.ci.provider", `github needs a forge of kind github, and the key "github" is taken by another kind; name one in ci.forge`)
	}
	if ci.Forge != "" {
		f, ok := c.Forges[ci.Forge]
		if !ok {
			return bad("done_check.ci.forge", "%q is not a key of forges (%s)", ci.Forge, c.forgeNames())
		}
		if ci.Provider == workitems.CIProviderGitHub && f.Kind != workitems.ForgeGitHub {
			return bad("done_check.ci.forge", "%q is of kind %s, but provider says github", ci.Forge, f.Kind)
		}
		if ci.Repo == "" {
			return bad("done_check.ci.repo", "missing, and neither deliver.repo nor repo %q gives owner/name", t.Repo)
		}
		if _, _, err := workitems.ParseRepoSlug(ci.Repo); err != nil {
			return bad("done_check.ci.repo", "%v", err)
		}
	}
	if len(ci.Required) == 0 {
		return bad("done_check.ci.required", "name at least one required check")
	}
	if ci.Wait < 0 {
		return bad("done_check.ci.wait", "must not be negative")
	}
	return nil
}
