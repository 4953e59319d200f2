package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/api"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const token = "s3cret-token"

const cfgYAML = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: t1
    goal: "fix <script>alert(1)</script>"
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

type fixture struct {
	srv    *httptest.Server
	server *api.Server
	store  *itemstore.Store
	queue  *scheduler.Queue
}

func newFixture(t *testing.T, tok string) *fixture {
	t.Helper()
	return newFixtureYAML(t, tok, cfgYAML)
}

func newFixtureYAML(t *testing.T, tok, y string) *fixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue})
	s := api.New(api.Options{Queue: q, Auth: api.NewAuth(tok), Metrics: http.NotFoundHandler()})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, server: s, store: store, queue: q}
}

func (f *fixture) do(t *testing.T, method, path, body, tok string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set(api.ActorHeader, "tester")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// escalated makes an escalated item directly through the store.
func (f *fixture) escalated(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	it, err := f.queue.Submit(ctx, scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := f.store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	_, _, _ = f.store.StartAttempt(ctx, fence, "w")
	_, _ = f.store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitNeedsInput}, workitems.Spend{}, "", false)
	if _, err := f.store.RecordDecision(ctx, fence, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "needs_input", Actor: "verifier"}, nil); err != nil {
		t.Fatal(err)
	}
	return it.ID
}

func TestReadsAreOpenAndReturnJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.escalated(t)
	code, m := f.do(t, "GET", "/api/items/"+id, "", "")
	if code != 200 || m["id"] != id || m["state"] != "escalated" {
		t.Fatalf("get: %d %v", code, m)
	}
	if evs, _ := m["events"].([]any); len(evs) < 4 {
		t.Fatalf("item view must carry its events: %v", m["events"])
	}
	if code, m := f.do(t, "GET", "/api/items?state=escalated", "", ""); code != 200 || len(m["items"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, m)
	}
	if code, m := f.do(t, "GET", "/api/escalations", "", ""); code != 200 || len(m["escalations"].([]any)) != 1 {
		t.Fatalf("escalations: %d %v", code, m)
	}
	if code, m := f.do(t, "GET", "/api/templates", "", ""); code != 200 || len(m["templates"].([]any)) != 1 {
		t.Fatalf("templates: %d %v", code, m)
	}
	if code, _ := f.do(t, "GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
}

func TestBadReadsNameWhatIsWrong(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	for path, want := range map[string]int{
		"/api/items/nope":              404,
		"/api/items?state=sleeping":    400,
		"/api/items?limit=0":           400,
		"/api/items/nope/events":       404,
		"/api/items?limit=abc":         400,
		"/api/items?offset=-1":         400,
		"/api/items/x/events?wait=10h": 404,
	} {
		code, m := f.do(t, "GET", path, "", "")
		if code != want || m["error"] == "" {
			t.Errorf("GET %s: %d %v, want %d with an error", path, code, m, want)
		}
	}
}

func TestActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.escalated(t)
	before, _ := f.store.Get(context.Background(), id)
	for _, tok := range []string{"", "wrong"} {
		code, m := f.do(t, "POST", "/api/items/"+id+"/resolve", `{"action":"close"}`, tok)
		if code != 401 || !strings.Contains(m["error"].(string), "token") {
			t.Fatalf("token %q: %d %v", tok, code, m)
		}
	}
	if code, _ := f.do(t, "POST", "/api/items", `{"template":"t1"}`, ""); code != 401 {
		t.Fatalf("enqueue without token: %d", code)
	}
	after, _ := f.store.Get(context.Background(), id)
	if after.Version != before.Version {
		t.Fatal("a refused action changed the item")
	}
	// No token configured at all: actions are off, not open.
	off := newFixture(t, "")
	if code, m := off.do(t, "POST", "/api/items", `{"template":"t1"}`, "anything"); code != 403 || !strings.Contains(m["error"].(string), "OUTERLOOP_API_TOKEN") {
		t.Fatalf("no token configured: %d %v", code, m)
	}
}

func TestResolveAppliesOnceAndRecordsTheActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.escalated(t)
	code, m := f.do(t, "POST", "/api/items/"+id+"/resolve", `{"action":"retry","input":"use the v2 client","budget":{"cost_usd":4}}`, token)
	if code != 200 || m["state"] != "queued" || m["attempt"] != float64(2) {
		t.Fatalf("retry: %d %v", code, m)
	}
	code, m = f.do(t, "POST", "/api/items/"+id+"/resolve", `{"action":"retry","input":"use the v2 client"}`, token)
	if code != 409 {
		t.Fatalf("double submit: %d %v", code, m)
	}
	it, _ := f.store.Get(context.Background(), id)
	if len(it.Resolution) != 1 || it.Resolution[0].Actor != "tester" || it.Attempts[1].Condition.Budget.CostUSD != 4 {
		t.Fatalf("resolution: %+v", it.Resolution)
	}
}

func TestBadActionBodiesAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.escalated(t)
	cases := map[string]struct {
		path, body string
		code       int
		msg        string
	}{
		"not JSON":         {"/api/items/" + id + "/resolve", `close`, 400, "JSON"},
		"unknown field":    {"/api/items/" + id + "/resolve", `{"action":"close","force":true}`, 400, "force"},
		"unknown action":   {"/api/items/" + id + "/resolve", `{"action":"explode"}`, 400, "explode"},
		"bad budget kind":  {"/api/items/" + id + "/resolve", `{"action":"retry","budget":{"dollars":1}}`, 400, "dollars"},
		"negative budget":  {"/api/items/" + id + "/resolve", `{"action":"retry","budget":{"cost_usd":-1}}`, 400, "negative"},
		"input on close":   {"/api/items/" + id + "/resolve", `{"action":"close","input":"x"}`, 400, "retry"},
		"retry no change":  {"/api/items/" + id + "/resolve", `{"action":"retry"}`, 422, "changes nothing"},
		"unknown item":     {"/api/items/nope/resolve", `{"action":"close"}`, 404, "not found"},
		"unknown template": {"/api/items", `{"template":"nope"}`, 404, "unknown template"},
		"no template":      {"/api/items", `{}`, 400, "template"},
		"trailing data":    {"/api/items", `{"template":"t1"} {}`, 400, "after"},
		"oversized":        {"/api/items", `{"template":"t1","input":"` + strings.Repeat("x", api.MaxBody) + `"}`, 413, "larger"},
		"5 MiB body":       {"/api/items", `{"template":"t1","input":"` + strings.Repeat("x", 5<<20) + `"}`, 413, "larger"},
		"invalid UTF-8":    {"/api/items", "{\"template\":\"t1\",\"input\":\"caf\xe9\"}", 400, "UTF-8"},
		"lone surrogate":   {"/api/items", `{"template":"t1","input":"x\ud800y"}`, 400, "surrogate"},
		"empty steer":      {"/api/items/" + id + "/steer", `{"text":" "}`, 400, "text"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, m := f.do(t, "POST", tc.path, tc.body, token)
			msg, _ := m["error"].(string)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%d %q, want %d mentioning %q", code, msg, tc.code, tc.msg)
			}
		})
	}
	it, _ := f.store.Get(context.Background(), id)
	if it.State != workitems.StateEscalated || len(it.Resolution) != 0 {
		t.Fatalf("refused requests changed the item: %s", it.State)
	}
	items, _ := f.store.List(context.Background(), itemstore.ListOptions{})
	if len(items) != 1 {
		t.Fatalf("refused enqueues created items: %d", len(items))
	}
}

func TestAPairedSurrogateEscapeIsAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	code, m := f.do(t, "POST", "/api/items", `{"template":"t1","input":"smile \ud83d\ude00 and a \\ud800 that is text"}`, token)
	if code != 201 {
		t.Fatalf("%d %v", code, m)
	}
	it, _ := f.store.Get(context.Background(), m["id"].(string))
	if got := it.Attempts[0].Condition.Input; got != "smile \U0001F600 and a \\ud800 that is text" {
		t.Fatalf("input %q", got)
	}
}

