package app_test

import (
	"slices"
	"testing"

	"outerloop/workitems"
)

// The app builds one forge client per entry of forges:, and a template that still says
// ci.provider: github gets the default github forge.
func TestOpenBuildsAForgeClientPerEntry(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, sampleRepo(t), `  - name: legacy-ci
    goal: read CI as before forges existed
    loop: {kind: script, commands: ["true"]}
    done_check:
      ci: {provider: github, repo: acme/payments, required: [build]}
forges:
  tea: {kind: gitea, base_url: "http://127.0.0.1:3000"}
`)
	s := open(t, cfg, workitems.SystemClock{})
	var names []string
	for n, f := range s.Forges {
		names = append(names, n+"="+string(f.Kind()))
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"github=" + string(workitems.ForgeGitHub), "tea=" + string(workitems.ForgeGitea)}) {
		t.Fatalf("forges %v", names)
	}
	if tp, _ := cfg.Template("legacy-ci"); tp.DoneCheck.CI.Forge != "github" {
		t.Fatalf("ci %+v", tp.DoneCheck.CI)
	}
}
