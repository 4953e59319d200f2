package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/console"
	"outerloop/scheduler"
	"outerloop/workitems"
)

func TestPagesRenderReadOnlyWithoutALogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate("--- FAIL: TestAdd"))
	f.item(t, "docs@1", "docs", "refresh the docs", nil)
	tests := []struct {
		name, path string
		want       []string
	}{
		{"the items list shows every item with its state and spend", "/", []string{"fix@1", "docs@1", "escalated", "queued", "cost_usd $0.25 / $2.00"}},
		{"the items list filters by state", "/?state=escalated", []string{"fix@1", "page 1 of 1 · 1 items"}},
		{"the items list filters by template", "/?template=docs", []string{"docs@1", "1 items"}},
		{"an item shows its attempt, evidence and decision", "/items/fix@1", []string{"Attempt 1", "sample/TestAdd",
			`href="/api/items/fix@1/attempts/1/evidence"`,
			"Add(2, 3) = -1, want 5", "same_failure_twice", "TestAdd failed again", "go test -json ./...", "cost_usd", "$0.25 / $2.00", "Timeline"}},
		{"the inbox shows the reason, the evidence and suggested actions", "/escalations", []string{"fix@1", "the same test failed twice",
			"sample/TestAdd", "retry with input", "raise a budget", "log in"}},
		{"the templates page shows schedule, next run and daily cap", "/templates", []string{"*/10 * * * *", "2026-11-29 12:00 UTC",
			"$0.00 / $5.00", "manual"}},
		{"the login page asks for the token", "/login", []string{`name="token"`, `type="password"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := f.get(t, tc.path)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if strings.Contains(body, api.CSRFField) || strings.Contains(body, "/resolve") {
				t.Error("a page without a login must not show action forms")
			}
			if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("CSP: %q", csp)
			}
		})
	}
}

func TestPagesShowActionFormsAfterALogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate(""))
	ck := f.login(t, "alice")
	for _, path := range []string{"/escalations", "/items/fix@1"} {
		_, body := f.get(t, path, ck...)
		if !strings.Contains(body, `value="`+f.auth.CSRFToken()+`"`) || !strings.Contains(body, `action="/items/fix@1/resolve"`) {
			t.Errorf("%s: the forms with the CSRF token are missing", path)
		}
		if !strings.Contains(body, "signed in as <b>alice</b>") {
			t.Errorf("%s: the actor is not shown", path)
		}
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	t.Run("the right token sets an HttpOnly SameSite=Strict session cookie and redirects", func(t *testing.T) {
		res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {testToken}, "next": {"/templates"}}})
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/templates" {
			t.Fatalf("status %d, location %q", res.StatusCode, res.Header.Get("Location"))
		}
		c := cookie(res, api.SessionCookie)
		probe, _ := http.NewRequest(http.MethodGet, "/", nil)
		if c != nil {
			probe.AddCookie(c)
		}
		if c == nil || !f.auth.LoggedIn(probe) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
			t.Fatalf("session cookie: %+v", c)
		}
		if strings.Contains(c.Value, testToken) {
			t.Fatal("the cookie must not carry the token itself")
		}
	})
	t.Run("a wrong token is refused and sets no cookie", func(t *testing.T) {
		res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {"guess"}}})
		body := readBody(t, res)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not the server&#39;s API token") {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		if c := cookie(res, api.SessionCookie); c != nil {
			t.Fatalf("a cookie was set: %+v", c)
		}
	})
	t.Run("a redirect target off this site is ignored", func(t *testing.T) {
		res := f.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {testToken}, "next": {"//evil.example/"}}})
		if loc := res.Header.Get("Location"); loc != "/escalations" {
			t.Fatalf("location %q", loc)
		}
	})
	t.Run("logging out clears the session", func(t *testing.T) {
		res := f.do(t, request{method: http.MethodPost, path: "/logout", cookies: f.login(t, "bob")})
		if c := cookie(res, api.SessionCookie); res.StatusCode != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
			t.Fatalf("status %d, cookie %+v", res.StatusCode, c)
		}
	})
	t.Run("without a server token nobody can log in", func(t *testing.T) {
		off := newFixture(t, "")
		res := off.do(t, request{method: http.MethodPost, path: "/login", form: url.Values{"token": {""}}})
		if res.StatusCode != http.StatusForbidden || cookie(res, api.SessionCookie) != nil {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}

func TestActionsWithoutAValidSessionAndCSRFTokenChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate(""))
	session := f.login(t, "alice")
	retry := func(csrf string) url.Values {
		v := url.Values{"action": {"retry"}, "input": {"try harder"}}
		if csrf != "" {
			v.Set(api.CSRFField, csrf)
		}
		return v
	}
	tests := []struct {
		name    string
		form    url.Values
		cookies []*http.Cookie
		header  http.Header
		want    int
	}{
		{"a post without a login is refused", retry(""), nil, nil, http.StatusUnauthorized},
		{"a post with the CSRF token but no session is refused", retry(f.auth.CSRFToken()), nil, nil, http.StatusUnauthorized},
		{"a post with a session but no CSRF token is refused", retry(""), session, nil, http.StatusUnauthorized},
		{"a post with a session and a wrong CSRF token is refused", retry("forged"), session, nil, http.StatusUnauthorized},
		{"a post with a forged session cookie is refused", retry(f.auth.CSRFToken()),
			[]*http.Cookie{{Name: api.SessionCookie, Value: "forged"}}, nil, http.StatusUnauthorized},
		{"a post with a wrong bearer token is refused", retry(""), nil, http.Header{"Authorization": {"Bearer nope"}}, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := f.do(t, request{method: http.MethodPost, path: "/items/fix@1/resolve", form: tc.form, cookies: tc.cookies, header: tc.header})
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			it, n := f.resolutions(t, "fix@1")
			if it.State != workitems.StateEscalated || len(it.Resolution) != 0 || n != 0 || len(it.Attempts) != 1 {
				t.Fatalf("the item changed: %s, %d resolutions, %d events", it.State, len(it.Resolution), n)
			}
		})
	}
	t.Run("with no server token every post is refused", func(t *testing.T) {
		off := newFixture(t, "")
		off.item(t, "fix@1", "fix", "goal", escalate(""))
		res := off.do(t, request{method: http.MethodPost, path: "/items/fix@1/resolve", form: retry("x")})
		if it, n := off.resolutions(t, "fix@1"); res.StatusCode != http.StatusForbidden || it.State != workitems.StateEscalated || n != 0 {
			t.Fatalf("status %d, state %s", res.StatusCode, it.State)
		}
	})
}

func TestActionsResolveThroughTheQueueAndRecordTheActor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	session := f.login(t, "alice")
	tests := []struct {
		name  string
		form  url.Values
		state workitems.State
		check func(t *testing.T, it *workitems.Item)
	}{
		{"close marks the item done", url.Values{"action": {"close"}}, workitems.StateClosed, nil},
		{"cancel cancels the item", url.Values{"action": {"cancel"}}, workitems.StateCancelled, nil},
		{"retry queues a new attempt with the input", url.Values{"action": {"retry"}, "input": {"flip the sign"}}, workitems.StateQueued,
			func(t *testing.T, it *workitems.Item) {
				if a := it.Current(); it.Attempt != 2 || a.Condition.Input != "flip the sign" || strings.Join(a.Changed, ",") != "input" {
					t.Fatalf("attempt %d: %+v", it.Attempt, it.Current())
				}
			}},
		{"raise lifts a per-attempt cap for the retry", url.Values{"action": {"raise"}, "kind": {"wall_time"}, "value": {"5m"}, "scope": {"attempt"}},
			workitems.StateQueued, func(t *testing.T, it *workitems.Item) {
				if got := it.Current().Condition.Budget.WallTime.D().String(); got != "5m0s" {
					t.Fatalf("attempt wall time %s", got)
				}
			}},
		{"raise lifts an item cap", url.Values{"action": {"raise"}, "kind": {"cost_usd"}, "value": {"7.5"}, "scope": {"item"}},
			workitems.StateQueued, func(t *testing.T, it *workitems.Item) {
				if it.ItemBudget.CostUSD != 7.5 {
					t.Fatalf("item budget %+v", it.ItemBudget)
				}
			}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "fix@" + string(rune('a'+i))
			f.item(t, id, "fix", "make TestAdd pass", escalate(""))
			tc.form.Set(api.CSRFField, f.auth.CSRFToken())
			res := f.do(t, request{method: http.MethodPost, path: "/items/" + id + "/resolve", form: tc.form, cookies: session})
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/items/"+id {
				t.Fatalf("status %d: %s", res.StatusCode, readBody(t, res))
			}
			it, n := f.resolutions(t, id)
			if it.State != tc.state || n != 1 || len(it.Resolution) != 1 || it.Resolution[0].Actor != "alice" {
				t.Fatalf("state %s, %d events, resolutions %+v", it.State, n, it.Resolution)
			}
			if tc.check != nil {
				tc.check(t, it)
			}
			// The redirect target shows the flash once.
			_, body := f.get(t, "/items/"+id, append(session, cookie(res, console.FlashCookie))...)
			if !strings.Contains(body, `id="flash"`) || !strings.Contains(body, "by alice") {
				t.Fatalf("no flash on the item page")
			}
		})
	}
}

func TestADoubleSubmitAppliesOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate(""))
	session := f.login(t, "")
	form := url.Values{"action": {"retry"}, "input": {"flip the sign"}, api.CSRFField: {f.auth.CSRFToken()}}
	first := f.do(t, request{method: http.MethodPost, path: "/items/fix@1/resolve", form: form, cookies: session})
	second := f.do(t, request{method: http.MethodPost, path: "/items/fix@1/resolve", form: form, cookies: session})
	body := readBody(t, second)
	if first.StatusCode != http.StatusSeeOther || second.StatusCode != http.StatusConflict {
		t.Fatalf("statuses %d, %d", first.StatusCode, second.StatusCode)
	}
	if !strings.Contains(body, "is now queued") || !strings.Contains(body, "resolved already") {
		t.Fatalf("the refusal does not explain itself: %s", body)
	}
	it, n := f.resolutions(t, "fix@1")
	if n != 1 || len(it.Resolution) != 1 || len(it.Attempts) != 2 || it.Resolution[0].Actor != console.DefaultActor {
		t.Fatalf("applied %d times, %d attempts, %+v", n, len(it.Attempts), it.Resolution)
	}
}

func TestBadRequestsAreRefusedAndNamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate(""))
	session := f.login(t, "alice")
	csrf := f.auth.CSRFToken()
	tests := []struct {
		name     string
		r        request
		want     int
		wantText string
	}{
		{"an unknown item page is 404", request{method: http.MethodGet, path: "/items/nope"}, http.StatusNotFound, "There is no item"},
		{"an unknown item's event stream is 404", request{method: http.MethodGet, path: "/items/nope/events"}, http.StatusNotFound, "not found"},
		{"resolving an unknown item is 404", request{method: http.MethodPost, path: "/items/nope/resolve",
			form: url.Values{"action": {"close"}, api.CSRFField: {csrf}}, cookies: session}, http.StatusNotFound, "There is no item"},
		{"an unknown page is 404", request{method: http.MethodGet, path: "/nope"}, http.StatusNotFound, ""},
		{"a retry without input or budget is refused", request{method: http.MethodPost, path: "/items/fix@1/resolve",
			form: url.Values{"action": {"retry"}, api.CSRFField: {csrf}}, cookies: session}, http.StatusUnprocessableEntity, "must change something"},
		{"an unknown action is refused", request{method: http.MethodPost, path: "/items/fix@1/resolve",
			form: url.Values{"action": {"explode"}, api.CSRFField: {csrf}}, cookies: session}, http.StatusBadRequest, "want close, retry, raise or cancel"},
		{"an unknown budget kind is refused", request{method: http.MethodPost, path: "/items/fix@1/resolve",
			form: url.Values{"action": {"raise"}, "kind": {"coffee"}, "value": {"3"}, api.CSRFField: {csrf}}, cookies: session}, http.StatusBadRequest, "budget kind"},
		{"a non-positive budget is refused", request{method: http.MethodPost, path: "/items/fix@1/resolve",
			form: url.Values{"action": {"raise"}, "kind": {"steps"}, "value": {"-1"}, api.CSRFField: {csrf}}, cookies: session}, http.StatusBadRequest, "not a positive number"},
		{"an unknown state filter is refused", request{method: http.MethodGet, path: "/?state=sleeping"}, http.StatusBadRequest, "is not one of"},
		{"an unknown sort is refused", request{method: http.MethodGet, path: "/?sort=colour"}, http.StatusBadRequest, "want newest"},
		{"a bad page number is refused", request{method: http.MethodGet, path: "/?page=0"}, http.StatusBadRequest, "want a number"},
		{"a bad event cursor is refused", request{method: http.MethodGet, path: "/items/fix@1/events?after=1-x"}, http.StatusBadRequest, "not an event id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := f.do(t, tc.r)
			body := readBody(t, res)
			if res.StatusCode != tc.want || !strings.Contains(body, tc.wantText) {
				t.Fatalf("status %d (want %d): %s", res.StatusCode, tc.want, body)
			}
		})
	}
	if it, n := f.resolutions(t, "fix@1"); it.State != workitems.StateEscalated || n != 0 {
		t.Fatalf("a refused request changed the item: %s, %d", it.State, n)
	}
}

func TestUntrustedTextIsEscapedOnEveryPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	const goal = `fix <script>alert("goal")</script> & more`
	const tail = `<img src=x onerror=alert(1)> FAIL`
	f.item(t, "fix@x", "fix", goal, escalate(tail))
	for _, path := range []string{"/", "/items/fix@x", "/escalations"} {
		_, body := f.get(t, path, f.login(t, "alice")...)
		for _, raw := range []string{"<script>alert", "<img src=x"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s: %q rendered unescaped", path, raw)
			}
		}
		if !strings.Contains(body, "fix &lt;script&gt;alert(&#34;goal&#34;)&lt;/script&gt; &amp; more") {
			t.Errorf("%s: the goal is not shown as escaped text", path)
		}
	}
	_, body := f.get(t, "/items/fix@x")
	if !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt; FAIL") {
		t.Error("the test output tail is not shown as escaped text")
	}
}

func TestTheItemsListSortsAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	spend := func(usd float64) func(*workitems.Item) error {
		return func(it *workitems.Item) error { it.Spend.CostUSD = usd; return nil }
	}
	// Created in this order, so newest first is c, b, a.
	f.item(t, "docs@a", "docs", "a", spend(0.5))
	f.item(t, "docs@b", "docs", "b", spend(1.5))
	f.item(t, "docs@c", "docs", "c", spend(0.1))
	tests := []struct {
		name, path string
		order      []string
		pager      string
	}{
		{"newest first by default, two per page", "/", []string{"docs@c", "docs@b"}, "page 1 of 2 · 3 items"},
		{"the second page has the rest", "/?page=2", []string{"docs@a"}, "page 2 of 2"},
		{"oldest first", "/?sort=oldest", []string{"docs@a", "docs@b"}, "page 1 of 2"},
		{"most spend first", "/?sort=spend", []string{"docs@b", "docs@a"}, "page 1 of 2"},
		{"a page past the end shows the last", "/?page=9", []string{"docs@a"}, "page 2 of 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, body := f.get(t, tc.path)
			if !strings.Contains(body, tc.pager) {
				t.Fatalf("pager: want %q", tc.pager)
			}
			var got []string
			for _, part := range strings.Split(body, `<tr data-item="`)[1:] {
				id, _, _ := strings.Cut(part, `"`)
				got = append(got, id)
			}
			if strings.Join(got, " ") != strings.Join(tc.order, " ") {
				t.Fatalf("rows %v, want %v", got, tc.order)
			}
		})
	}
}

