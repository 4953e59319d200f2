package forge_test

import (
	"testing"

	"outerloop/forge"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestGitOriginAndForRepo(t *testing.T) {
	forges := map[string]config.ForgeConfig{
		"gh":    {Kind: workitems.ForgeGitHub, BaseURL: config.DefaultGitHubAPI},
		"ghe":   {Kind: workitems.ForgeGitHub, BaseURL: "https://git.corp.example/api/v3"},
		"tea":   {Kind: workitems.ForgeGitea, BaseURL: "http://127.0.0.1:3000/"},
		"tea2":  {Kind: workitems.ForgeGitea, BaseURL: "http://127.0.0.1:3000"},
		"other": {Kind: workitems.ForgeGitea, BaseURL: "https://Gitea.Example:8443/sub/"},
	}
	for name, want := range map[string]string{"gh": "https://github.com", "ghe": "https://git.corp.example",
		"tea": "http://127.0.0.1:3000", "other": "https://gitea.example:8443"} {
		if got := forge.GitOrigin(forges[name]); got != want {
			t.Errorf("GitOrigin(%s) = %q, want %q", name, got, want)
		}
	}
	for _, tc := range []struct {
		repo   string
		prefer []string
		want   string
	}{
		{"https://github.com/acme/app.git", nil, "gh"},
		{"https://GITHUB.com/acme/app", nil, "gh"},
		{"https://git.corp.example/acme/app.git", nil, "ghe"},
		{"http://127.0.0.1:3000/o/r.git", nil, "tea"},               // two match: the first by key
		{"http://127.0.0.1:3000/o/r.git", []string{"tea2"}, "tea2"}, // the template's own forge first
		{"http://127.0.0.1:3000/o/r.git", []string{"gh"}, "tea"},    // a named forge on another host is not used
		{"https://gitea.example:8443/sub/o/r.git", nil, "other"},
		{"https://gitea.example/o/r.git", nil, ""},  // another port: another origin
		{"http://github.com/acme/app.git", nil, ""}, // another scheme
		{"git@github.com:acme/app.git", nil, ""},
		{"/srv/repos/app", nil, ""},
		{"https://evil.example/github.com/acme/app", nil, ""},
	} {
		got, ok := forge.ForRepo(forges, tc.repo, tc.prefer...)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("ForRepo(%q, %v) = %q %v, want %q", tc.repo, tc.prefer, got, ok, tc.want)
		}
	}
}

func TestTemplateForges(t *testing.T) {
	tm := &config.Template{Deliver: config.Deliver{Forge: "a"}, DoneCheck: config.DoneCheck{CI: &config.CICheck{Forge: "b"}}}
	if got := forge.TemplateForges(tm); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("%v", got)
	}
	tm.DoneCheck.CI.Forge = "a"
	if got := forge.TemplateForges(tm); len(got) != 1 {
		t.Fatalf("%v", got)
	}
}
