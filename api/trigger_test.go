package api_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/api"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/metrics"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const triggerSecret = "payments-trigger-secret-0123456789"

const triggerYAML = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: payments-errors
    goal: "Fix {{ .title }} ({{ .count }} events{{ .missing }})"
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - api: {secret_env: PAYMENTS_TRIGGER_SECRET}
  - name: one-at-a-time
    goal: as is
    max_open: 1
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - api: {secret_env: PAYMENTS_TRIGGER_SECRET}
  - name: two-an-hour
    goal: as is
    max_per_hour: 2
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - api: {secret_env: PAYMENTS_TRIGGER_SECRET}
  - name: odd-goal
    goal: "Look at {{ .where.file }}"
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - api: {secret_env: PAYMENTS_TRIGGER_SECRET}
  - name: no-secret
    goal: x
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - api: {secret_env: UNSET_TRIGGER_SECRET}
  - name: plain
    goal: plain
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

type triggerFixture struct {
	urls    []string // one per handler: two API servers on one store, as two replicas
	store   *itemstore.Store
	queue   *scheduler.Queue
	clock   *fakeclock.Clock
	metrics *metrics.Metrics
}

func newTriggerFixture(t *testing.T) *triggerFixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(triggerYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	clock := fakeclock.New(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue, Clock: clock})
	m := metrics.New()
	m.SetConfig(cfg)
	getenv := func(k string) string {
		if k == "PAYMENTS_TRIGGER_SECRET" {
			return triggerSecret
		}
		return ""
	}
	f := &triggerFixture{store: store, queue: q, clock: clock, metrics: m}
	for range 2 {
		s := api.New(api.Options{Queue: q, Auth: api.NewAuth(token), Triggers: m, Clock: clock, Getenv: getenv})
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		f.urls = append(f.urls, srv.URL)
	}
	return f
}

// post sends body to the template's trigger endpoint of handler 0 with the headers given.
func (f *triggerFixture) post(t *testing.T, template, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	return f.postTo(t, f.urls[0], template, body, headers)
}

func (f *triggerFixture) postTo(t *testing.T, url, template, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/templates/"+template+"/trigger", strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func bearer(s string) map[string]string { return map[string]string{"Authorization": "Bearer " + s} }

// signed are the headers of body signed with secret at ts.
func signed(secret string, ts time.Time, body string) map[string]string {
	sec := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(sec + "." + body))
	return map[string]string{api.TimestampHeader: sec, api.SignatureHeader: "sha256=" + hex.EncodeToString(m.Sum(nil))}
}

