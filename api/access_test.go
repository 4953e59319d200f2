package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"

	"outerloop/api"
	"outerloop/console"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Tokens of the access tests: a personal operator and viewer, and the shared operator token.
const (
	aliceTok  = "alice-operator-token-0123456789"
	bobTok    = "bob-viewer-token-0123456789abc"
	sharedTok = "shared-operator-token-987654321"
)

// accessFixture is the whole HTTP surface of `outerloop serve` — API, console and asynqmon on
// one mux behind api.Protect — over real Redis and a real asynq queue.
type accessFixture struct {
	fixture
	auth    *api.Auth
	audit   *api.AuditLog
	clock   *fakeclock.Clock
	qname   string
	insp    *asynq.Inspector
	logs    *bytes.Buffer
	logMu   *sync.Mutex
	baseURL string
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// accessYAML is cfgYAML with an agent template: only an agent item can be steered.
const accessYAML = cfgYAML + `  - name: agent
    goal: look around
    loop: {kind: agent, provider: local}
    done_check: {commands: ["true"]}
providers:
  local: {kind: openai-responses, base_url: "http://127.0.0.1:9", api_key_env: OUTERLOOP_TEST_UNUSED_KEY, model: m}
`

func newAccessFixture(t *testing.T, readLogin bool, limits api.LoginLimits) *accessFixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(accessYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	ck := fakeclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(ck))
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue})
	auth, err := api.NewAuthWith(api.AuthOptions{ReadLogin: readLogin, Clock: ck, Limits: limits, Credentials: []api.Credential{
		{Name: "alice", Role: api.RoleOperator, Token: aliceTok},
		{Name: "bob", Role: api.RoleViewer, Token: bobTok},
		{Name: api.OperatorTokenName, Role: api.RoleOperator, Token: sharedTok, Shared: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	logs, mu := &bytes.Buffer{}, &sync.Mutex{}
	logger := slog.New(slog.NewTextHandler(lockedWriter{mu, logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	audit := api.NewAuditLog(env.Client, env.Prefix, 0, ck)
	mux := http.NewServeMux()
	api.New(api.Options{Queue: q, Auth: auth, Audit: audit, Logger: logger, Metrics: http.NotFoundHandler()}).Register(mux)
	con := console.New(console.Options{Queue: q, Auth: auth, Audit: audit, Logger: logger, EventBlock: 100 * time.Millisecond})
	con.Register(mux)
	mon := asynqmon.New(asynqmon.Options{RootPath: api.QueuesPath, RedisConnOpt: redistest.AsynqOpt(t)})
	mux.Handle(api.QueuesPath+"/", mon)
	srv := httptest.NewServer(api.Protect(mux, api.ProtectOptions{Auth: auth, Audit: audit, Logger: logger}))
	insp := asynq.NewInspector(redistest.AsynqOpt(t))
	t.Cleanup(func() { srv.Close(); con.Close(); _ = mon.Close(); _ = insp.Close() })
	f := &accessFixture{fixture: fixture{srv: srv, store: store, queue: q}, auth: auth, audit: audit, clock: ck,
		qname: env.Queue, insp: insp, logs: logs, logMu: mu, baseURL: srv.URL}
	// The queue exists in asynq once it holds a task.
	if _, err := q.Submit(context.Background(), scheduler.Request{Template: "t1"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// client is one caller: a bearer token, a console session (cookies + CSRF), or nobody.
type client struct {
	name   string
	bearer string
	jar    http.CookieJar
	csrf   string
}

// loginAs logs into the console with tok and returns a client holding the session.
func (f *accessFixture) loginAs(t *testing.T, tok, name string) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &client{name: "session " + name, jar: jar}
	res := f.send(t, c, "POST", "/login", url.Values{"token": {tok}, "name": {name}}.Encode(), nil)
	if res.status != http.StatusSeeOther {
		t.Fatalf("login %s: %d %s", name, res.status, res.body)
	}
	// The CSRF token is the one the pages embed for this session.
	page := f.send(t, c, "GET", "/escalations", "", nil)
	if m := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)">`).FindStringSubmatch(page.body); m != nil {
		c.csrf = m[1]
	}
	return c
}

type answer struct {
	status int
	body   string
	header http.Header
}

// send makes one request as c; form bodies (key=value) and JSON bodies are told apart by
// their first byte.
func (f *accessFixture) send(t *testing.T, c *client, method, path, body string, hdr map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, f.baseURL+path, strings.NewReader(body))
	if body != "" {
		if strings.HasPrefix(body, "{") {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if c != nil && c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	if c != nil && c.csrf != "" && method != "GET" {
		req.Header.Set(api.CSRFHeader, c.csrf)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if c != nil && c.jar != nil {
		hc.Jar = c.jar
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: string(b), header: res.Header}
}

func (f *accessFixture) paused(t *testing.T) bool {
	t.Helper()
	qi, err := f.insp.GetQueueInfo(f.qname)
	if err != nil {
		t.Fatal(err)
	}
	return qi.Paused
}

func (f *accessFixture) logText() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.logs.String()
}

// TestEveryRoleAgainstEveryEndpointClass runs each caller against each class of endpoint —
// API read, console read, API action, console action, asynqmon read, asynqmon action — with reads open and
// with OUTERLOOP_READ_LOGIN on, and checks the status and, for refused actions, that nothing
// changed.
func TestEveryRoleAgainstEveryEndpointClass(t *testing.T) {
	t.Parallel()
	for _, readLogin := range []bool{false, true} {
		t.Run(fmt.Sprintf("read_login=%v", readLogin), func(t *testing.T) {
			t.Parallel()
			f := newAccessFixture(t, readLogin, api.LoginLimits{PerIP: 1000, Global: 1000})
			callers := []*client{
				{name: "anonymous"},
				{name: "wrong token", bearer: "not-a-token-of-this-server"},
				{name: "viewer bearer", bearer: bobTok},
				{name: "operator bearer", bearer: aliceTok},
				{name: "shared operator bearer", bearer: sharedTok},
				f.loginAs(t, bobTok, "bob"),
				f.loginAs(t, aliceTok, "alice"),
			}
			// want[caller] per class; readOpen is the answer of an anonymous read with reads open.
			type want struct{ apiRead, conRead, mutate, conMutate, qRead, qMutate int }
			anonRead, conAnon := 200, 200
			if readLogin {
				anonRead, conAnon = 401, 303
			}
			wants := map[string]want{
				"anonymous":              {anonRead, conAnon, 401, 401, 303, 401},
				"wrong token":            {401, 401, 401, 401, 401, 401},
				"viewer bearer":          {200, 200, 403, 403, 200, 403},
				"operator bearer":        {200, 200, 201, 303, 200, 204},
				"shared operator bearer": {200, 200, 201, 303, 200, 204},
				"session bob":            {200, 200, 403, 403, 200, 403},
				"session alice":          {200, 200, 201, 303, 200, 204},
			}
			if !readLogin {
				// A wrong token on an open read is not checked: the read needs none.
				w := wants["wrong token"]
				w.apiRead, w.conRead = 200, 200
				wants["wrong token"] = w
			}
			for _, c := range callers {
				w := wants[c.name]
				t.Run(c.name, func(t *testing.T) {
					check := func(class string, got answer, want int) {
						t.Helper()
						if got.status != want {
							t.Errorf("%s: status %d, want %d: %.200s", class, got.status, want, got.body)
						}
					}
					check("GET /api/items", f.send(t, c, "GET", "/api/items", "", nil), w.apiRead)
					check("GET / (console)", f.send(t, c, "GET", "/", "", nil), w.conRead)
					before, _ := f.store.Count(context.Background(), itemstore.ListOptions{})
					check("POST /api/items", f.send(t, c, "POST", "/api/items", `{"template":"t1"}`, nil), w.mutate)
					after, _ := f.store.Count(context.Background(), itemstore.ListOptions{})
					if w.mutate >= 400 && after != before {
						t.Errorf("a refused enqueue created an item (%d → %d)", before, after)
					}
					esc := f.escalated(t)
					close := url.Values{"action": {"close"}, api.CSRFField: {c.csrf}}.Encode()
					check("POST /items/{id}/resolve (console)", f.send(t, c, "POST", "/items/"+esc+"/resolve", close, nil), w.conMutate)
					if it, _ := f.store.Get(context.Background(), esc); (it.State == workitems.StateEscalated) != (w.conMutate >= 400) {
						t.Errorf("console close answered with the item %s", it.State)
					}
					check("GET /queues (page)", f.send(t, c, "GET", "/queues/", "", nil), w.qRead)
					qAPI := f.send(t, c, "GET", "/queues/api/queues/"+f.qname, "", nil)
					qReadWant := w.qRead
					if qReadWant == 303 {
						qReadWant = 401 // asynqmon's JSON API answers, never redirects
					}
					check("GET /queues/api/queues/<q>", qAPI, qReadWant)
					pause := f.send(t, c, "POST", "/queues/api/queues/"+f.qname+":pause", "", nil)
					check("POST /queues/api/queues/<q>:pause", pause, w.qMutate)
					if got := f.paused(t); got != (w.qMutate == 204) {
						t.Errorf("queue paused = %v after a pause answered %d", got, pause.status)
					}
					if f.paused(t) {
						if err := f.insp.UnpauseQueue(f.qname); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestSessionActionsNeedTheirCSRFTokenAndQueuesActionsTheSameOrigin: a session cookie alone
// does not act, and asynqmon's actions with a session are refused from another origin.
func TestSessionActionsNeedTheirCSRFTokenAndQueuesActionsTheSameOrigin(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, false, api.LoginLimits{})
	alice := f.loginAs(t, aliceTok, "alice")
	if alice.csrf == "" || alice.csrf == f.auth.CSRFToken() {
		t.Fatalf("alice's session CSRF token %q must exist and differ from the shared token's", alice.csrf)
	}
	noCSRF := &client{name: "no csrf", jar: alice.jar}
	if a := f.send(t, noCSRF, "POST", "/api/items", `{"template":"t1"}`, nil); a.status != 401 || !strings.Contains(a.body, "CSRF") {
		t.Fatalf("session without CSRF: %d %s", a.status, a.body)
	}
	if a := f.send(t, alice, "POST", "/queues/api/queues/"+f.qname+":pause", "", map[string]string{"Origin": "https://evil.example"}); a.status != 401 || f.paused(t) {
		t.Fatalf("cross-origin pause with a session: %d, paused %v", a.status, f.paused(t))
	}
	if a := f.send(t, alice, "POST", "/queues/api/queues/"+f.qname+":pause", "", map[string]string{"Sec-Fetch-Site": "cross-site"}); a.status != 401 || f.paused(t) {
		t.Fatalf("cross-site pause with a session: %d", a.status)
	}
	if a := f.send(t, alice, "POST", "/queues/api/queues/"+f.qname+":pause", "", map[string]string{"Origin": f.baseURL}); a.status != 204 || !f.paused(t) {
		t.Fatalf("same-origin pause with a session: %d %s", a.status, a.body)
	}
}

// TestSessionsAreSignedPerActorAndExpire: the cookie names the actor and credential, holds no
// token, cannot be edited into another actor, and ends after the session's age by the clock.
func TestSessionsAreSignedPerActorAndExpire(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, true, api.LoginLimits{})
	carol := f.loginAs(t, sharedTok, "carol")
	u, _ := url.Parse(f.baseURL)
	var session *http.Cookie
	for _, c := range carol.jar.Cookies(u) {
		if c.Name == api.SessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	for _, tok := range []string{aliceTok, bobTok, sharedTok} {
		if strings.Contains(session.Value, tok) {
			t.Fatal("the session cookie holds a token")
		}
	}
	if a := f.send(t, carol, "GET", "/", "", nil); a.status != 200 || !strings.Contains(a.body, "signed in as <b>carol</b> · operator") {
		t.Fatalf("carol's page: %d", a.status)
	}
	// Rewriting the actor in the payload breaks the signature.
	payload, sig, _ := strings.Cut(session.Value, ".")
	raw, _ := base64Decode(payload)
	forged := base64Encode(strings.Replace(raw, "carol", "alice", 1)) + "." + sig
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, []*http.Cookie{{Name: api.SessionCookie, Value: forged, Path: "/"}})
	if a := f.send(t, &client{jar: jar}, "GET", "/api/items", "", nil); a.status != 401 {
		t.Fatalf("a forged session read: %d", a.status)
	}
	f.clock.Advance(f.auth.SessionMaxAge() + time.Minute)
	if a := f.send(t, carol, "GET", "/api/items", "", nil); a.status != 401 {
		t.Fatalf("an expired session read: %d", a.status)
	}
}

// TestFailedLoginsAreRateLimited: past 5 failures a minute from one address the console's
// form and bearer tokens answer 429 with Retry-After, the right token included, until the
// window passes on the injected clock; the global limit caps all addresses together.
func TestFailedLoginsAreRateLimited(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, false, api.LoginLimits{PerIP: 5, Global: 50, Window: time.Minute})
	jar, _ := cookiejar.New(nil)
	c := &client{jar: jar}
	for i := range 5 {
		if a := f.send(t, c, "POST", "/login", url.Values{"token": {fmt.Sprintf("guess-%d", i)}}.Encode(), nil); a.status != 401 {
			t.Fatalf("failure %d: %d", i+1, a.status)
		}
		f.clock.Advance(time.Second)
	}
	a := f.send(t, c, "POST", "/login", url.Values{"token": {aliceTok}}.Encode(), nil)
	if a.status != 429 || a.header.Get("Retry-After") != "55" || !strings.Contains(a.body, "Too many failed logins") {
		t.Fatalf("6th attempt (the right token): %d, Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	if a := f.send(t, &client{bearer: aliceTok}, "POST", "/api/items", `{"template":"t1"}`, nil); a.status != 429 || a.header.Get("Retry-After") == "" {
		t.Fatalf("a bearer token while limited: %d", a.status)
	}
	f.clock.Advance(55 * time.Second) // the first failure leaves the window
	if a := f.send(t, c, "POST", "/login", url.Values{"token": {aliceTok}}.Encode(), nil); a.status != 303 {
		t.Fatalf("after the window: %d %s", a.status, a.body)
	}
	// Global: failures from many addresses add up (the handler is driven with their addresses).
	g, err := api.NewAuthWith(api.AuthOptions{Clock: f.clock, Limits: api.LoginLimits{PerIP: 5, Global: 3, Window: time.Minute},
		Credentials: []api.Credential{{Name: "alice", Role: api.RoleOperator, Token: aliceTok}}})
	if err != nil {
		t.Fatal(err)
	}
	h := api.Protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := g.Authorize(r, api.RoleOperator); err != nil {
			http.Error(w, err.Error(), api.StatusOf(err))
		}
	}), api.ProtectOptions{Auth: g})
	try := func(ip, tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/items", nil)
		r.RemoteAddr = ip + ":40000"
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := range 3 {
		if w := try(fmt.Sprintf("10.0.0.%d", i), "wrong"); w.Code != 401 {
			t.Fatalf("global failure %d: %d", i, w.Code)
		}
	}
	if w := try("10.0.0.9", aliceTok); w.Code != 429 || !strings.Contains(w.Body.String(), "on this server") {
		t.Fatalf("a fresh address past the global limit: %d %s", w.Code, w.Body)
	}
}

// TestEveryActionIsAuditedWithoutTokens: enqueue, steer, resolve (API and console), a refused
// action, logins that succeed and fail, asynqmon's pause and logout each leave one entry with
// actor, role, action, target and result; the list pages newest first by cursor; no token
// appears in Redis or the logs.
func TestEveryActionIsAuditedWithoutTokens(t *testing.T) {
	t.Parallel()
	f := newAccessFixture(t, false, api.LoginLimits{})
	alice := &client{bearer: aliceTok}
	a := f.send(t, alice, "POST", "/api/items", `{"template":"agent","input":"x"}`, nil)
	var it struct{ ID string }
	_ = json.Unmarshal([]byte(a.body), &it)
	if a.status != 201 {
		t.Fatalf("enqueue: %d %s", a.status, a.body)
	}
	if a := f.send(t, alice, "POST", "/api/items/"+it.ID+"/steer", `{"text":"look at the docs"}`, nil); a.status != 202 {
		t.Fatalf("steer: %d", a.status)
	}
	esc := f.escalated(t)
	// A personal token's actor cannot be renamed by the body.
	if a := f.send(t, alice, "POST", "/api/items/"+esc+"/resolve", `{"action":"close","actor":"mallory"}`, nil); a.status != 200 {
		t.Fatalf("resolve: %d %s", a.status, a.body)
	}
	got, _ := f.store.Get(context.Background(), esc)
	if got.Resolution[0].Actor != "alice" {
		t.Fatalf("resolution actor %q, want alice", got.Resolution[0].Actor)
	}
	if a := f.send(t, &client{bearer: bobTok}, "POST", "/api/items", `{"template":"t1"}`, nil); a.status != 403 {
		t.Fatalf("viewer enqueue: %d", a.status)
	}
	if a := f.send(t, &client{bearer: "wrong-token-abcdefghijklmnop"}, "POST", "/api/items", `{"template":"t1"}`, nil); a.status != 401 {
		t.Fatalf("wrong token: %d", a.status)
	}
	if a := f.send(t, nil, "POST", "/api/items", `{"template":"t1"}`, nil); a.status != 401 {
		t.Fatalf("anonymous: %d", a.status)
	}
	jar, _ := cookiejar.New(nil)
	if a := f.send(t, &client{jar: jar}, "POST", "/login", url.Values{"token": {"guess-guess"}, "name": {"eve"}}.Encode(), nil); a.status != 401 {
		t.Fatalf("failed login: %d", a.status)
	}
	dana := f.loginAs(t, sharedTok, "dana")
	esc2 := f.escalated(t)
	form := url.Values{"action": {"cancel"}, api.CSRFField: {dana.csrf}}.Encode()
	if a := f.send(t, dana, "POST", "/items/"+esc2+"/resolve", form, nil); a.status != 303 {
		t.Fatalf("console cancel: %d %s", a.status, a.body)
	}
	if a := f.send(t, alice, "POST", "/queues/api/queues/"+f.qname+":pause", "", nil); a.status != 204 {
		t.Fatalf("queues pause: %d", a.status)
	}
	if a := f.send(t, dana, "POST", "/logout", "", nil); a.status != 303 {
		t.Fatalf("logout: %d", a.status)
	}

	type row struct{ actor, cred, role, via, action, target, result, detail string }
	want := []row{ // newest first
		{"dana", api.OperatorTokenName, "operator", "console", "logout", "", "ok", ""},
		{"alice", "alice", "operator", "queues", "queues:pause", "queues/" + f.qname, "ok", ""},
		{"dana", api.OperatorTokenName, "operator", "console", "resolve", esc2, "ok", "cancel"},
		{"dana", api.OperatorTokenName, "operator", "console", "login", "", "ok", ""},
		{"eve", "", "", "console", "login", "", "refused", "wrong token"},
		{"anonymous", "", "", "api", "enqueue", "", "refused", "wrong bearer token"},
		{"bob", "bob", "viewer", "api", "enqueue", "", "refused", ""},
		{"alice", "alice", "operator", "api", "resolve", esc, "ok", "close"},
		{"alice", "alice", "operator", "api", "steer", it.ID, "ok", ""},
		{"alice", "alice", "operator", "api", "enqueue", "", "ok", ""},
	}
	a = f.send(t, alice, "GET", "/api/audit?limit=100", "", nil)
	var page struct {
		Entries []api.AuditEntry `json:"entries"`
		Next    string           `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(a.body), &page); err != nil || a.status != 200 {
		t.Fatalf("GET /api/audit: %d %s", a.status, a.body)
	}
	var rows []row
	for _, e := range page.Entries {
		rows = append(rows, row{e.Actor, e.Credential, string(e.Role), string(e.Via), e.Action, e.Target, string(e.Result), e.Detail})
		if !e.At.Equal(f.clock.Now()) {
			t.Errorf("entry %s at %v, not the injected clock's %v", e.Action, e.At, f.clock.Now())
		}
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("audit entries:\n got %v\nwant %v", rows, want)
	}
	// Pages by cursor: 4 + 4 + 2, no overlap.
	var ids []string
	cursor := ""
	for n := 0; ; n++ {
		a := f.send(t, alice, "GET", "/api/audit?limit=4&cursor="+cursor, "", nil)
		var p struct {
			Entries []api.AuditEntry `json:"entries"`
			Next    string           `json:"next_cursor"`
		}
		_ = json.Unmarshal([]byte(a.body), &p)
		for _, e := range p.Entries {
			ids = append(ids, e.ID)
		}
		if p.Next == "" || n > 5 {
			break
		}
		cursor = p.Next
	}
	if len(ids) != len(want) || ids[0] != page.Entries[0].ID || ids[len(ids)-1] != page.Entries[len(want)-1].ID {
		t.Fatalf("paged ids %v", ids)
	}
	if a := f.send(t, alice, "GET", "/api/audit?cursor=bogus", "", nil); a.status != 400 || !strings.Contains(a.body, "cursor") {
		t.Fatalf("bad cursor: %d %s", a.status, a.body)
	}
	if a := f.send(t, nil, "GET", "/api/audit", "", nil); a.status != 401 {
		t.Fatalf("anonymous audit read: %d", a.status)
	}
	con := f.send(t, &client{jar: dana.jar}, "GET", "/audit", "", nil)
	if con.status != 303 { // dana logged out
		t.Fatalf("console /audit after logout: %d", con.status)
	}
	bob := f.loginAs(t, bobTok, "bob")
	esc3 := f.escalated(t)
	if inbox := f.send(t, bob, "GET", "/escalations", "", nil); !strings.Contains(inbox.body, esc3) ||
		!strings.Contains(inbox.body, "signed in as <b>bob</b> · viewer") || strings.Contains(inbox.body, api.CSRFField) {
		t.Fatalf("a viewer's inbox must show the item and the role and no action forms (%d)", inbox.status)
	}
	con = f.send(t, bob, "GET", "/audit", "", nil)
	if con.status != 200 || !strings.Contains(con.body, "queues:pause") || !strings.Contains(con.body, esc2) {
		t.Fatalf("console /audit: %d", con.status)
	}
	// No token anywhere: not in Redis, not in the logs.
	raw, err := f.store.Redis().XRange(context.Background(), f.store.Prefix()+"audit", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	dump := fmt.Sprint(raw) + f.logText()
	for _, tok := range []string{aliceTok, bobTok, sharedTok, "guess-guess", "wrong-token-abcdefghijklmnop"} {
		if strings.Contains(dump, tok) {
			t.Errorf("a token (%.6s…) appears in the audit list or the logs", tok)
		}
	}
}

// TestTheAuditListIsCapped: the stream keeps about max entries (approximate trimming in the
// XADD), so it never grows without bound.
func TestTheAuditListIsCapped(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	l := api.NewAuditLog(env.Client, env.Prefix, 100, nil)
	for i := range 1000 {
		if err := l.Record(context.Background(), api.AuditEntry{Actor: "a", Action: fmt.Sprint(i), Result: api.AuditOK}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := l.Len(context.Background())
	if err != nil || n < 100 || n > 300 {
		t.Fatalf("kept %d entries (cap 100, approximate): %v", n, err)
	}
	es, _, _ := l.List(context.Background(), "", 1)
	if len(es) != 1 || es[0].Action != "999" {
		t.Fatalf("newest entry: %+v", es)
	}
}

// TestAuthFromEnvReadsRolesTokensFileAndReadLogin: the environment's shared tokens, a tokens
// file with token_env and token_sha256 entries, OUTERLOOP_READ_LOGIN; and bad input named.
func TestAuthFromEnvReadsRolesTokensFileAndReadLogin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.yaml")
	// sha256("carol-token-0123456789abcdef")
	const carolTok = "carol-token-0123456789abcdef"
	sum := sha256Hex(carolTok)
	if err := os.WriteFile(file, []byte("tokens:\n  - {name: alice, role: operator, token_env: ALICE_TOKEN}\n"+
		"  - {name: carol, role: viewer, token_sha256: "+sum+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OUTERLOOP_API_TOKEN": "short", "OUTERLOOP_VIEWER_TOKEN": bobTok,
		"OUTERLOOP_TOKENS_FILE": file, "ALICE_TOKEN": aliceTok, "OUTERLOOP_READ_LOGIN": "1"}
	a, err := api.AuthFromEnv(func(k string) string { return env[k] }, api.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !a.ReadLogin() || fmt.Sprint(a.Describe()) != "[OUTERLOOP_API_TOKEN (operator) OUTERLOOP_VIEWER_TOKEN (viewer) alice (operator) carol (viewer)]" {
		t.Fatalf("read login %v, credentials %v", a.ReadLogin(), a.Describe())
	}
	for tok, want := range map[string]string{aliceTok: "alice operator", carolTok: "carol viewer", bobTok: "api viewer", "short": "api operator"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		p, ok := a.Identify(r)
		if got := p.Actor + " " + string(p.Role); !ok || got != want {
			t.Errorf("token of %s: %q", want, got)
		}
	}
	bad := []struct {
		name, yaml string
		env        map[string]string
		want       string
	}{
		{"unknown role", "tokens:\n  - {name: x, role: admin, token_env: X}\n", map[string]string{"X": aliceTok}, `role "admin"`},
		{"unset variable", "tokens:\n  - {name: x, role: viewer, token_env: NOPE}\n", nil, "token_env NOPE is not set"},
		{"short token", "tokens:\n  - {name: x, role: viewer, token_env: X}\n", map[string]string{"X": "abc"}, "shorter than 16"},
		{"duplicate token", "tokens:\n  - {name: x, role: viewer, token_env: X}\n  - {name: y, role: operator, token_env: X}\n", map[string]string{"X": aliceTok}, `the same token as "x"`},
		{"duplicate name", "tokens:\n  - {name: x, role: viewer, token_env: X}\n  - {name: x, role: viewer, token_env: Y}\n", map[string]string{"X": aliceTok, "Y": bobTok}, "used twice"},
		{"unknown key", "tokens:\n  - {name: x, role: viewer, token: abc}\n", nil, "field token not found"},
		{"bad hash", "tokens:\n  - {name: x, role: viewer, token_sha256: abc}\n", nil, "not 64 hex digits"},
		{"read login without tokens", "", map[string]string{"OUTERLOOP_READ_LOGIN": "1"}, "needs a token"},
		{"read login value", "", map[string]string{"OUTERLOOP_READ_LOGIN": "yes", "OUTERLOOP_API_TOKEN": "x"}, `OUTERLOOP_READ_LOGIN="yes"`},
	}
	for _, tc := range bad {
		e := map[string]string{}
		for k, v := range tc.env {
			e[k] = v
		}
		if tc.yaml != "" {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			_ = os.WriteFile(p, []byte(tc.yaml), 0o600)
			e["OUTERLOOP_TOKENS_FILE"] = p
		}
		_, err := api.AuthFromEnv(func(k string) string { return e[k] }, api.AuthOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to name %q", tc.name, err, tc.want)
		} else if strings.Contains(err.Error(), aliceTok) || strings.Contains(err.Error(), bobTok) {
			t.Errorf("%s: the error shows a token: %v", tc.name, err)
		}
	}
}

func base64Decode(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return string(b), err
}

func base64Encode(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestANewEndpointIsAuditedWithoutEdits: a route added later (the template controls) is
// recorded by Protect with its last word as the action and its wildcards as the target.
func TestANewEndpointIsAuditedWithoutEdits(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	auth, err := api.NewAuthWith(api.AuthOptions{Credentials: []api.Credential{{Name: "alice", Role: api.RoleOperator, Token: aliceTok}}})
	if err != nil {
		t.Fatal(err)
	}
	audit := api.NewAuditLog(env.Client, env.Prefix, 0, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/templates/{name}/pause", func(w http.ResponseWriter, r *http.Request) {
		if _, err := auth.Authorize(r, api.RoleOperator); err != nil {
			http.Error(w, err.Error(), api.StatusOf(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(api.Protect(mux, api.ProtectOptions{Auth: auth, Audit: audit}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("POST", srv.URL+"/api/templates/nightly/pause", nil)
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	es, _, err := audit.List(context.Background(), "", 10)
	if err != nil || len(es) != 1 {
		t.Fatalf("entries %+v: %v", es, err)
	}
	e := es[0]
	if e.Action != "pause" || e.Target != "nightly" || e.Actor != "alice" || e.Route != "POST /api/templates/{name}/pause" ||
		e.Result != api.AuditOK || e.Status != http.StatusNoContent || e.Via != api.ViaAPI {
		t.Fatalf("entry %+v", e)
	}
}
