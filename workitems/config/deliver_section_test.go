package config

import (
	"errors"
	"strings"
	"testing"

	"outerloop/workitems"
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
		mode       workitems.DeliveryMode
		author     workitems.Author
		wantErr    []string
	}{
		{"no section: patch", validTemplate, workitems.DeliverPatch, workitems.Author{Name: "outerloop", Email: "outerloop@localhost"}, nil},
		{"a forge without a mode: pull_request", withForge("{forge: github}"), workitems.DeliverPullRequest, workitems.Author{Name: "outerloop", Email: "outerloop@localhost"}, nil},
		{"an explicit mode and author", withForge(`{forge: github, mode: branch, title: "Bump deps", author: "Bot Person <bot@example.com>"}`),
			workitems.DeliverBranch, workitems.Author{Name: "Bot Person", Email: "bot@example.com"}, nil},
		{"an unknown mode", withDeliver("{mode: email}"), "", workitems.Author{}, []string{`template "t1"`, "deliver.mode", `"email"`, "patch, branch, pull_request"}},
		{"an author without a name", withDeliver("{author: bot@example.com}"), "", workitems.Author{}, []string{`template "t1"`, "deliver.author", "Name <email>"}},
		{"an author that is not an address", withDeliver(`{author: "Bot <not an address>"}`), "", workitems.Author{}, []string{"deliver.author"}},
		{"an unknown key", withDeliver("{mode: patch, reviewers: [me]}"), "", workitems.Author{}, []string{`template "t1"`, "deliver.reviewers", "unknown key"}},
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
			if a, err := workitems.ParseAuthor(d.Author); err != nil || a != tc.author {
				t.Errorf("author %+v %v, want %+v", a, err, tc.author)
			}
		})
	}
}