// items lists the stored items of template.
func (f *triggerFixture) items(t *testing.T, template string) []*workitems.Item {
	t.Helper()
	its, err := f.store.List(context.Background(), itemstore.ListOptions{Template: template, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

// firings reads outerloop_trigger_firings_total{template, source="api", result}.
func (f *triggerFixture) firings(t *testing.T, template string, result workitems.TriggerResult) float64 {
	t.Helper()
	fams, err := f.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != "outerloop_trigger_firings_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["template"] == template && l["source"] == "api" && l["result"] == string(result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestTriggerWithTheBearerSecretMakesAnItemWithTheFields(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	body := `{"title": "checkout 500s", "count": 3, "urgent": true, "labels": {"service": "payments"}, "log": "line 1\nline 2"}`
	code, m := f.post(t, "payments-errors", body, bearer(triggerSecret))
	if code != http.StatusCreated || m["deduplicated"] != false || m["item"] == "" {
		t.Fatalf("trigger: %d %v", code, m)
	}
	it, err := f.store.Get(context.Background(), m["item"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if it.Goal != "Fix checkout 500s (3 events)" {
		t.Errorf("goal %q", it.Goal)
	}
	in := it.Attempts[0].Condition.Input
	for _, want := range []string{"authenticated by bearer", "title: checkout 500s\n", "count: 3\n", "urgent: true\n",
		`labels: {"service":"payments"}`, "log:\n    line 1\n    line 2\n"} {
		if !strings.Contains(in, want) {
			t.Errorf("input lacks %q:\n%s", want, in)
		}
	}
	o := it.Origin
	if o.Kind != workitems.OriginAPI || o.Caller == nil || o.Caller.Auth != workitems.CallerBearer || !slices.Contains(workitems.AllCallerAuths(), o.Caller.Auth) ||
		strings.Join(o.Caller.Fields, ",") != "count,labels,log,title,urgent" || o.Caller.IdempotencyKey != "" {
		t.Errorf("origin %+v caller %+v", o, o.Caller)
	}
	if strings.Contains(fmt.Sprintf("%+v", it), triggerSecret) {
		t.Error("the secret is stored on the item")
	}
	// Without a key each request is a new item.
	if code, _ := f.post(t, "payments-errors", `{"title": "again"}`, bearer(triggerSecret)); code != http.StatusCreated {
		t.Fatalf("second trigger: %d", code)
	}
	if n := len(f.items(t, "payments-errors")); n != 2 {
		t.Errorf("%d items, want 2", n)
	}
	if n := f.firings(t, "payments-errors", workitems.TriggerMade); n != 2 {
		t.Errorf("made = %v, want 2", n)
	}
}

func TestTriggerWithoutTheSecretIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	cases := []struct {
		name, template string
		headers        map[string]string
		code           int
		want           string
	}{
		{"no credentials", "payments-errors", nil, http.StatusUnauthorized, "no credentials"},
		{"wrong secret", "payments-errors", bearer("not-the-secret-at-all"), http.StatusUnauthorized, "not this template's trigger secret"},
		{"the API's operator token", "payments-errors", bearer(token), http.StatusUnauthorized, "not this template's trigger secret"},
		{"unknown template", "nosuch", bearer(triggerSecret), http.StatusNotFound, `template "nosuch" is not configured`},
		{"no api trigger", "plain", bearer(triggerSecret), http.StatusNotFound, "has no api trigger"},
		{"secret unset", "no-secret", bearer(triggerSecret), http.StatusServiceUnavailable, "template's trigger secret is not set"},
	}
	for _, tc := range cases {
		code, m := f.post(t, tc.template, `{"title": "x"}`, tc.headers)
		if msg, _ := m["error"].(string); code != tc.code || !strings.Contains(msg, tc.want) || strings.Contains(msg, triggerSecret) {
			t.Errorf("%s: %d %v, want %d containing %q", tc.name, code, m, tc.code, tc.want)
		}
	}
	for _, tm := range []string{"payments-errors", "plain", "no-secret"} {
		if its := f.items(t, tm); len(its) != 0 {
			t.Errorf("%s: %d items stored by refused requests", tm, len(its))
		}
	}
	if n := f.firings(t, "payments-errors", workitems.TriggerRefused); n != 3 {
		t.Errorf("payments-errors refused = %v, want 3", n)
	}
	if n := f.firings(t, "other", workitems.TriggerRefused); n != 1 {
		t.Errorf("other refused = %v, want 1 (the unknown template)", n)
	}
	// Wrong trigger secrets are not failed logins of the API: its operator still acts.
	for range 6 {
		f.post(t, "payments-errors", "{}", bearer("wrong-wrong-wrong-wrong"))
	}
	req, _ := http.NewRequest(http.MethodPost, f.urls[0]+"/api/items", strings.NewReader(`{"template":"plain"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the operator's enqueue after wrong trigger secrets: %d, want 201", resp.StatusCode)
	}
}

func TestTriggerWithAnHMACSignature(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	body := `{"title": "signed"}`
	h := signed(triggerSecret, f.clock.Now(), body)
	code, m := f.post(t, "payments-errors", body, h)
	if code != http.StatusCreated {
		t.Fatalf("signed: %d %v", code, m)
	}
	it, err := f.store.Get(context.Background(), m["item"].(string))
	if err != nil || it.Origin.Caller == nil || it.Origin.Caller.Auth != workitems.CallerHMAC || it.Goal != "Fix signed ( events)" {
		t.Fatalf("item %+v, %v", it, err)
	}
	// The signature is remembered under the store's prefix for no longer than the window.
	keys, err := f.store.Redis().Keys(context.Background(), f.store.Prefix()+"trigger:sig:payments-errors:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("replay keys %v, %v", keys, err)
	}
	if ttl := f.store.Redis().TTL(context.Background(), keys[0]).Val(); ttl <= 0 || ttl > api.TriggerWindow+time.Second {
		t.Errorf("replay key's TTL %v, want at most %v", ttl, api.TriggerWindow+time.Second)
	}
	refused := func(name string, h map[string]string, body, want string) {
		t.Helper()
		code, m := f.post(t, "payments-errors", body, h)
		if msg, _ := m["error"].(string); code != http.StatusUnauthorized || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v, want 401 containing %q", name, code, m, want)
		}
	}
	refused("replayed", h, body, "used before")
	refused("replayed to the other replica", h, body, "used before") // the store is shared
	refused("stale", signed(triggerSecret, f.clock.Now().Add(-5*time.Minute-time.Second), body), body, "more than 5m0s")
	refused("future", signed(triggerSecret, f.clock.Now().Add(5*time.Minute+time.Second), body), body, "more than 5m0s")
	refused("wrong secret", signed("another-secret-0123456789", f.clock.Now(), body), body, "does not match")
	refused("body changed", signed(triggerSecret, f.clock.Now().Add(time.Second), body), `{"title": "other"}`, "does not match")
	refused("no timestamp", map[string]string{api.SignatureHeader: h[api.SignatureHeader]}, body, "needs both")
	// Signed at the edge of the window, then the clock moves past it: the same request is stale.
	edge := signed(triggerSecret, f.clock.Now().Add(-4*time.Minute), `{"title": "edge"}`)
	f.clock.Advance(2 * time.Minute)
	refused("stale after the clock moved", edge, `{"title": "edge"}`, "more than 5m0s")
	if n := len(f.items(t, "payments-errors")); n != 1 {
		t.Errorf("%d items, want 1", n)
	}
	if n := f.firings(t, "payments-errors", workitems.TriggerRefused); n != 8 {
		t.Errorf("refused = %v, want 8", n)
	}
}

func TestAnIdempotencyKeyMakesOneItem(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	hdr := bearer(triggerSecret)
	hdr[api.IdempotencyHeader] = "sentry-issue-4711"
	code, first := f.post(t, "payments-errors", `{"title": "a"}`, hdr)
	if code != http.StatusCreated {
		t.Fatalf("first: %d %v", code, first)
	}
	code, second := f.post(t, "payments-errors", `{"title": "a"}`, hdr)
	if code != http.StatusOK || second["item"] != first["item"] || second["deduplicated"] != true {
		t.Fatalf("second: %d %v, want 200 with item %v deduplicated", code, second, first["item"])
	}
	it, _ := f.store.Get(context.Background(), first["item"].(string))
	if it == nil || it.Origin.Caller.IdempotencyKey != "sentry-issue-4711" {
		t.Errorf("item %+v", it)
	}
	// Concurrently, through two handlers, with the key in the body: one item.
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	ids := make([]any, n)
	for i := range n {
		wg.Go(func() {
			c, m := f.postTo(t, f.urls[i%2], "payments-errors", `{"title": "b", "idempotency_key": "pagerduty-Q1"}`, bearer(triggerSecret))
			codes[i], ids[i] = c, m["item"]
		})
	}
	wg.Wait()
	made := 0
	for i := range n {
		switch {
		case codes[i] == http.StatusCreated:
			made++
		case codes[i] != http.StatusOK:
			t.Errorf("request %d: %d", i, codes[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("request %d answered item %v, request 0 %v", i, ids[i], ids[0])
		}
	}
	if made != 1 {
		t.Errorf("%d requests made an item, want 1", made)
	}
	if got := len(f.items(t, "payments-errors")); got != 2 {
		t.Errorf("%d items, want 2 (one per key)", got)
	}
	if d := f.firings(t, "payments-errors", workitems.TriggerDeduplicated); d != n {
		t.Errorf("deduplicated = %v, want %d", d, n)
	}
	// The header and the body field must agree.
	hdr[api.IdempotencyHeader] = "one"
	if code, m := f.post(t, "payments-errors", `{"idempotency_key": "two"}`, hdr); code != http.StatusBadRequest ||
		!strings.Contains(m["error"].(string), "differ") {
		t.Errorf("differing keys: %d %v", code, m)
	}
}

func TestBadTriggerBodiesAreRefusedNamingWhatIsWrong(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	many := map[string]int{}
	for i := range api.MaxTriggerFields + 1 {
		many[fmt.Sprintf("f%d", i)] = i
	}
	manyJSON, _ := json.Marshal(many)
	cases := []struct {
		name, template, body string
		code                 int
		want                 string
	}{
		{"oversized", "payments-errors", `{"title": "` + strings.Repeat("x", api.MaxBody) + `"}`, http.StatusRequestEntityTooLarge, "larger than"},
		{"malformed", "payments-errors", `{"title": `, http.StatusBadRequest, "not JSON"},
		{"not an object", "payments-errors", `["a"]`, http.StatusBadRequest, "not a JSON object"},
		{"bad field name", "payments-errors", `{"Title": "x"}`, http.StatusBadRequest, `field "Title"`},
		{"too deep", "payments-errors", `{"labels": {"a": {"b": 1}}}`, http.StatusBadRequest, "field labels: .a: too deep"},
		{"too deep in an array", "payments-errors", `{"list": [[1]]}`, http.StatusBadRequest, "field list: [0]: too deep"},
		{"null", "payments-errors", `{"title": null}`, http.StatusBadRequest, "field title: null"},
		{"long string", "payments-errors", `{"log": "` + strings.Repeat("x", api.MaxTriggerString+1) + `"}`, http.StatusBadRequest, "field log: a string of"},
		{"too many fields", "payments-errors", string(manyJSON), http.StatusBadRequest, "at most 64"},
		{"trailing data", "payments-errors", `{} {}`, http.StatusBadRequest, "after the JSON object"},
		{"long key", "payments-errors", `{"idempotency_key": "` + strings.Repeat("k", api.MaxIdempotencyKey+1) + `"}`, http.StatusBadRequest, "idempotency key"},
		{"goal cannot be filled", "odd-goal", `{"where": "a string, not an object"}`, http.StatusBadRequest, "goal:"},
	}
	for _, tc := range cases {
		code, m := f.post(t, tc.template, tc.body, bearer(triggerSecret))
		if msg, _ := m["error"].(string); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %v, want %d containing %q", tc.name, code, m, tc.code, tc.want)
		}
	}
	for _, tm := range []string{"payments-errors", "odd-goal"} {
		if its := f.items(t, tm); len(its) != 0 {
			t.Errorf("%s: %d items stored by refused bodies", tm, len(its))
		}
	}
	if n := f.firings(t, "payments-errors", workitems.TriggerRefused); n != float64(len(cases)-1) {
		t.Errorf("refused = %v, want %d", n, len(cases)-1)
	}
	// An empty body is a trigger without fields.
	if code, m := f.post(t, "one-at-a-time", "", bearer(triggerSecret)); code != http.StatusCreated {
		t.Errorf("empty body: %d %v", code, m)
	}
}

func TestAPausedOrCappedTemplateMakesNoItem(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	ctx := context.Background()
	if _, err := f.queue.Pause(ctx, "payments-errors", "alice", "noisy"); err != nil {
		t.Fatal(err)
	}
	code, m := f.post(t, "payments-errors", `{"title": "x"}`, bearer(triggerSecret))
	if msg, _ := m["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "paused (by alice)") {
		t.Errorf("paused: %d %v", code, m)
	}
	if its := f.items(t, "payments-errors"); len(its) != 0 {
		t.Errorf("%d items made while paused", len(its))
	}
	if n := f.firings(t, "payments-errors", workitems.TriggerPaused); n != 1 {
		t.Errorf("paused = %v, want 1", n)
	}
	if code, _ := f.post(t, "one-at-a-time", "{}", bearer(triggerSecret)); code != http.StatusCreated {
		t.Fatalf("first of max_open 1: %d", code)
	}
	code, m = f.post(t, "one-at-a-time", "{}", bearer(triggerSecret))
	if msg, _ := m["error"].(string); code != http.StatusTooManyRequests || !strings.Contains(msg, "limit") {
		t.Errorf("past max_open: %d %v", code, m)
	}
	if n := f.firings(t, "one-at-a-time", workitems.TriggerCapped); n != 1 {
		t.Errorf("capped = %v, want 1", n)
	}
	// max_per_hour holds for the endpoint as for every trigger: two items, the third capped; a
	// repeated idempotency key is a repeat, not a firing that uses the hour up.
	for i, body := range []string{`{"idempotency_key": "a"}`, `{"idempotency_key": "a"}`, `{"idempotency_key": "b"}`} {
		if code, m := f.post(t, "two-an-hour", body, bearer(triggerSecret)); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("request %d within max_per_hour: %d %v", i, code, m)
		}
	}
	code, m = f.post(t, "two-an-hour", `{"idempotency_key": "c"}`, bearer(triggerSecret))
	if msg, _ := m["error"].(string); code != http.StatusTooManyRequests || !strings.Contains(msg, "this hour") {
		t.Errorf("past max_per_hour: %d %v", code, m)
	}
	if its := f.items(t, "two-an-hour"); len(its) != 2 {
		t.Errorf("%d items of a template of max_per_hour 2, want 2", len(its))
	}
	if n := f.firings(t, "two-an-hour", workitems.TriggerCapped); n != 1 {
		t.Errorf("capped = %v, want 1", n)
	}
}

// TestTheDocsCIJobSignatureIsAccepted: the openssl line docs/triggers.md gives a CI job computes
// the signature the endpoint checks.
func TestTheDocsCIJobSignatureIsAccepted(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	f := newTriggerFixture(t)
	body := `{"title":"nightly e2e failed","job":"e2e","idempotency_key":"ci-e2e-4711"}`
	ts := strconv.FormatInt(f.clock.Now().Unix(), 10)
	cmd := exec.Command("sh", "-c", `printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$SECRET" -r | cut -d' ' -f1`)
	cmd.Env = append(os.Environ(), "ts="+ts, "body="+body, "SECRET="+triggerSecret)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{api.TimestampHeader: ts, api.SignatureHeader: "sha256=" + strings.TrimSpace(string(out))}
	if code, m := f.post(t, "payments-errors", body, h); code != http.StatusCreated {
		t.Fatalf("the docs' signature: %d %v", code, m)
	}
}

// TestAnOversizedChunkedBodyIsRefused: a body without a Content-Length is cut at MaxBody too.
func TestAnOversizedChunkedBodyIsRefused(t *testing.T) {
	t.Parallel()
	f := newTriggerFixture(t)
	body := io.MultiReader(strings.NewReader(`{"title": "`+strings.Repeat("x", api.MaxBody)), strings.NewReader(`"}`))
	req, _ := http.NewRequest(http.MethodPost, f.urls[0]+"/api/templates/payments-errors/trigger", body)
	req.Header.Set("Authorization", "Bearer "+triggerSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversized body: %d (request length %d), want 413", resp.StatusCode, req.ContentLength)
	}
	if its := f.items(t, "payments-errors"); len(its) != 0 {
		t.Errorf("%d items stored", len(its))
	}
}
