package hooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The check states of webhooks must be the states forge.Checks reads for the same results: a
// check seen in a webhook and the same check polled must not disagree. These tests hold the
// two mappings together (hooks keeps its own copy: forge's are unexported).

func TestGitHubCheckStatesAreForgesStates(t *testing.T) {
	t.Parallel()
	const sha = ghHead
	conclusions := []string{"success", "failure", "timed_out", "neutral", "skipped", "cancelled", "action_required",
		"stale", "startup_failure", "something_new"}
	statuses := []string{"success", "failure", "error", "pending", "something_new"}

	// A GitHub API answering the two lists forge.Checks reads.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/repos/octo-org/octo-repo/commits/" + sha + "/check-runs":
			var runs []map[string]any
			for i, c := range conclusions {
				runs = append(runs, map[string]any{"id": i + 1, "name": "run-" + c, "head_sha": sha, "status": "completed", "conclusion": c})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(runs), "check_runs": runs})
		case "/repos/octo-org/octo-repo/commits/" + sha + "/statuses":
			var out []map[string]any
			for i, s := range statuses {
				out = append(out, map[string]any{"id": i + 1, "context": "status-" + s, "state": s, "created_at": "2026-12-02T12:00:00Z"})
			}
			_ = json.NewEncoder(w).Encode(out)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	f, err := forge.New(forge.Config{Name: "gh", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub, BaseURL: api.URL,
		TokenEnv: "GH_TOKEN"}, Getenv: func(string) string { return "token" }})
	if err != nil {
		t.Fatal(err)
	}
	checks, err := f.Checks(context.Background(), ghRepo, sha)
	if err != nil {
		t.Fatal(err)
	}
	polled := map[string]workitems.CheckState{}
	for _, c := range checks {
		polled[c.Name] = c.State
	}

	hs := newHarness(t)
	for _, c := range conclusions {
		body := edit(t, fixture(t, "github/check_run.json"), `"conclusion": "success"`, `"conclusion": "`+c+`"`,
			`"name": "test"`, `"name": "run-`+c+`"`)
		hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders("check_run", "run-"+c, ghSecret, body), body)
	}
	for _, s := range statuses {
		body := edit(t, fixture(t, "github/status.json"), `"state": "failure"`, `"state": "`+s+`"`,
			`"context": "ci/build"`, `"context": "status-`+s+`"`)
		hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders("status", "status-"+s, ghSecret, body), body)
	}
	compareStates(t, hs.sink.got(), polled, len(conclusions)+len(statuses))
}

// compareStates checks that every webhook check has the state forge polled for its name.
func compareStates(t *testing.T, events []hooks.Event, polled map[string]workitems.CheckState, want int) {
	t.Helper()
	if len(events) != want || len(polled) != want {
		t.Fatalf("%d webhook checks and %d polled, want %d of each", len(events), len(polled), want)
	}
	for _, e := range events {
		if p, ok := polled[e.Check.Name]; !ok || p != e.Check.State {
			t.Errorf("%s: the webhook says %s, forge.Checks %s", e.Check.Name, e.Check.State, p)
		}
	}
}