func TestStaticAssetsAreServedFromTheBinary(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	for path, ctype := range map[string]string{"/static/console.css": "text/css", "/static/console.js": "text/javascript"} {
		res, body := f.get(t, path)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("%s: status %d, type %q, %d bytes", path, res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
	}
}

func TestALongTimelineShowsTheNewestEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@long", "fix", "a chatty item", nil)
	ctx := t.Context()
	for i := range 2500 {
		if err := f.app.Store.Emit(ctx, workitems.Event{Item: "fix@long", Type: workitems.EventStep, Message: fmt.Sprintf("step %04d", i), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := f.get(t, "/items/fix@long")
	if !strings.Contains(body, "step 2499") || strings.Contains(body, "step 0000") {
		t.Fatal("the page should show the newest events, not the oldest")
	}
	evs, err := f.app.Store.Events(ctx, "fix@long", "", 5000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := `data-after="` + evs[len(evs)-1].ID + `"`; !strings.Contains(body, want) {
		t.Fatalf("the live stream must continue after the stream's last event (%s)", want)
	}
}

// Every paged view refuses a page that is not a number from 1 with 400, naming it, and a way
// back to its first page.
func TestPagedViewsRefuseABadPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	for _, path := range []string{"/?page=0", "/escalations?page=x", "/templates?page=-1", "/templates/fix?page=abc"} {
		resp, body := f.get(t, path)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "want a number from 1") {
			t.Errorf("%s: %d, want 400 naming the page:\n%s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := f.get(t, "/templates/fix?page=1"); resp.StatusCode != http.StatusOK {
		t.Errorf("page 1: %d", resp.StatusCode)
	}
}

// The bump of issue 21: a step the sandbox cut off from the module proxy. The inbox and the item
// page say the sandbox did it and which setting allows it, show the step's last lines, and do
// not show a green "0 passed" for tests that never ran.
func TestEscalationSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	cause := "the sandbox's network refused a connection (\"dial tcp: lookup proxy.golang.org\"): the template's sandbox has network: none; network: registries reaches the package registries"
	f.item(t, "bump@1", "fix", "bump the modules", func(it *workitems.Item) error {
		now := time.Now().UTC()
		a := &it.Attempts[0]
		a.State, a.StartedAt, a.EndedAt = "done", now.Add(-time.Minute), now
		a.Exit = &workitems.Exit{Reason: workitems.ExitFailed, Message: "command 1 (go get -u ./... && go mod tidy) exited 1"}
		a.Verified = &workitems.Verdict{Summary: "exit failed"}
		d := workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "exit_failed", Summary: cause + "; exit failed",
			Cause: cause, Output: "go: downloading golang.org/x/text v0.21.0\ndial tcp: lookup proxy.golang.org: network is unreachable",
			Actor: "verifier", At: now}
		a.Decision = &d
		it.Decisions = append(it.Decisions, d)
		it.Escalation = &workitems.Escalation{Reason: string(d.Rule), Summary: d.Summary, Cause: d.Cause, Output: d.Output, At: now}
		return it.SetState(workitems.StateEscalated)
	})
	for _, path := range []string{"/escalations", "/items/bump@1"} {
		res, body := f.get(t, path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, res.StatusCode)
		}
		for _, w := range []string{`class="cause"`, "network: registries", "why-output", "go: downloading golang.org/x/text v0.21.0"} {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
		if path == "/escalations" {
			if !strings.Contains(body, "not run (no test results)") {
				t.Errorf("%s: tests that never ran are not shown as not run", path)
			}
			if strings.Contains(body, `<span class="ok">0 passed</span>`) {
				t.Errorf("%s shows a green 0 passed", path)
			}
		}
	}
}

// TestTheItemPageSaysWhichAlertOrCallerStartedIt: an alert's item shows its alerts, labels,
// summary and source link, and when the group resolved; an item of the trigger endpoint shows
// how its caller authenticated. A source link that is not http(s) is not made a live link.
func TestTheItemPageSaysWhichAlertOrCallerStartedIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	resolved := time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC)
	f.item(t, "fix@alert", "fix", "fix the error rate", func(it *workitems.Item) error {
		it.Origin = workitems.Origin{Kind: workitems.OriginAlert, Actor: "alertmanager:outerloop", Alert: &workitems.AlertOrigin{
			Receiver: "outerloop", GroupKey: "{}:{alertname=\"PaymentsErrorRate\"}", Status: "firing", ResolvedAt: resolved,
			Alerts: []workitems.AlertFacts{
				{Labels: map[string]string{"alertname": "PaymentsErrorRate", "severity": "page"},
					Annotations:  map[string]string{"summary": "5% of payments <b>fail</b>", "runbook_url": "https://runbooks.example.com/pay"},
					StartsAt:     resolved.Add(-time.Hour),
					GeneratorURL: "http://prometheus:9090/graph?g0.expr=rate"},
				{Labels: map[string]string{"alertname": "Evil"}, GeneratorURL: "javascript:alert(1)"},
			}}}
		return nil
	})
	f.item(t, "fix@api", "fix", "fix it", func(it *workitems.Item) error {
		it.Origin = workitems.Origin{Kind: workitems.OriginAPI, Actor: "api",
			Caller: &workitems.CallerOrigin{Auth: workitems.CallerHMAC, IdempotencyKey: "sentry-42", Fields: []string{"count", "title"}}}
		return nil
	})
	_, body := f.get(t, "/items/fix@alert")
	for _, want := range []string{"Alertmanager receiver <code>outerloop</code>, 2 alerts", "<strong>PaymentsErrorRate</strong>",
		"<code>severity=page</code>", "5% of payments &lt;b&gt;fail&lt;/b&gt;", `href="http://prometheus:9090/graph?g0.expr=rate"`,
		`href="https://runbooks.example.com/pay"`, "resolved at 2026-12-07 10:30"} {
		if !strings.Contains(body, want) {
			t.Errorf("the alert's item page lacks %q", want)
		}
	}
	if strings.Contains(body, `href="javascript:`) {
		t.Error("a javascript: source link was rendered live")
	}
	_, body = f.get(t, "/items/fix@api")
	for _, want := range []string{"authenticated by hmac", "idempotency key <code>sentry-42</code>", "<code>count</code>, <code>title</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the api item's page lacks %q", want)
		}
	}
}

