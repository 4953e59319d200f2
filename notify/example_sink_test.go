package notify_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/notify"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// ntfySink is a sink kind of this example's own, the way a process adds one: it POSTs a
// notification's headline and link as plain text to an ntfy-style topic URL, the event in the
// Title header. A kind is a notify.Sink (Check, Send), optionally a
// notify.SinkSettingsValidator; it is registered by kind in the Registry the dispatcher is
// given, and the config names it by that kind.
type ntfySink struct{ http *http.Client }

const ntfyKind workitems.NotifySinkKind = "ntfy"

// ValidateSink checks a ntfy sink's settings when the config is read: an address, no secret.
func (ntfySink) ValidateSink(s config.NotifySink) error {
	if s.SecretEnv != "" {
		return &config.ConfigError{Field: "secret_env", Err: errors.New("ntfy topics are not signed")}
	}
	return config.ValidateSinkAddress(s)
}

// Check is called for every ntfy sink when a dispatcher is made: its URL must be set.
func (ntfySink) Check(to notify.Target) error {
	_, err := to.URL()
	return err
}

// Send makes one attempt; an error is retried by the outbox. Errors name the sink, never the
// URL (it came from url_env: a secret).
func (n ntfySink) Send(ctx context.Context, to notify.Target, d notify.Delivery) error {
	u, err := to.URL()
	if err != nil {
		return err
	}
	body := d.Headline
	if d.URL != "" {
		body += "\n" + d.URL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify: sink %q: bad request", to.Name)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Title", "outerloop: "+string(d.Event))
	req.Header.Set(notify.HeaderEventID, d.ID) // the same on every retry: the receiver deduplicates by it
	resp, err := n.http.Do(req)
	if err != nil {
		return fmt.Errorf("notify: sink %q: %w", to.Name, notify.WithoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("notify: sink %q answered %s", to.Name, resp.Status)
	}
	return nil
}

// TestExampleANewSinkKindIsDrivenEndToEnd registers the ntfy kind next to the built-in ones and
// follows an escalation through the store's transition, the outbox in Redis and a dispatcher
// to the ntfy receiver — which fails the first attempt, so the delivery is retried after the
// configured backoff exactly as a webhook's would be.
func TestExampleANewSinkKindIsDrivenEndToEnd(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	recv := newReceiver(t, clock, 1, 0) // answers 500 once, then 204

	// The process's sinks: the built-in kinds plus ntfy. The config is validated with them
	// (config.Kinds), so `kind: ntfy` is accepted here and refused by plain ParseConfig.
	sinks := notify.BuiltinSinks(nil).Register(ntfyKind, ntfySink{http: &http.Client{Timeout: 10 * time.Second}})
	const notifyYAML = `
notify:
  base_url: https://ol.example.com
  retry: {max_attempts: 3, backoff: 10s, max_backoff: 1m}
  sinks:
    phone: {kind: ntfy, url_env: TEST_NTFY_URL}
`
	if _, err := config.ParseConfig([]byte(notifyYAML + "templates: []\n")); err == nil || !strings.Contains(err.Error(), `"ntfy" is not one of slack, webhook`) {
		t.Fatalf("the built-in kinds accepted ntfy: %v", err)
	}
	r := setupWith(t, clock, recv.srv.URL, notifyYAML, sinks)
	topic := recv.srv.URL + "/outerloop-alerts"
	r.env = func(k string) string {
		if k == "TEST_NTFY_URL" {
			return topic
		}
		return ""
	}

	// An event: the item escalates; its notification is queued in the transition's MULTI.
	r.escalate(t, "nightly@n1")
	start := r.clock.Now()
	d := r.dispatcher(t, "d1") // DispatcherOptions{Sinks: sinks, ...}
	d.Start()
	defer d.Shutdown()
	done := make(chan struct{})
	defer close(done)

	first := recv.next(t) // attempt 1: 500
	if !r.clock.BlockUntil(1, done) {
		t.Fatal("dispatcher never waited for the backoff")
	}
	pending := r.awaitState(t, notify.StatePending, 1)
	if p := pending[0]; p.Attempts != 1 || !strings.Contains(p.LastError, `sink "phone" answered 500`) || strings.Contains(p.LastError, topic) {
		t.Errorf("after the failed attempt: %+v", p)
	}
	r.clock.Advance(10*time.Second - time.Millisecond)
	r.clock.BlockUntil(1, done)
	recv.none(t) // not a millisecond before the backoff
	r.clock.Advance(time.Millisecond)
	second := recv.next(t) // attempt 2: delivered

	if got := second.at.Sub(start); got != 10*time.Second {
		t.Errorf("retried at +%v, want +10s (notify.retry.backoff)", got)
	}
	if second.path != "/outerloop-alerts" || second.header.Get("Title") != "outerloop: escalation" ||
		second.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("request: %s %v", second.path, second.header)
	}
	body := string(second.body)
	if !strings.Contains(body, "nightly@n1 (nightly) escalated after attempt 1: the same test failed twice") ||
		!strings.HasSuffix(body, "\nhttps://ol.example.com/items/nightly@n1") {
		t.Errorf("the ntfy body is not the rendered notification: %q", body)
	}
	if id := second.header.Get(notify.HeaderEventID); id == "" || id != first.header.Get(notify.HeaderEventID) {
		t.Errorf("event id %q on the retry, %q first", id, first.header.Get(notify.HeaderEventID))
	}
	if ds := r.awaitState(t, notify.StateDelivered, 1); ds[0].Attempts != 2 || ds[0].Sink != "phone" {
		t.Errorf("delivered: %+v", ds[0])
	}
	r.obs.await(t, map[string]int{"phone/retry": 1, "phone/delivered": 1})
}

func TestADispatcherRefusesASinkKindItHasNotRegistered(t *testing.T) {
	t.Parallel()
	sinks := notify.BuiltinSinks(nil).Register(ntfyKind, ntfySink{http: http.DefaultClient})
	r := setupWith(t, fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)), "https://ntfy.example", `
notify:
  sinks:
    phone: {kind: ntfy, url_env: TEST_NTFY_URL}
`, sinks)
	// This process knows only the built-in kinds.
	_, err := notify.NewDispatcher(notify.DispatcherOptions{Outbox: r.outbox, Getenv: func(string) string { return "https://ntfy.example/t" }})
	if err == nil || !strings.Contains(err.Error(), `sink "phone": kind "ntfy" is not registered in this process (one of slack, webhook)`) {
		t.Errorf("error %v", err)
	}
	// With ntfy registered its own Check runs: the URL variable must be set.
	_, err = notify.NewDispatcher(notify.DispatcherOptions{Outbox: r.outbox, Sinks: sinks, Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), `sink "phone": url_env TEST_NTFY_URL is not set`) {
		t.Errorf("error %v", err)
	}
	if errs := sinks.ValidateSink("phone", config.NotifySink{Kind: ntfyKind, URL: "https://ntfy.example/t", SecretEnv: "K"}); errs == nil ||
		!strings.Contains(errs.Error(), "notify.sinks.phone.secret_env: ntfy topics are not signed") {
		t.Errorf("the kind's own checks did not run: %v", errs)
	}
}
