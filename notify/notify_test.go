package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/notify"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

const secret = "s3cret-signing-key"

// receiver is a real HTTP server that fails the first `fail` requests with 500 (or, with
// hang, holds the first request until the client gives up) and records every request.
type receiver struct {
	srv   *httptest.Server
	got   chan request
	clock *fakeclock.Clock
	mu    sync.Mutex
	fail  int
	hang  int
	n     int
}

type request struct {
	n      int
	at     time.Time // fake clock reading when it arrived
	header http.Header
	body   []byte
	path   string
}

func newReceiver(t *testing.T, clock *fakeclock.Clock, fail, hang int) *receiver {
	r := &receiver{got: make(chan request, 100), clock: clock, fail: fail, hang: hang}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.n++
		n := r.n
		r.mu.Unlock()
		r.got <- request{n: n, at: clock.Now(), header: req.Header.Clone(), body: body, path: req.URL.Path}
		if n <= r.hang {
			<-req.Context().Done() // the dispatcher is stopped mid-request
			return
		}
		if n <= r.fail {
			http.Error(w, "receiver down for maintenance", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) next(t *testing.T) request {
	t.Helper()
	select {
	case q := <-r.got:
		return q
	case <-testwait.After(t):
		t.Fatal("no notification arrived")
	}
	return request{}
}

func (r *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case q := <-r.got:
		t.Fatalf("unexpected request %d: %s", q.n, q.body)
	default:
	}
}

type counts struct {
	mu      sync.Mutex
	m       map[string]int
	changed chan struct{} // signalled (without blocking) after every observation
}

func newCounts() *counts { return &counts{m: map[string]int{}, changed: make(chan struct{}, 1)} }

func (c *counts) Notification(sink string, r notify.Result) {
	c.mu.Lock()
	c.m[sink+"/"+string(r)]++
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// snapshot copies the counts under the lock (the dispatcher may still be observing).
func (c *counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// await waits until every count in want is reached exactly: a delivery's state is written in
// Redis before the dispatcher reports it, so a test that saw the state must still wait for
// the report. It fails the test at the test's deadline with what was observed.
func (c *counts) await(t *testing.T, want map[string]int) {
	t.Helper()
	timeout := testwait.After(t)
	for {
		got, ok := c.snapshot(), true
		for k, n := range want {
			if got[k] != n {
				ok = false
			}
		}
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-timeout:
			t.Errorf("observed %v, want %v", got, want)
			return
		}
	}
}

type rig struct {
	clock  *fakeclock.Clock
	store  *itemstore.Store
	outbox *notify.Outbox
	cfg    *config.Config
	obs    *counts
	env    func(string) string
	sinks  *notify.Registry // the dispatchers' sink kinds (nil: the built-in ones)
}

// setup opens a store on real Redis with the outbox's hooks installed; sinks is the YAML of
// notify.sinks (URL placeholder {url}).
func setup(t *testing.T, clock *fakeclock.Clock, recv string, notifyYAML string) *rig {
	t.Helper()
	return setupWith(t, clock, recv, notifyYAML, nil)
}

// setupWith is setup with the sink kinds of sinks (nil: the built-in ones), which the config is
// validated with and the rig's dispatchers send through.
func setupWith(t *testing.T, clock *fakeclock.Clock, recv string, notifyYAML string, sinks *notify.Registry) *rig {
	t.Helper()
	y := strings.ReplaceAll(notifyYAML, "{url}", recv) + `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: nightly
    goal: keep it green
    daily_cost_cap_usd: 1
    escalate: "#payments-oncall"
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`
	kinds := config.Kinds{}
	if sinks != nil {
		kinds.Sinks = sinks
	}
	cfg, err := config.ParseConfigWith([]byte(y), kinds)
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	r := &rig{clock: clock, cfg: cfg, obs: newCounts(), sinks: sinks,
		env: func(k string) string {
			if k == "TEST_SECRET" {
				return secret
			}
			return ""
		}}
	r.outbox = notify.NewOutbox(env.Client, env.Prefix, cfg, clock, nil)
	r.store = itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock),
		itemstore.WithTransitionHook(r.outbox.TransitionHook()), itemstore.WithLimitHook(r.outbox.LimitHook()))
	return r
}