// TestTheTemplatesPageListsTriggersAndTheirLastFiring: a template's triggers are listed with
// the last firing of each one's source, as the firing log (the observer serve wires) keeps it;
// a firing of a template that is not configured keeps nothing.
func TestTheTemplatesPageListsTriggersAndTheirLastFiring(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	_, body := f.get(t, "/templates")
	if !strings.Contains(body, "<code>api</code> <span class=\"muted\">not fired yet</span>") {
		t.Fatalf("fix' api trigger is not listed as not fired yet:\n%s", body)
	}
	log := scheduler.NewFiringLog(f.app.Queue, nil)
	log.TriggerFiring("fix", workitems.TriggerSourceAPI, workitems.TriggerDeduplicated)
	log.TriggerFiring("fix", workitems.TriggerSourceAPI, workitems.TriggerMade)
	log.TriggerFiring("nosuch", workitems.TriggerSourceAPI, workitems.TriggerRefused)
	_, body = f.get(t, "/templates")
	if !strings.Contains(body, "last fired just now: made") && !strings.Contains(body, "ago: made") {
		t.Errorf("fix' last firing is not shown:\n%s", body)
	}
	last, err := f.app.Queue.LastFirings(context.Background(), []string{"docs", "nosuch", "fix"})
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 || last["fix"][workitems.TriggerSourceAPI].Result != workitems.TriggerMade {
		t.Errorf("last firings %+v, want fix' api made only", last)
	}
}
