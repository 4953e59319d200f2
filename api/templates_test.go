package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

const controlsYAML = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: nightly
    schedule: "0 3 * * *"
    goal: nightly
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: by-hand
    max_open: 1
    goal: by hand
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

func newControlsFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureYAML(t, token, controlsYAML)
}

func TestPauseAndResumeRecordTheActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newControlsFixture(t)
	code, m := f.do(t, "POST", "/api/templates/nightly/pause", `{"reason":"upstream down"}`, token)
	if code != http.StatusOK || m["actor"] != "tester" || m["reason"] != "upstream down" {
		t.Fatalf("pause: %d %v", code, m)
	}
	code, m = f.do(t, "GET", "/api/templates/nightly/items", "", "")
	if p, _ := m["paused"].(map[string]any); code != http.StatusOK || p["actor"] != "tester" {
		t.Fatalf("history while paused: %d %v", code, m)
	}
	code, m = f.do(t, "GET", "/api/templates", "", "")
	if ts, _ := m["templates"].([]any); code != http.StatusOK || len(ts) != 2 ||
		ts[0].(map[string]any)["paused"] == nil || ts[1].(map[string]any)["paused"] != nil {
		t.Fatalf("templates list while nightly is paused: %d %v", code, m)
	}
	code, m = f.do(t, "POST", "/api/templates/nightly/pause", "", token)
	if code != http.StatusConflict || !strings.Contains(m["error"].(string), "already paused (by tester") {
		t.Fatalf("second pause: %d %v", code, m)
	}
	code, m = f.do(t, "POST", "/api/templates/nightly/resume", "", token)
	if code != http.StatusOK || m["by"] != "tester" {
		t.Fatalf("resume: %d %v", code, m)
	}
	if p, _ := f.queue.PauseOf(ctx, "nightly"); p != nil {
		t.Fatalf("still paused after resume: %+v", p)
	}
	code, m = f.do(t, "GET", "/api/templates/nightly/controls", "", "")
	recs, _ := m["controls"].([]any)
	if code != http.StatusOK || len(recs) != 2 || recs[0].(map[string]any)["action"] != "resume" ||
		recs[1].(map[string]any)["actor"] != "tester" {
		t.Fatalf("control log: %d %v", code, m)
	}
}

func TestRunNowAndRerunCreateItemsByTheActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newControlsFixture(t)
	code, m := f.do(t, "POST", "/api/templates/by-hand/run", `{"input":"go"}`, token)
	origin, _ := m["origin"].(map[string]any)
	if code != http.StatusCreated || origin["actor"] != "tester" || m["state"] != "queued" {
		t.Fatalf("run now: %d %v", code, m)
	}
	id := m["id"].(string)
	// Run now is a manual enqueue: past max_open (1, the item above) it is refused naming the
	// limit and changes nothing, unless forced, which the item records.
	code, m = f.do(t, "POST", "/api/templates/by-hand/run", "", token)
	if msg, _ := m["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "max_open") {
		t.Fatalf("run now past max_open: %d %v, want 409 naming max_open", code, m)
	}
	code, m = f.do(t, "POST", "/api/templates/by-hand/run", `{"force":true}`, token)
	if origin, _ := m["origin"].(map[string]any); code != http.StatusCreated || origin["forced"] != true {
		t.Fatalf("forced run now: %d %v", code, m)
	}
	if _, err := f.queue.Resolve(ctx, m["id"].(string), workitems.Resolution{Action: workitems.ResolveCancel, Actor: "x"}); err != nil {
		t.Fatal(err)
	}
	code, m = f.do(t, "POST", "/api/items/"+id+"/rerun", "", token)
	if code != http.StatusConflict || !strings.Contains(m["error"].(string), "still open") {
		t.Fatalf("rerun of a queued item: %d %v, want 409 still open", code, m)
	}
	if n, _ := f.store.Count(ctx, itemstore.ListOptions{}); n != 2 {
		t.Fatalf("a refused rerun made an item: %d items, want the run and the forced run", n)
	}
	if _, err := f.queue.Resolve(ctx, id, workitems.Resolution{Action: workitems.ResolveCancel, Actor: "x"}); err != nil {
		t.Fatal(err)
	}
	code, m = f.do(t, "POST", "/api/items/"+id+"/rerun", "", token)
	origin, _ = m["origin"].(map[string]any)
	if code != http.StatusCreated || m["rerun_of"] != id || origin["actor"] != "tester" || origin["kind"] != "rerun" {
		t.Fatalf("rerun: %d %v", code, m)
	}
	re := m["id"].(string)
	code, m = f.do(t, "GET", "/api/templates/by-hand/items?limit=1", "", "")
	items, _ := m["items"].([]any)
	if code != http.StatusOK || m["total"] != 3.0 || len(items) != 1 || items[0].(map[string]any)["id"] != re {
		t.Fatalf("history: %d %v, want the rerun first of 3", code, m)
	}
	code, m = f.do(t, "GET", "/api/templates/by-hand/items?offset=2", "", "")
	items, _ = m["items"].([]any)
	if code != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["id"] != id ||
		items[0].(map[string]any)["outcome"] != "cancelled by x" {
		t.Fatalf("history page 3: %d %v, want the cancelled original", code, m)
	}
}

func TestTemplateControlsRefuseBadRequestsAndChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newControlsFixture(t)
	cases := []struct {
		name, method, path, body, tok string
		want                          int
		says                          string
	}{
		{"pause of an unknown template", "POST", "/api/templates/nope/pause", "", token, 404, "unknown template"},
		{"pause of a template without a schedule", "POST", "/api/templates/by-hand/pause", "", token, 422, "no schedule"},
		{"pause with an unknown field", "POST", "/api/templates/nightly/pause", `{"why":"x"}`, token, 400, "unknown field"},
		{"pause with a reason too long", "POST", "/api/templates/nightly/pause", `{"reason":"` + strings.Repeat("x", 600) + `"}`, token, 400, "at most 500"},
		{"pause without a token", "POST", "/api/templates/nightly/pause", "", "", 401, "valid token is required"},
		{"resume of a template not paused", "POST", "/api/templates/nightly/resume", "", token, 409, "not paused"},
		{"run now of an unknown template", "POST", "/api/templates/nope/run", "", token, 404, "unknown template"},
		{"rerun of an unknown item", "POST", "/api/items/nope/rerun", "", token, 404, "not found"},
		{"history of an unknown template", "GET", "/api/templates/nope/items", "", "", 404, "unknown template"},
		{"history with a bad limit", "GET", "/api/templates/nightly/items?limit=0", "", "", 400, "limit"},
		{"controls of an unknown template", "GET", "/api/templates/nope/controls", "", "", 404, "unknown template"},
	}
	for _, tc := range cases {
		code, m := f.do(t, tc.method, tc.path, tc.body, tc.tok)
		msg, _ := m["error"].(string)
		if code != tc.want || !strings.Contains(msg, tc.says) {
			t.Errorf("%s: %d %q, want %d naming %q", tc.name, code, msg, tc.want, tc.says)
		}
	}
	if ps, err := f.queue.Pauses(ctx, []string{"nightly", "by-hand", "nope"}); err != nil || len(ps) != 0 {
		t.Errorf("pauses after refused requests: %v %v", ps, err)
	}
	if n, _ := f.store.Count(ctx, itemstore.ListOptions{}); n != 0 {
		t.Errorf("refused requests made %d items", n)
	}
	if recs, _ := f.queue.Controls(ctx, "nightly", 0); len(recs) != 0 {
		t.Errorf("refused requests logged controls: %+v", recs)
	}
}
