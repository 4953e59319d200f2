package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"outerloop/workitems"
)

// deliverConfig is a valid config with one forge of each kind and a template delivering to
// GitHub; cases edit it.
const deliverConfig = `
defaults:
  budget: {wall_time: 10m}
forges:
  gh: {kind: github, token_env: GH_BOT_TOKEN}
  tea: {kind: gitea, base_url: "http://127.0.0.1:3000/", token_env: GITEA_TOKEN}
templates:
  - name: deps-bump
    repo: https://github.com/acme/payments.git
    goal: |
      Bump the dependencies.
      Keep go.sum tidy.
    loop: {kind: script, commands: ["go get -u ./..."]}
    done_check:
      commands: ["go test -json ./..."]
      ci: {forge: gh, required: [build, test], wait: 30m}
    deliver:
      forge: gh
      labels: [outerloop]
`

func parseEdited(t *testing.T, old, new string) (*Config, error) {
	t.Helper()
	y := deliverConfig
	if old != "" {
		if !strings.Contains(y, old) {
			t.Fatalf("test bug: %q not in the config", old)
		}
		y = strings.Replace(y, old, new, 1)
	}
	return ParseConfig([]byte(y))
}

func TestDeliverDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseEdited(t, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := cfg.Template("deps-bump")
	d := tp.Deliver
	want := Deliver{Forge: "gh", Repo: "acme/payments", Mode: workitems.DeliverPullRequest, Branch: "outerloop/{template}",
		Title: "Bump the dependencies.", Labels: []string{"outerloop"}, MergeMethod: workitems.MergeSquash}
	if fmt.Sprintf("%+v", d) != fmt.Sprintf("%+v", want) {
		t.Fatalf("deliver\n got %+v\nwant %+v", d, want)
	}
	if ci := tp.DoneCheck.CI; ci.Repo != "acme/payments" || ci.Forge != "gh" {
		t.Fatalf("ci.repo defaults to deliver.repo: %+v", ci)
	}
	if gh := cfg.Forges["gh"]; gh.BaseURL != DefaultGitHubAPI || gh.TokenEnv != "GH_BOT_TOKEN" {
		t.Fatalf("github forge defaults: %+v", gh)
	}
	if got := d.BranchFor("deps-bump", "deps-bump@20261130T030000Z"); got != "outerloop/deps-bump" {
		t.Fatalf("branch %q", got)
	}
}

func TestDeliverDefaultsWithoutAForgeArePatch(t *testing.T) {
	t.Parallel()
	cfg, err := parseEdited(t, "    deliver:\n      forge: gh\n      labels: [outerloop]\n", "")
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := cfg.Template("deps-bump")
	if tp.Deliver.Mode != workitems.DeliverPatch || tp.Deliver.Repo != "" {
		t.Fatalf("deliver %+v", tp.Deliver)
	}
	if tp.DoneCheck.CI.Repo != "acme/payments" {
		t.Fatalf("ci.repo from the template's repo URL: %+v", tp.DoneCheck.CI)
	}
}

func TestBranchForExpandsPlaceholdersIntoAValidRef(t *testing.T) {
	t.Parallel()
	d := Deliver{Branch: "bot/{template}/{item}"}
	cases := map[string]string{
		"deps@20261130T030000Z": "bot/deps/deps@20261130T030000Z",
		"deps@x:y z":            "bot/deps/deps@x-y-z",
		"deps/../..lock@{1}.":   "bot/deps/deps----lock-1}",
		".hidden.lock":          "bot/deps/hidden",
		"a\x01b~c^d?e*f[g\\h/i": "bot/deps/a-b-c-d-e-f-g-h-i",
	}
	for item, want := range cases {
		got := d.BranchFor("deps", item)
		if got != want {
			t.Errorf("BranchFor(%q) = %q, want %q", item, got, want)
		}
		if err := workitems.CheckBranchName(got); err != nil {
			t.Errorf("BranchFor(%q) = %q: %v", item, got, err)
		}
	}
}

