package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const testToken = "s3cret-token-for-tests"

// fixture is a console and the JSON API on one mux, over a real store on the shared Redis
// (a unique prefix and asynq queue per test). No worker runs: tests put items into the states
// they need through the store.
type fixture struct {
	app     *app.App
	auth    *api.Auth
	mux     *http.ServeMux
	next    time.Time
	console *console.Console
}

func testConfig(t *testing.T, templates string) *config.Config {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(`
defaults:
  max_attempts: 2
  budget: {wall_time: 2m, verify_reserve: 1m}
  item_budget: {wall_time: 10m, cost_usd: 2}
# The sample repository compiles Go in a new work dir per test: the machine's warm build cache
# (an opt-in) instead of a cold one per repository, which the default gives.
sandbox: {build_cache: shared}
templates:
` + templates))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func handlerConfig(t *testing.T) *config.Config {
	repo := t.TempDir()
	return testConfig(t, fmt.Sprintf(`
  - name: fix
    schedule: "*/10 * * * *"
    daily_cost_cap_usd: 5
    triggers: [{api: {secret_env: FIX_TRIGGER_SECRET}}]
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["go test ./..."]}
  - name: docs
    repo: %s
    goal: refresh the docs
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`, repo, repo))
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openApp(t *testing.T, cfg *config.Config) *app.App {
	t.Helper()
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// newFixture serves the API and the console with token; opts adjust the console's options.
func newFixture(t *testing.T, token string, opts ...func(*console.Options)) *fixture {
	t.Helper()
	a := openApp(t, handlerConfig(t))
	f := &fixture{app: a, auth: api.NewAuth(token), mux: http.NewServeMux(), next: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	api.New(api.Options{Queue: a.Queue, Auth: f.auth, Logger: testLogger()}).Register(f.mux)
	o := console.Options{Queue: a.Queue, Auth: f.auth, Logger: testLogger(), PageSize: 2, EventBlock: 200 * time.Millisecond,
		NextRun: func(name string) (time.Time, bool) { return f.next, name == "fix" }}
	for _, fn := range opts {
		fn(&o)
	}
	f.console = console.New(o)
	f.console.Register(f.mux)
	return f
}

// item creates an item of template "fix" (or tmpl) with goal, then applies m to it.
func (f *fixture) item(t *testing.T, id, tmpl, goal string, m func(it *workitems.Item) error) *workitems.Item {
	t.Helper()
	ctx := context.Background()
	tp, _ := f.app.Config.Template(tmpl)
	it := &workitems.Item{ID: id, Template: tmpl, Goal: goal, Origin: workitems.Origin{Kind: "manual", Actor: "test"},
		Budget: tp.Budget, ItemBudget: tp.ItemBudget, MaxAttempts: tp.MaxAttempts}
	if err := f.app.Store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if m == nil {
		return it
	}
	it, err := f.app.Store.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) { return nil, m(it) })
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// escalate puts an item where the verifier leaves one that failed the same way twice.
func escalate(tail string) func(it *workitems.Item) error {
	return func(it *workitems.Item) error {
		now := time.Now().UTC()
		a := &it.Attempts[0]
		a.State, a.StartedAt, a.EndedAt = "done", now.Add(-time.Minute), now
		a.Exit = &workitems.Exit{Reason: workitems.ExitCompleted, LastMessage: "done, I think"}
		a.Spend = workitems.Spend{WallTime: workitems.Duration(40 * time.Second), Steps: 1, CostUSD: 0.25}
		a.Verified = &workitems.Verdict{Summary: "1 failed", Failed: 1, FailedTests: []string{"sample/TestAdd"},
			FirstError: "calc_test.go:7: Add(2, 3) = -1, want 5", OutputTail: tail}
		d := workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "same_failure_twice", Reasons: []string{"TestAdd failed again"},
			Evidence: []workitems.EvidenceRef{{Kind: "test_report", Ref: "go test -json ./...", Summary: "1 failed"}},
			Actor:    "verifier", At: now}
		a.Decision = &d
		it.Decisions = append(it.Decisions, d)
		it.Spend = a.Spend
		it.Escalation = &workitems.Escalation{Reason: "the same test failed twice", Summary: "TestAdd: Add(2, 3) = -1, want 5",
			At: now, Actions: []workitems.EscalationAction{"close", "retry", "raise_budget", "cancel"}}
		return it.SetState(workitems.StateEscalated)
	}
}

// request is one call against the fixture's mux.
type request struct {
	method, path string
	form         url.Values
	cookies      []*http.Cookie
	header       http.Header
}

func (f *fixture) do(t *testing.T, r request) *http.Response {
	t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	req := httptest.NewRequest(r.method, r.path, body)
	if r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	return rec.Result()
}

func (f *fixture) get(t *testing.T, path string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	res := f.do(t, request{method: http.MethodGet, path: path, cookies: cookies})
	return res, readBody(t, res)
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// login logs in through the form and returns the cookies a browser would keep.
func (f *fixture) login(t *testing.T, name string) []*http.Cookie {
	t.Helper()
	res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {testToken}, "name": {name}}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d %s", res.StatusCode, readBody(t, res))
	}
	var out []*http.Cookie
	for _, c := range res.Cookies() {
		if c.Name != console.FlashCookie {
			out = append(out, c)
		}
	}
	return out
}

func cookie(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (f *fixture) resolutions(t *testing.T, id string) (*workitems.Item, int) {
	t.Helper()
	it, err := f.app.Store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := f.app.Store.Events(context.Background(), id, "", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == workitems.EventResolved {
			n++
		}
	}
	return it, n
}