func TestEnqueueAndSteer(t *testing.T) {
	t.Parallel()
	f := newFixtureYAML(t, token, accountingYAML) // steer needs an agent loop to read it
	code, m := f.do(t, "POST", "/api/items", `{"template":"agent","input":"hello"}`, token)
	if code != 201 || m["state"] != "queued" {
		t.Fatalf("enqueue: %d %v", code, m)
	}
	id := m["id"].(string)
	if code, _ := f.do(t, "POST", "/api/items/"+id+"/steer", `{"text":"also check the docs"}`, token); code != 202 {
		t.Fatalf("steer: %d", code)
	}
	got, _ := f.store.PeekSteer(context.Background(), id, 0)
	if len(got) != 1 || got[0] != "also check the docs" {
		t.Fatalf("steer queue: %v", got)
	}
	code, m = f.do(t, "GET", "/api/items/"+id+"/events?wait=10ms&after=0", "", "")
	if code != 200 || len(m["events"].([]any)) == 0 {
		t.Fatalf("events: %d %v", code, m)
	}
}

// delivered makes an item closed with a delivered patch (attempt 1) directly through the store.
func (f *fixture) delivered(t *testing.T, patch string, del workitems.Delivery) string {
	t.Helper()
	ctx := context.Background()
	it, err := f.queue.Submit(ctx, scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := f.store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	_, _, _ = f.store.StartAttempt(ctx, fence, "w")
	_, _ = f.store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false)
	if _, err := f.store.RecordDelivery(ctx, fence, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Actor: "verifier"},
		nil, &del, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	return it.ID
}

func TestTheDiffEndpointServesTheStoredPatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	const patch = "diff --git a/calc.go b/calc.go\n--- a/calc.go\n+++ b/calc.go\n@@ -1 +1 @@\n-<script>a - b</script>\n+a + b\n"
	id := f.delivered(t, patch, workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Base: "b1",
		Commit: "c1", Tree: "t1", Files: []workitems.ChangedFile{{Path: "calc.go", Added: 1, Deleted: 1}}, FileCount: 1, PatchBytes: 9000, PatchTruncated: true,
		Branch: "outerloop/t1", PushedSHA: "c1", PR: &workitems.PullRequest{Number: 4, URL: "https://forge.example/a/b/pulls/4", State: workitems.PROpen},
		Checks:      []workitems.CheckResult{{Name: "test", State: workitems.CheckSuccess, URL: "https://ci.example/run/1", Summary: "ok"}},
		MergeCommit: ""})
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(f.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, path := range []string{"/api/items/" + id + "/diff", "/api/items/" + id + "/diff?attempt=1"} {
		resp, body := get(path)
		if resp.StatusCode != 200 || body != patch {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, body)
		}
		h := resp.Header
		if h.Get("Content-Type") != "text/x-diff; charset=utf-8" || h.Get("X-Content-Type-Options") != "nosniff" ||
			h.Get(api.AttemptHeader) != "1" || h.Get(api.CommitHeader) != "c1" || h.Get(api.TruncatedHeader) != fmt.Sprintf("%d of 9000 bytes", len(patch)) {
			t.Fatalf("headers %v", h)
		}
	}
	// The item JSON names the delivery: branch, pushed SHA, PR, checks.
	code, m := f.do(t, "GET", "/api/items/"+id, "", "")
	del, _ := m["delivery"].(map[string]any)
	pr, _ := del["pr"].(map[string]any)
	checks, _ := del["checks"].([]any)
	if code != 200 || del["outcome"] != "pr_opened" || del["branch"] != "outerloop/t1" || del["pushed_sha"] != "c1" ||
		pr["url"] != "https://forge.example/a/b/pulls/4" || pr["state"] != "open" || len(checks) != 1 {
		t.Fatalf("item JSON delivery: %d %v", code, m["delivery"])
	}
	// What is not there is a 404 (or 400 for a bad attempt) with an error that says so.
	noDelivery := f.escalated(t)
	for path, want := range map[string]int{
		"/api/items/nope/diff":                 404,
		"/api/items/" + noDelivery + "/diff":   404,
		"/api/items/" + id + "/diff?attempt=2": 400,
		"/api/items/" + id + "/diff?attempt=x": 400,
		"/api/items/" + id + "/diff?attempt=0": 400,
	} {
		code, m := f.do(t, "GET", path, "", "")
		if code != want || m["error"] == "" {
			t.Errorf("GET %s: %d %v, want %d with an error", path, code, m, want)
		}
	}
	if code, m := f.do(t, "GET", "/api/items/"+noDelivery+"/diff?attempt=1", "", ""); code != 404 || !strings.Contains(m["error"].(string), "no patch") {
		t.Errorf("an attempt without a patch: %d %v", code, m)
	}
}