func TestRepoSlugFromURL(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		"https://github.com/acme/payments.git":          "acme/payments",
		"https://github.com/acme/payments":              "acme/payments",
		"https://gitea.example.com/sub/path/acme/pay/":  "acme/pay",
		"git@github.com:acme/payments.git":              "acme/payments",
		"ssh://git@host:2222/acme/payments.git":         "acme/payments",
		"http://127.0.0.1:3000/outerloop/sample-go.git": "outerloop/sample-go",
	}
	for in, want := range ok {
		if got, err := workitems.RepoSlugFromURL(in); err != nil || got != want {
			t.Errorf("RepoSlugFromURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"./examples/payment", "/srv/repo", "file:///srv/acme/repo", "https://github.com/acme", ""} {
		if got, err := workitems.RepoSlugFromURL(in); err == nil {
			t.Errorf("RepoSlugFromURL(%q) = %q, want an error", in, got)
		}
	}
}

func TestLegacyGitHubProviderReadsFromTheGitHubForge(t *testing.T) {
	t.Parallel()
	const legacy = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: t1
    goal: do it
    loop: {kind: script, commands: ["true"]}
    done_check:
      ci: {provider: github, repo: acme/payments, required: [build]}
`
	t.Run("WithNoForgesADefaultGitHubForgeIsAdded", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseConfig([]byte(legacy))
		if err != nil {
			t.Fatal(err)
		}
		tp, _ := cfg.Template("t1")
		if tp.DoneCheck.CI.Forge != "github" || tp.DoneCheck.CI.Repo != "acme/payments" || tp.DoneCheck.CI.Provider != "github" {
			t.Fatalf("ci %+v", tp.DoneCheck.CI)
		}
		want := ForgeConfig{Kind: workitems.ForgeGitHub, BaseURL: DefaultGitHubAPI, TokenEnv: "GITHUB_TOKEN"}
		if cfg.Forges["github"] != want || len(cfg.Forges) != 1 {
			t.Fatalf("forges %+v", cfg.Forges)
		}
	})
	t.Run("WithOneGitHubForgeItIsUsed", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseConfig([]byte("forges:\n  ghe: {kind: github, base_url: https://ghe.example.com/api/v3}\n" + legacy))
		if err != nil {
			t.Fatal(err)
		}
		tp, _ := cfg.Template("t1")
		if tp.DoneCheck.CI.Forge != "ghe" || len(cfg.Forges) != 1 {
			t.Fatalf("ci %+v, forges %+v", tp.DoneCheck.CI, cfg.Forges)
		}
	})
	t.Run("WithTwoGitHubForgesItIsAmbiguous", func(t *testing.T) {
		t.Parallel()
		_, err := ParseConfig([]byte("forges:\n  a: {kind: github}\n  b: {kind: github}\n" + legacy))
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Template != "t1" || ce.Field != "done_check.ci.provider" || !strings.Contains(err.Error(), "a, b") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("WebhookStaysAsItWas", func(t *testing.T) {
		t.Parallel()
		cfg, err := ParseConfig([]byte(strings.Replace(legacy, "provider: github", "provider: webhook", 1)))
		if err != nil {
			t.Fatal(err)
		}
		tp, _ := cfg.Template("t1")
		if tp.DoneCheck.CI.Forge != "" || tp.DoneCheck.CI.Provider != "webhook" || len(cfg.Forges) != 0 {
			t.Fatalf("ci %+v, forges %+v", tp.DoneCheck.CI, cfg.Forges)
		}
	})
}

func TestDeliverAndForgeConfigRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, old, new string
		template       string // "" for a deployment-level field
		field          string
		want           string
	}{
		{"unknown key in deliver", "      labels: [outerloop]", "      labels: [outerloop]\n      reviewers: [me]",
			"deps-bump", "deliver.reviewers", "unknown key"},
		{"unknown key in a forge", "kind: github, token_env", "kind: github, token: abc, token_env", "", "forges.gh.token", "unknown key"},
		{"unknown forge kind", "kind: gitea,", "kind: gitlab,", "", "forges.tea.kind", `"gitlab" is not one of github, gitea`},
		{"gitea without base_url", `kind: gitea, base_url: "http://127.0.0.1:3000/",`, "kind: gitea,", "", "forges.tea.base_url", "missing"},
		{"base_url with credentials", `base_url: "http://127.0.0.1:3000/"`, `base_url: "http://bot:s3cret@127.0.0.1:3000/"`,
			"", "forges.tea.base_url", "credentials"},
		{"base_url not http", `base_url: "http://127.0.0.1:3000/"`, `base_url: "ftp://x"`, "", "forges.tea.base_url", "not an http(s) URL"},
		{"bad token_env name", "token_env: GITEA_TOKEN", "token_env: GITEA-TOKEN", "", "forges.tea.token_env", "not an environment variable name"},
		{"bad webhook_secret_env name", "token_env: GITEA_TOKEN}", "token_env: GITEA_TOKEN, webhook_secret_env: 'HOOK SECRET'}", "",
			"forges.tea.webhook_secret_env", "not an environment variable name"},
		{"reserved forge name", "  tea: {kind: gitea", "  webhook: {kind: gitea", "", "forges.webhook", "reserved"},
		{"bad forge name", "  tea: {kind: gitea", "  Tea Pot: {kind: gitea", "", "forges.Tea Pot", "lower-case"},
		{"deliver to an unknown forge", "      forge: gh\n", "      forge: gitlab\n", "deps-bump", "deliver.forge",
			`"gitlab" is not a key of forges (forges has gh, tea)`},
		{"unknown mode", "      forge: gh\n", "      forge: gh\n      mode: email\n", "deps-bump", "deliver.mode",
			`"email" is not one of patch, branch, pull_request`},
		{"pull_request without a forge", "      forge: gh\n", "      mode: pull_request\n", "deps-bump", "deliver.forge",
			"mode pull_request needs a forge"},
		{"branch without a forge", "      forge: gh\n", "      mode: branch\n", "deps-bump", "deliver.forge", "mode branch needs a forge"},
		{"repo that cannot be parsed", "repo: https://github.com/acme/payments.git", "repo: ./local", "deps-bump", "deliver.repo",
			`repo "./local" gives no owner/name`},
		{"repo not owner/name", "      forge: gh\n", "      forge: gh\n      repo: acme\n", "deps-bump", "deliver.repo", `"acme" is not owner/name`},
		{"repo with three parts", "      forge: gh\n", "      forge: gh\n      repo: a/b/c\n", "deps-bump", "deliver.repo", "not owner/name"},
		{"unknown branch placeholder", "      forge: gh\n", "      forge: gh\n      branch: bot/{goal}\n", "deps-bump", "deliver.branch",
			"unknown placeholder {goal} (known: {template}, {item})"},
		{"unbalanced brace", "      forge: gh\n", "      forge: gh\n      branch: bot/{template\n", "deps-bump", "deliver.branch", "unbalanced brace"},
		{"invalid branch", "      forge: gh\n", "      forge: gh\n      branch: \"bot..{template}\"\n", "deps-bump", "deliver.branch", "'..'"},
		{"branch with a space", "      forge: gh\n", "      forge: gh\n      branch: \"bot {template}\"\n", "deps-bump", "deliver.branch", "refuses"},
		{"branch is the base", "      forge: gh\n", "      forge: gh\n      base: main\n      branch: main\n", "deps-bump", "deliver.branch", "base branch"},
		{"invalid base", "      forge: gh\n", "      forge: gh\n      base: \"main.lock\"\n", "deps-bump", "deliver.base", ".lock"},
		{"unknown merge method", "      forge: gh\n", "      forge: gh\n      merge_method: octopus\n", "deps-bump", "deliver.merge_method",
			`"octopus" is not one of merge, squash, rebase`},
		{"automerge in branch mode", "      forge: gh\n", "      forge: gh\n      mode: branch\n      automerge: true\n", "deps-bump",
			"deliver.automerge", "needs mode pull_request"},
		{"automerge of a draft", "      forge: gh\n", "      forge: gh\n      draft: true\n      automerge: true\n", "deps-bump",
			"deliver.automerge", "draft"},
		{"unknown foreign commit policy", "      forge: gh\n", "      forge: gh\n      on_foreign_commits: overwrite\n", "deps-bump",
			"deliver.on_foreign_commits", `"overwrite" is not one of stop, build_on`},
		{"unknown draft condition", "      forge: gh\n", "      forge: gh\n      draft_until: approved\n", "deps-bump",
			"deliver.draft_until", `"approved" is not one of ci_green`},
		{"draft_until with draft", "      forge: gh\n", "      forge: gh\n      draft: true\n      draft_until: ci_green\n", "deps-bump",
			"deliver.draft_until", "not both"},
		{"draft_until in branch mode", "      forge: gh\n", "      forge: gh\n      mode: branch\n      draft_until: ci_green\n", "deps-bump",
			"deliver.draft_until", "needs mode pull_request"},
		{"empty label", "labels: [outerloop]", `labels: [outerloop, " "]`, "deps-bump", "deliver.labels", "empty"},
		{"duplicate label", "labels: [outerloop]", "labels: [outerloop, outerloop]", "deps-bump", "deliver.labels", "twice"},
		{"ci from an unknown forge", "ci: {forge: gh,", "ci: {forge: nope,", "deps-bump", "done_check.ci.forge", `"nope" is not a key of forges`},
		{"ci with neither forge nor provider", "ci: {forge: gh,", "ci: {", "deps-bump", "done_check.ci.forge", "missing"},
		{"ci with an unknown provider", "ci: {forge: gh,", "ci: {provider: jenkins,", "deps-bump", "done_check.ci.provider", "jenkins"},
		{"ci webhook with a forge", "ci: {forge: gh,", "ci: {forge: gh, provider: webhook,", "deps-bump", "done_check.ci.forge", "webhook"},
		{"ci provider github on a gitea forge", "ci: {forge: gh,", "ci: {forge: tea, provider: github,", "deps-bump",
			"done_check.ci.forge", "kind gitea"},
		{"ci with a bad repo", "ci: {forge: gh,", "ci: {forge: gh, repo: nope,", "deps-bump", "done_check.ci.repo", "not owner/name"},
		{"ci without required checks", "required: [build, test]", "required: []", "deps-bump", "done_check.ci.required", "at least one"},
		{"ci with a negative wait", "wait: 30m", "wait: -1m", "deps-bump", "done_check.ci.wait", "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseEdited(t, tc.old, tc.new)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, got %v", err)
			}
			if ce.Template != tc.template || ce.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got template %q field %q: %v\nwant template %q field %q mentioning %q", ce.Template, ce.Field, err,
					tc.template, tc.field, tc.want)
			}
		})
	}
}

func TestATokenVariableNeedNotBeSetToValidate(t *testing.T) {
	// Not parallel: it clears an environment variable.
	t.Setenv("GH_BOT_TOKEN", "")
	if _, err := parseEdited(t, "", ""); err != nil {
		t.Fatalf("token variables are checked when used, not at validation: %v", err)
	}
}

func TestAWebhookSecretVariableIsReadFromConfigAndOptional(t *testing.T) {
	t.Parallel()
	cfg, err := parseEdited(t, "token_env: GITEA_TOKEN}", "token_env: GITEA_TOKEN, webhook_secret_env: GITEA_WEBHOOK_SECRET}")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Forges["tea"].WebhookSecretEnv; got != "GITEA_WEBHOOK_SECRET" {
		t.Fatalf("webhook_secret_env = %q", got)
	}
	if got := cfg.Forges["gh"].WebhookSecretEnv; got != "" {
		t.Fatalf("a forge without webhook_secret_env has %q (no default: it accepts no webhooks)", got)
	}
}

func TestVocabularies(t *testing.T) {
	t.Parallel()
	if fmt.Sprint(workitems.AllForgeKinds()) != "[github gitea]" || fmt.Sprint(workitems.AllDeliveryModes()) != "[patch branch pull_request]" ||
		fmt.Sprint(workitems.AllMergeMethods()) != "[merge squash rebase]" {
		t.Fatal(workitems.AllForgeKinds(), workitems.AllDeliveryModes(), workitems.AllMergeMethods())
	}
}

// The people's-pull-request settings parse; stop is the default policy; draft_until opens a
// draft; draft_until without CI to wait for is refused.
func TestDeliverPeopleSettings(t *testing.T) {
	t.Parallel()
	cfg, err := parseEdited(t, "      forge: gh\n", "      forge: gh\n      on_foreign_commits: build_on\n      draft_until: ci_green\n      keep_branch: true\n")
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := cfg.Template("deps-bump")
	if d := tp.Deliver; d.ForeignCommits() != workitems.ForeignBuildOn || !d.OpensDraft() || !d.KeepBranch || d.DraftUntil != workitems.DraftUntilCIGreen {
		t.Fatalf("deliver %+v", d)
	}
	if (&Deliver{}).ForeignCommits() != workitems.ForeignStop || (&Deliver{}).OpensDraft() {
		t.Fatal("the defaults: stop, no draft")
	}
	y := strings.Replace(strings.Replace(deliverConfig, "      ci: {forge: gh, required: [build, test], wait: 30m}\n", "", 1),
		"      forge: gh\n", "      forge: gh\n      draft_until: ci_green\n", 1)
	_, err = ParseConfig([]byte(y))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "deliver.draft_until" || !strings.Contains(err.Error(), "the template names none (done_check.ci)") {
		t.Fatalf("draft_until without CI: %v", err)
	}
}
