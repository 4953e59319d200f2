package workitems

import (
	"errors"
	"strings"
	"testing"
)

func withDeliver(section string) string {
	return strings.Replace(validTemplate, "goal: do it", "goal: do it\n    deliver: "+section, 1)
}

// withForge is withDeliver in a deployment with a github forge and a repo on it.
func withForge(section string) string {
	return "forges:\n  github: {kind: github}\n" + strings.Replace(withDeliver(section), "goal: do it",
		"goal: do it\n    repo: https://github.com/acme/payments.git", 1)
}

func TestDeliverSection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		mode       DeliveryMode
		author     Author
		wantErr    []string
	}{
		{"no section: patch", validTemplate, DeliverPatch, Author{"outerloop", "outerloop@localhost"}, nil},
		{"a forge without a mode: pull_request", withForge("{forge: github}"), DeliverPullRequest, Author{"outerloop", "outerloop@localhost"}, nil},
		{"an explicit mode and author", withForge(`{forge: github, mode: branch, title: "Bump deps", author: "Bot Person <bot@example.com>"}`),
			DeliverBranch, Author{"Bot Person", "bot@example.com"}, nil},
		{"an unknown mode", withDeliver("{mode: email}"), "", Author{}, []string{`template "t1"`, "deliver.mode", `"email"`, "patch, branch, pull_request"}},
		{"an author without a name", withDeliver("{author: bot@example.com}"), "", Author{}, []string{`template "t1"`, "deliver.author", "Name <email>"}},
		{"an author that is not an address", withDeliver(`{author: "Bot <not an address>"}`), "", Author{}, []string{"deliver.author"}},
		{"an unknown key", withDeliver("{mode: patch, reviewers: [me]}"), "", Author{}, []string{`template "t1"`, "deliver.reviewers", "unknown key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfig([]byte(tc.yaml))
			if tc.wantErr != nil {
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("want a *ConfigError, got %v", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d := cfg.Templates[0].Deliver
			if d.Mode != tc.mode {
				t.Errorf("mode %q, want %q", d.Mode, tc.mode)
			}
			if a, err := ParseAuthor(d.Author); err != nil || a != tc.author {
				t.Errorf("author %+v %v, want %+v", a, err, tc.author)
			}
		})
	}
}

func TestDeliveryVocabulariesAreDistinct(t *testing.T) {
	t.Parallel()
	check := func(name string, vals []string) {
		seen := map[string]bool{}
		for _, v := range vals {
			if v == "" || seen[v] {
				t.Errorf("%s: %q empty or repeated", name, v)
			}
			seen[v] = true
		}
	}
	var modes, outcomes, states, checks, steps []string
	for _, v := range AllDeliveryModes() {
		modes = append(modes, string(v))
	}
	for _, v := range AllDeliveryOutcomes() {
		outcomes = append(outcomes, string(v))
	}
	for _, v := range AllPRStates() {
		states = append(states, string(v))
	}
	for _, v := range AllCheckStates() {
		checks = append(checks, string(v))
	}
	for _, v := range AllDeliverySteps() {
		steps = append(steps, string(v))
	}
	check("modes", modes)
	check("outcomes", outcomes)
	check("pr states", states)
	check("check states", checks)
	check("steps", steps)
	if len(outcomes) != 8 || len(modes) != 3 || len(checks) != 9 {
		t.Fatalf("a vocabulary lost a value: %v %v %v", modes, outcomes, checks)
	}
	if DeliverPatch.NeedsForge() || !DeliverBranch.NeedsForge() || !DeliverPullRequest.NeedsForge() {
		t.Fatal("NeedsForge")
	}
}