func (r *rig) dispatcher(t *testing.T, id string) *notify.Dispatcher {
	t.Helper()
	d, err := notify.NewDispatcher(notify.DispatcherOptions{Outbox: r.outbox, Clock: r.clock, Getenv: r.env, Observer: r.obs, Logger: testLogger(),
		Sinks: r.sinks, ID: id, Poll: time.Hour, Visibility: 30 * time.Second, Rand: func() float64 { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// escalate takes a new item of template nightly through the store's real transitions to
// escalated: lease, start, exit, the verifier's escalate decision.
func (r *rig) escalate(t *testing.T, id string) *workitems.Item {
	t.Helper()
	ctx := context.Background()
	if err := r.store.Create(ctx, &workitems.Item{ID: id, Template: "nightly", Goal: "keep it green", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f := r.run(t, id, 0)
	it, err := r.store.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "no_progress",
		Summary: "the same test failed twice", Actor: "verifier"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// run runs attempt 1 of id to its exit, charging cost.
func (r *rig) run(t *testing.T, id string, cost float64) *itemstore.Fence {
	t.Helper()
	ctx := context.Background()
	f, err := r.store.AcquireLease(ctx, id, 1, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.store.StartAttempt(ctx, f, "w1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: cost}, "", false); err != nil {
		t.Fatal(err)
	}
	return f
}

func (r *rig) awaitState(t *testing.T, s notify.State, n int) []notify.Delivery {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		ds, err := r.outbox.List(context.Background(), s, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) >= n {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d deliveries %s, have %d", n, s, len(ds))
		}
		// The outcome is written by the dispatcher's goroutine right after the receiver answered:
		// poll the outbox for it (there is no event to wait on across Redis).
		time.Sleep(5 * time.Millisecond)
	}
}

const webhookOnly = `
notify:
  base_url: https://ol.example.com/
  retry: {max_attempts: 4, backoff: 10s, max_backoff: 1m}
  sinks:
    hook: {kind: webhook, url: "{url}/hook", secret_env: TEST_SECRET}
`

func TestAnEscalationIsDeliveredSignedAfterTheReceiverFailsTwice(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 2, 0)
	r := setup(t, clock, recv.srv.URL, webhookOnly)
	it := r.escalate(t, "nightly@1")
	if it.State != workitems.StateEscalated {
		t.Fatalf("item is %s", it.State)
	}
	// Queued in the transition's MULTI: pending before any dispatcher runs.
	if ds := r.awaitState(t, notify.StatePending, 1); ds[0].Sink != "hook" || ds[0].Event != workitems.NotifyEscalation {
		t.Fatalf("pending: %+v", ds)
	}
	start := r.clock.Now()
	d := r.dispatcher(t, "d1")
	d.Start()
	defer d.Shutdown()
	done := make(chan struct{})
	defer close(done)

	var reqs []request
	reqs = append(reqs, recv.next(t)) // attempt 1, at once: 500
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		// The dispatcher waits on the clock for the backoff (jitter pinned to its upper end).
		if !r.clock.BlockUntil(1, done) {
			t.Fatal("dispatcher never waited")
		}
		recv.none(t)
		r.clock.Advance(wait - time.Millisecond)
		r.clock.BlockUntil(1, done)
		recv.none(t) // not a millisecond early
		r.clock.Advance(time.Millisecond)
		reqs = append(reqs, recv.next(t))
	}
	ds := r.awaitState(t, notify.StateDelivered, 1)
	if ds[0].Attempts != 3 || ds[0].LastError != "" {
		t.Errorf("delivered record: %+v", ds[0])
	}
	wantAt := []time.Duration{0, 10 * time.Second, 30 * time.Second}
	for i, q := range reqs {
		if got := q.at.Sub(start); got != wantAt[i] {
			t.Errorf("attempt %d arrived at +%v, want +%v (exponential backoff)", i+1, got, wantAt[i])
		}
		if !notify.Verify([]byte(secret), q.body, q.header.Get(notify.HeaderSignature)) {
			t.Errorf("attempt %d: signature %q does not verify", i+1, q.header.Get(notify.HeaderSignature))
		}
		if q.header.Get(notify.HeaderEventID) != reqs[0].header.Get(notify.HeaderEventID) || q.header.Get(notify.HeaderEventID) == "" {
			t.Errorf("attempt %d: event id %q, first %q", i+1, q.header.Get(notify.HeaderEventID), reqs[0].header.Get(notify.HeaderEventID))
		}
		if q.header.Get(notify.HeaderAttempt) != fmt.Sprint(i+1) {
			t.Errorf("attempt %d: attempt header %q", i+1, q.header.Get(notify.HeaderAttempt))
		}
	}
	if notify.Verify([]byte("wrong"), reqs[0].body, reqs[0].header.Get(notify.HeaderSignature)) {
		t.Error("a signature verified under the wrong secret")
	}
	var n notify.Notification
	if err := json.Unmarshal(reqs[2].body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Event != workitems.NotifyEscalation || n.Item != it.ID || n.Template != "nightly" || n.Reason != "no_progress" ||
		n.URL != "https://ol.example.com/items/nightly@1" || n.Escalate != "#payments-oncall" ||
		!strings.Contains(n.Headline, "the same test failed twice") || n.ID != reqs[0].header.Get(notify.HeaderEventID) {
		t.Errorf("body: %+v", n)
	}
	r.obs.await(t, map[string]int{"hook/retry": 2, "hook/delivered": 1})
}

func TestASlackSinkGetsATextMessageLinkingTheItem(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 0, 0)
	r := setup(t, clock, recv.srv.URL, `
notify:
  base_url: https://ol.example.com
  sinks:
    chat: {kind: slack, url_env: TEST_SLACK_URL}
`)
	env := r.env
	r.env = func(k string) string {
		if k == "TEST_SLACK_URL" {
			return recv.srv.URL + "/services/T000/B000/XXXX"
		}
		return env(k)
	}
	r.escalate(t, "nightly@<2>")
	d := r.dispatcher(t, "d1")
	d.Start()
	defer d.Shutdown()
	q := recv.next(t)
	var msg map[string]any
	if err := json.Unmarshal(q.body, &msg); err != nil {
		t.Fatal(err)
	}
	text, _ := msg["text"].(string)
	if len(msg) != 1 || !strings.Contains(text, "*outerloop: escalation*") ||
		!strings.Contains(text, "<https://ol.example.com/items/nightly@<2>|nightly@&lt;2&gt;>") ||
		!strings.Contains(text, "the same test failed twice") || !strings.Contains(text, "to act: #payments-oncall") {
		t.Errorf("slack body: %s", q.body)
	}
	if q.path != "/services/T000/B000/XXXX" || q.header.Get(notify.HeaderSignature) != "" || q.header.Get("Content-Type") != "application/json" {
		t.Errorf("request: %s %v", q.path, q.header)
	}
	r.awaitState(t, notify.StateDelivered, 1)
}

func TestADispatcherStoppedMidDeliveryLosesNone(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 0, 1)
	r := setup(t, clock, recv.srv.URL, webhookOnly)
	r.escalate(t, "nightly@3")
	d1 := r.dispatcher(t, "d1")
	d1.Start()
	first := recv.next(t) // the receiver holds it: d1 is mid-delivery
	d1.Shutdown()         // cancels the request and releases the claim
	if ds := r.awaitState(t, notify.StatePending, 1); ds[0].Attempts != 0 {
		t.Errorf("a released delivery counts no attempt: %+v", ds[0])
	}
	d2 := r.dispatcher(t, "d2") // the restarted process
	d2.Start()
	defer d2.Shutdown()
	second := recv.next(t)
	if second.header.Get(notify.HeaderEventID) != first.header.Get(notify.HeaderEventID) {
		t.Errorf("redelivered a different event: %q vs %q", second.header.Get(notify.HeaderEventID), first.header.Get(notify.HeaderEventID))
	}
	r.awaitState(t, notify.StateDelivered, 1)
}

func TestAClaimOfADeadDispatcherIsTakenOverAfterTheVisibilityTimeout(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 0, 0)
	r := setup(t, clock, recv.srv.URL, webhookOnly)
	r.escalate(t, "nightly@4")
	ctx := context.Background()
	// A dispatcher claims it and dies before sending (kill -9): nothing but its claim is left.
	now := r.clock.Now()
	claimed, err := r.outbox.Claim(ctx, now, now.Add(30*time.Second), 8, "crashed#1", 4)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	d := r.dispatcher(t, "d2")
	d.Start()
	defer d.Shutdown()
	done := make(chan struct{})
	defer close(done)
	r.clock.BlockUntil(1, done) // waiting for the claim to expire
	recv.none(t)
	r.clock.Advance(30 * time.Second)
	q := recv.next(t)
	if q.at.Sub(now) != 30*time.Second || q.header.Get(notify.HeaderAttempt) != "2" {
		t.Errorf("taken over at +%v, attempt %s", q.at.Sub(now), q.header.Get(notify.HeaderAttempt))
	}
	ds := r.awaitState(t, notify.StateDelivered, 1)
	if ds[0].Attempts != 2 {
		t.Errorf("the lost claim counts as an attempt: %+v", ds[0])
	}
	// The crashed holder's late answer changes nothing.
	if st, err := r.outbox.Fail(ctx, claimed[0], r.clock.Now(), r.clock.Now(), "late", 4); err != nil || st != "" {
		t.Errorf("stale fail: %q %v", st, err)
	}
	if ds := r.awaitState(t, notify.StateDelivered, 1); ds[0].State != notify.StateDelivered {
		t.Errorf("after a stale fail: %+v", ds[0])
	}
}

func TestADeliveryFailingEveryAttemptIsADeadLetterUntilRequeued(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 2, 0)
	r := setup(t, clock, recv.srv.URL, strings.Replace(webhookOnly, "max_attempts: 4", "max_attempts: 2", 1))
	r.escalate(t, "nightly@5")
	d := r.dispatcher(t, "d1")
	d.Start()
	defer d.Shutdown()
	done := make(chan struct{})
	defer close(done)
	recv.next(t)
	r.clock.BlockUntil(1, done)
	r.clock.Advance(10 * time.Second)
	recv.next(t)
	ds := r.awaitState(t, notify.StateDead, 1)
	if ds[0].Attempts != 2 || !strings.Contains(ds[0].LastError, `sink "hook" answered 500`) ||
		!strings.Contains(ds[0].LastError, "receiver down for maintenance") || strings.Contains(ds[0].LastError, recv.srv.URL) {
		t.Errorf("dead letter: %+v", ds[0])
	}
	r.obs.await(t, map[string]int{"hook/dead": 1, "hook/retry": 1})
	r.clock.BlockUntil(1, done)
	recv.none(t) // nothing more is tried
	if err := r.outbox.Requeue(context.Background(), ds[0].ID); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Hour) // the dispatcher's poll
	recv.next(t)
	r.awaitState(t, notify.StateDelivered, 1)
	if err := r.outbox.Requeue(context.Background(), ds[0].ID); err == nil {
		t.Error("a delivered notification was re-queued")
	}
}

func TestFailuresAndDailyCapsAreNotifiedOnceEach(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 0, 0)
	r := setup(t, clock, recv.srv.URL, webhookOnly)
	ctx := context.Background()
	// Spend $2 of nightly's $1 cap through a real attempt, then ask for two more items.
	if err := r.store.Create(ctx, &workitems.Item{ID: "nightly@6", Template: "nightly", Goal: "g", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	r.run(t, "nightly@6", 2)
	for _, id := range []string{"nightly@7", "nightly@8"} {
		err := r.store.Create(ctx, &workitems.Item{ID: id, Template: "nightly", Goal: "g"}, itemstore.CreateLimits{DailyCostCap: 1})
		if err == nil {
			t.Fatal("created past the cap")
		}
	}
	// An item whose template is gone fails for good.
	if err := r.store.Create(ctx, &workitems.Item{ID: "nightly@9", Template: "nightly", Goal: "g"}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Fail(ctx, "nightly@9", nil, `template "nightly" is no longer configured`); err != nil {
		t.Fatal(err)
	}
	ds := r.awaitState(t, notify.StatePending, 2)
	if len(ds) != 2 {
		t.Fatalf("want one daily cap and one failure, got %+v", ds)
	}
	d := r.dispatcher(t, "d1")
	d.Start()
	defer d.Shutdown()
	got := map[workitems.NotifyEvent]notify.Notification{}
	for range 2 {
		var n notify.Notification
		if err := json.Unmarshal(recv.next(t).body, &n); err != nil {
			t.Fatal(err)
		}
		got[n.Event] = n
	}
	if n := got[workitems.NotifyDailyCap]; n.ID != "daily_cap:nightly:2026-03-01" || !strings.Contains(n.Headline, "daily cost cap of $1.00") {
		t.Errorf("daily cap: %+v", n)
	}
	if n := got[workitems.NotifyFailure]; n.Item != "nightly@9" || !strings.Contains(n.Headline, "is no longer configured") {
		t.Errorf("failure: %+v", n)
	}
}

func TestADispatcherRefusesToStartWithoutItsSecrets(t *testing.T) {
	t.Parallel()
	r := setup(t, fakeclock.New(time.Now()), "https://hooks.example.com", webhookOnly+`    chat: {kind: slack, url_env: TEST_SLACK_URL}
`)
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TEST_SLACK_URL": "https://hooks.slack.example/x"}, `sink "hook": secret_env TEST_SECRET is not set`},
		{map[string]string{"TEST_SECRET": "k"}, `sink "chat": url_env TEST_SLACK_URL is not set`},
		{map[string]string{"TEST_SECRET": "k", "TEST_SLACK_URL": "hooks.slack.example/x"}, `sink "chat": the URL in TEST_SLACK_URL`},
	} {
		_, err := notify.NewDispatcher(notify.DispatcherOptions{Outbox: r.outbox, Getenv: func(k string) string { return c.env[k] }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("env %v: error %v, want %q", c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hooks.slack.example") {
			t.Errorf("error repeats the secret URL: %v", err)
		}
	}
}

func TestBackoffDoublesUpToItsCapWithJitterInTheUpperHalf(t *testing.T) {
	t.Parallel()
	base, max := 5*time.Second, time.Minute
	for _, c := range []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 1, 5 * time.Second}, {1, 0, 2500 * time.Millisecond}, {2, 1, 10 * time.Second}, {3, 0.5, 15 * time.Second},
		{5, 1, time.Minute}, {60, 1, time.Minute}, {60, 0, 30 * time.Second},
	} {
		if got := notify.Backoff(c.attempt, base, max, c.r); got != c.want {
			t.Errorf("Backoff(%d, r=%v) = %v, want %v", c.attempt, c.r, got, c.want)
		}
	}
}

func TestTheListEndpointShowsDeliveriesAndRefusesABadState(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	r := setup(t, clock, "https://hooks.example.com", webhookOnly)
	r.escalate(t, "nightly@10")
	srv := httptest.NewServer(notify.ListHandler(r.outbox))
	defer srv.Close()
	get := func(q string) (int, []byte) {
		resp, err := http.Get(srv.URL + "/api/notifications" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := get("?state=pending")
	var out struct {
		Deliveries []notify.Delivery      `json:"deliveries"`
		Counts     map[notify.State]int64 `json:"counts"`
	}
	if err := json.Unmarshal(body, &out); err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	if len(out.Deliveries) != 1 || out.Deliveries[0].Item != "nightly@10" || out.Counts[notify.StatePending] != 1 || out.Counts[notify.StateDead] != 0 {
		t.Errorf("list: %s", body)
	}
	if strings.Contains(string(body), "hooks.example.com") {
		t.Errorf("the list shows a sink URL: %s", body)
	}
	if code, body := get("?state=lost"); code != http.StatusBadRequest || !strings.Contains(string(body), `state \"lost\"`) {
		t.Errorf("bad state: %d %s", code, body)
	}
	if code, _ := get("?limit=0"); code != http.StatusBadRequest {
		t.Errorf("bad limit: %d", code)
	}
}

func TestSeveralDispatchersShareTheOutboxAndSendEachNotificationOnce(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 0, 0)
	r := setup(t, clock, recv.srv.URL, webhookOnly)
	const items = 30
	for i := range items {
		r.escalate(t, fmt.Sprintf("nightly@m%d", i))
	}
	for i := range 3 {
		d := r.dispatcher(t, fmt.Sprintf("d%d", i))
		d.Start()
		defer d.Shutdown()
	}
	seen := map[string]int{}
	for range items {
		seen[recv.next(t).header.Get(notify.HeaderEventID)]++
	}
	r.awaitState(t, notify.StateDelivered, items)
	recv.none(t)
	if len(seen) != items {
		t.Errorf("%d distinct events of %d: %v", len(seen), items, seen)
	}
	r.obs.await(t, map[string]int{"hook/delivered": items, "hook/retry": 0})
}

// TestEveryDeliveryTransitionIsGuarded walks the outbox's state machine through its Lua
// scripts: each allowed edge moves the delivery, each forbidden one changes nothing.
func TestEveryDeliveryTransitionIsGuarded(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	r := setup(t, clock, "https://hooks.example.com", webhookOnly)
	ctx := context.Background()
	now := clock.Now()
	state := func(id string) (notify.State, int) {
		t.Helper()
		for _, s := range notify.AllStates() {
			ds, err := r.outbox.List(ctx, s, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.ID == id {
					if d.State != s {
						t.Fatalf("%s indexed %s but records %s", id, s, d.State)
					}
					return s, d.Attempts
				}
			}
		}
		return "", 0
	}
	claim := func(token string) notify.Delivery {
		t.Helper()
		ds, err := r.outbox.Claim(ctx, now, now.Add(time.Minute), 1, token, 3)
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim: %v %v", ds, err)
		}
		return ds[0]
	}
	n := notify.Notification{ID: "escalation:x:1", Event: workitems.NotifyEscalation, Template: "nightly", Item: "x"}
	if added, err := r.outbox.Enqueue(ctx, n, []string{"hook"}); err != nil || added != 1 {
		t.Fatalf("enqueue: %d %v", added, err)
	}
	const id = "escalation:x:1/hook"
	if added, _ := r.outbox.Enqueue(ctx, n, []string{"hook"}); added != 0 {
		t.Error("the same event was queued twice")
	}
	if st, _ := state(id); st != notify.StatePending {
		t.Fatalf("new delivery is %s", st)
	}
	if err := r.outbox.Requeue(ctx, id); err == nil {
		t.Error("requeue of a pending delivery")
	}
	// pending → inflight; nothing else is claimable now.
	d := claim("a#1")
	if ds, _ := r.outbox.Claim(ctx, now, now.Add(time.Minute), 8, "b#1", 3); len(ds) != 0 {
		t.Errorf("claimed twice: %v", ds)
	}
	// A stranger can neither fail nor release it.
	stranger := d
	if st, _ := r.outbox.Fail(ctx, notify.WithClaimForTest(stranger, "b#1"), now, now, "x", 3); st != "" {
		t.Errorf("a stranger failed it: %s", st)
	}
	// inflight → pending (release: no attempt counted).
	if err := r.outbox.Release(ctx, d, now); err != nil {
		t.Fatal(err)
	}
	if st, n := state(id); st != notify.StatePending || n != 0 {
		t.Errorf("after release: %s %d", st, n)
	}
	if err := r.outbox.Release(ctx, d, now); err != nil {
		t.Fatal(err)
	}
	if st, _ := state(id); st != notify.StatePending {
		t.Errorf("a second release moved it: %s", st)
	}
	// inflight → pending (fail, attempt 1), then its own stale claim cannot fail it again.
	d = claim("a#2")
	if st, _ := r.outbox.Fail(ctx, d, now, now, "boom", 3); st != notify.StatePending {
		t.Errorf("fail: %s", st)
	}
	if st, _ := r.outbox.Fail(ctx, d, now, now, "boom", 3); st != "" {
		t.Errorf("a pending delivery failed again: %s", st)
	}
	// inflight → dead on the last attempt; dead → pending by hand, attempts from zero.
	d = claim("a#3")
	if st, _ := r.outbox.Fail(ctx, d, now, now, "boom", 2); st != notify.StateDead {
		t.Errorf("last attempt: %s", st)
	}
	if ds, _ := r.outbox.Claim(ctx, now.Add(time.Hour), now.Add(2*time.Hour), 8, "b#2", 3); len(ds) != 0 {
		t.Errorf("a dead delivery was claimed: %v", ds)
	}
	if err := r.outbox.Requeue(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, n := state(id); st != notify.StatePending || n != 0 {
		t.Errorf("after requeue: %s %d", st, n)
	}
	// inflight → delivered; delivered is final.
	d = claim("a#4")
	if err := r.outbox.Ack(ctx, d, now); err != nil {
		t.Fatal(err)
	}
	if st, n := state(id); st != notify.StateDelivered || n != 1 {
		t.Errorf("after ack: %s %d", st, n)
	}
	if st, _ := r.outbox.Fail(ctx, d, now, now, "late", 3); st != "" {
		t.Errorf("a delivered delivery failed: %s", st)
	}
	if err := r.outbox.Requeue(ctx, id); err == nil {
		t.Error("requeue of a delivered delivery")
	}
	if err := r.outbox.Release(ctx, d, now); err != nil {
		t.Fatal(err)
	}
	if st, _ := state(id); st != notify.StateDelivered {
		t.Errorf("release moved a delivered delivery: %s", st)
	}
	if c, _ := r.outbox.Counts(ctx); c[notify.StateDelivered] != 1 || c[notify.StatePending]+c[notify.StateInflight]+c[notify.StateDead] != 0 {
		t.Errorf("counts %v", c)
	}
}
