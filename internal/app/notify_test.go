package app_test

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

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/notify"
	"outerloop/scheduler"
	"outerloop/workitems"
)

type hookRequest struct {
	header http.Header
	body   []byte
}

// TestAnItemEscalatedByTheVerifierReachesTheWebhook runs the real worker and verifier on an
// item that never passes its done check: once it is escalated, the dispatcher delivers a signed
// escalation to a real HTTP receiver, and the metric counts it.
func TestAnItemEscalatedByTheVerifierReachesTheWebhook(t *testing.T) {
	t.Parallel()
	got := make(chan hookRequest, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- hookRequest{header: r.Header.Clone(), body: b}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	cfg := testConfig(t, sampleRepo(t), fmt.Sprintf(`
notify:
  base_url: http://console.test
  sinks:
    hook: {kind: webhook, url: %q, secret_env: OL_TEST_NOTIFY_SECRET}
`, recv.URL+"/outerloop"))
	env := redistest.New(t)
	getenv := func(k string) string {
		if k == "OL_TEST_NOTIFY_SECRET" {
			return "e2e-secret"
		}
		return ""
	}
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := &sys{App: a, env: env}
	s.startWorker(t, "w1")
	d, err := a.Dispatcher("w1")
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	defer d.Shutdown()

	it, err := a.Queue.Submit(context.Background(), scheduler.Request{Template: "never-fixed", Origin: workitems.Origin{Kind: "manual", Actor: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, a.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
	if it.State != workitems.StateEscalated {
		t.Fatalf("item %s", it.State)
	}
	var req hookRequest
	select {
	case req = <-got:
	case <-testwait.After(t):
		t.Fatal("no webhook call for the escalation")
	}
	if !notify.Verify([]byte("e2e-secret"), req.body, req.header.Get(notify.HeaderSignature)) {
		t.Errorf("signature %q does not verify", req.header.Get(notify.HeaderSignature))
	}
	var n notify.Notification
	if err := json.Unmarshal(req.body, &n); err != nil {
		t.Fatal(err)
	}
	if n.Event != workitems.NotifyEscalation || n.Item != it.ID || n.Template != "never-fixed" ||
		n.URL != "http://console.test/items/"+it.ID || n.Reason != it.Escalation.Reason || n.Attempt != 2 {
		t.Errorf("notification %+v for item escalated with %+v", n, it.Escalation)
	}
	deadline := testwait.Deadline(t)
	for {
		ds, err := a.Outbox.List(context.Background(), notify.StateDelivered, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 && ds[0].Item == it.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not recorded delivered: %+v", ds)
		}
		time.Sleep(10 * time.Millisecond) // the ack follows the receiver's answer; nothing to await across Redis
	}
	// The dispatcher counts a delivery after it recorded it in Redis: wait for the count too.
	var delivered float64
	for deadline := testwait.Deadline(t); ; {
		if delivered = deliveredCount(t, a); delivered == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // a Prometheus counter has nothing to await
	}
	if delivered != 1 {
		t.Errorf("outerloop_notifications_total{sink=hook,result=delivered} = %v", delivered)
	}
	select {
	case extra := <-got:
		t.Errorf("a second call: %s", extra.body)
	default:
	}
}

func TestTheAppsDispatcherRefusesToStartWithoutTheSinksSecret(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, sampleRepo(t), `
notify:
  sinks:
    hook: {kind: webhook, url: "https://hooks.example.com/x", secret_env: OL_TEST_UNSET_SECRET}
`)
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Dispatcher("w1"); err == nil || !strings.Contains(err.Error(), `sink "hook": secret_env OL_TEST_UNSET_SECRET is not set`) {
		t.Errorf("error %v", err)
	}
}

// deliveredCount reads outerloop_notifications_total{sink="hook",result="delivered"}.
func deliveredCount(t *testing.T, a *app.App) float64 {
	t.Helper()
	mfs, err := a.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var delivered float64
	for _, mf := range mfs {
		if mf.GetName() != "outerloop_notifications_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["sink"] == "hook" && labels["result"] == "delivered" {
				delivered = m.GetCounter().GetValue()
			}
		}
	}
	return delivered
}
