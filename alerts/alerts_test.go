package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/alerts"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const alertsYAML = `
defaults:
  budget: {wall_time: 10m}
alertmanager:
  receivers:
    outerloop: {token_env: AM_TOKEN}
    basic: {basic_auth: {username: am, password_env: AM_PASSWORD}}
templates:
  - name: payments-errors
    goal: "Find and fix the cause of {{ .alert.annotations.summary }} ({{ .alert.labels.nolabel }})"
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - alertmanager: {receiver: outerloop, match: {alertname: PaymentsErrorRate}, match_re: {severity: "page|critical"}}
      - alertmanager: {receiver: basic, match: {alertname: PaymentsErrorRate}}
  - name: capped
    max_per_hour: 1
    goal: look at the disk
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - alertmanager: {receiver: outerloop, match: {alertname: DiskFull}}
`

var secrets = map[string]string{"AM_TOKEN": "s3cret-token", "AM_PASSWORD": "pw"}

type firings struct {
	mu  sync.Mutex
	got []string
}

func (f *firings) TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, template+"/"+string(source)+"/"+string(result))
}

func (f *firings) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

type fixture struct {
	store *itemstore.Store
	cfg   *config.Config
	env   *redistest.Env
	obs   *firings
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(alertsYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	return &fixture{store: itemstore.NewStore(env.Client, env.Prefix), cfg: cfg, env: env, obs: &firings{}}
}

// replica returns one serve replica's handler (its own queue and asynq client).
func (f *fixture) replica(t *testing.T) http.Handler {
	t.Helper()
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	q := scheduler.NewQueue(f.store, c, nil, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue})
	tr := alerts.NewTriggers(q, q.Config, nil).WithObserver(f.obs)
	return alerts.Handler(alerts.Options{Config: q.Config, Notifier: tr, Observer: f.obs,
		Getenv: func(k string) string { return secrets[k] }})
}

func (f *fixture) items(t *testing.T) []*workitems.Item {
	t.Helper()
	its, err := f.store.List(context.Background(), itemstore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

var started = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

func alert(name, severity, fp string) map[string]any {
	return map[string]any{"status": "firing",
		"labels":      map[string]string{"alertname": name, "severity": severity, "service": "payments"},
		"annotations": map[string]string{"summary": "payments 5xx above 2%", "description": "the error rate is 3.1%", "runbook_url": "https://runbooks.example.com/payments"},
		"startsAt":    started, "endsAt": time.Time{}, "generatorURL": "http://prometheus.example.com/graph?g0.expr=x", "fingerprint": fp}
}

func notification(status, group string, alerts ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"version": "4", "groupKey": group, "status": status, "receiver": "outerloop",
		"groupLabels": map[string]string{"alertname": "PaymentsErrorRate"}, "commonLabels": map[string]string{},
		"commonAnnotations": map[string]string{}, "externalURL": "http://am.example.com", "alerts": alerts, "truncatedAlerts": 0})
	return b
}

type req struct {
	path   string
	body   []byte
	bearer string
	user   string
	pass   string
}

func post(t *testing.T, h http.Handler, r req) (int, string) {
	t.Helper()
	if r.path == "" {
		r.path = "/hooks/alertmanager/outerloop"
	}
	hr := httptest.NewRequest(http.MethodPost, r.path, bytes.NewReader(r.body))
	if r.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	if r.user != "" {
		hr.SetBasicAuth(r.user, r.pass)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w.Code, w.Body.String()
}

func TestRefusedNotificationsStoreNothing(t *testing.T) {
	f := newFixture(t)
	h := f.replica(t)
	good := notification("firing", "{}:{alertname=\"PaymentsErrorRate\"}", alert("PaymentsErrorRate", "page", "fp1"))
	cases := []struct {
		name string
		r    req
		code int
		says string
	}{
		{"unknown receiver", req{path: "/hooks/alertmanager/nope", body: good, bearer: "s3cret-token"}, 404, "not a receiver"},
		{"bearer missing", req{body: good}, 401, "missing bearer token"},
		{"bearer wrong", req{body: good, bearer: "guess"}, 401, "wrong bearer token"},
		{"basic on a bearer receiver", req{body: good, user: "am", pass: "pw"}, 401, "missing bearer token"},
		{"basic missing", req{path: "/hooks/alertmanager/basic", body: good}, 401, "missing basic auth"},
		{"basic wrong password", req{path: "/hooks/alertmanager/basic", body: good, user: "am", pass: "no"}, 401, "wrong basic auth"},
		{"basic wrong user", req{path: "/hooks/alertmanager/basic", body: good, user: "bob", pass: "pw"}, 401, "wrong basic auth"},
		{"oversized", req{body: bytes.Repeat([]byte(" "), alerts.MaxBody+1), bearer: "s3cret-token"}, 413, "larger than"},
		{"malformed", req{body: []byte(`{"version": "4", `), bearer: "s3cret-token"}, 400, "not an Alertmanager notification"},
		{"wrong version", req{body: bytes.Replace(good, []byte(`"version":"4"`), []byte(`"version":"3"`), 1), bearer: "s3cret-token"}, 400, `version \"3\"`},
		{"bad status", req{body: bytes.Replace(good, []byte(`"status":"firing","truncatedAlerts"`), []byte(`"status":"odd","truncatedAlerts"`), 1), bearer: "s3cret-token"}, 400, `status \"odd\"`},
	}
	for _, c := range cases {
		code, body := post(t, h, c.r)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s: got %d %s, want %d saying %q", c.name, code, body, c.code, c.says)
		}
	}
	if its := f.items(t); len(its) != 0 {
		t.Errorf("refused notifications stored %d items", len(its))
	}
	want := slices.Repeat([]string{"/alertmanager/refused"}, len(cases))
	if got := f.obs.list(); !slices.Equal(got, want) {
		t.Errorf("firings counted %v, want %v", got, want)
	}
	// The right credentials pass, bearer and basic.
	if code, body := post(t, h, req{body: good, bearer: "s3cret-token"}); code != 200 {
		t.Errorf("bearer: %d %s", code, body)
	}
	if code, body := post(t, h, req{path: "/hooks/alertmanager/basic", body: good, user: "am", pass: "pw"}); code != 200 {
		t.Errorf("basic: %d %s", code, body)
	}
}

func TestOneGroupOneItemWithTheAlertInItsInput(t *testing.T) {
	f := newFixture(t)
	h := f.replica(t)
	body := notification("firing", "g1", alert("PaymentsErrorRate", "page", "fp1"), alert("Unrelated", "page", "fp2"))
	if code, out := post(t, h, req{body: body, bearer: "s3cret-token"}); code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	its := f.items(t)
	if len(its) != 1 {
		t.Fatalf("%d items, want 1", len(its))
	}
	it := its[0]
	if it.Template != "payments-errors" || it.Origin.Kind != workitems.OriginAlert || !strings.HasPrefix(it.ID, "payments-errors@alert-") {
		t.Fatalf("item %s of %s, origin %+v", it.ID, it.Template, it.Origin)
	}
	if it.Goal != "Find and fix the cause of payments 5xx above 2% ()" {
		t.Errorf("goal %q", it.Goal)
	}
	in := it.Attempts[0].Condition.Input
	for _, want := range []string{"alertname=PaymentsErrorRate", "severity=page", "service=payments", "summary: payments 5xx above 2%",
		"description: the error rate is 3.1%", "runbook_url: https://runbooks.example.com/payments", "Started: 2026-12-07T10:00:00Z",
		"Source: http://prometheus.example.com/graph?g0.expr=x"} {
		if !strings.Contains(in, want) {
			t.Errorf("input lacks %q:\n%s", want, in)
		}
	}
	if strings.Contains(in, "Unrelated") {
		t.Errorf("input holds an alert that does not match:\n%s", in)
	}
	al := it.Origin.Alert
	if al == nil || al.Receiver != "outerloop" || al.GroupKey != "g1" || len(al.Alerts) != 1 || al.Alerts[0].Name() != "PaymentsErrorRate" {
		t.Errorf("origin alert %+v", al)
	}
}

func TestRepeatsAndReplicasMakeOneItem(t *testing.T) {
	f := newFixture(t)
	a, b := f.replica(t), f.replica(t)
	body := notification("firing", "g1", alert("PaymentsErrorRate", "critical", "fp1"))
	var wg sync.WaitGroup
	for i := range 6 {
		h := a
		if i%2 == 1 {
			h = b
		}
		wg.Go(func() {
			if code, out := post(t, h, req{body: body, bearer: "s3cret-token"}); code != 200 {
				t.Errorf("%d %s", code, out)
			}
		})
	}
	wg.Wait()
	if its := f.items(t); len(its) != 1 {
		t.Fatalf("%d items, want 1", len(its))
	}
	got := f.obs.list()
	made := slices.Collect(func(yield func(string) bool) {
		for _, g := range got {
			if g == "payments-errors/alertmanager/made" && !yield(g) {
				return
			}
		}
	})
	if len(made) != 1 || len(got) != 6 {
		t.Errorf("firings %v: want one made and five deduplicated", got)
	}
	// The group with a new alert in it is a new item.
	body2 := notification("firing", "g1", alert("PaymentsErrorRate", "critical", "fp1"), alert("PaymentsErrorRate", "page", "fp3"))
	post(t, a, req{body: body2, bearer: "s3cret-token"})
	if its := f.items(t); len(its) != 2 {
		t.Fatalf("%d items after a new alert joined the group, want 2", len(its))
	}
}

func TestMatchersAreAnchored(t *testing.T) {
	f := newFixture(t)
	h := f.replica(t)
	for i, sev := range []string{"pager", "xpage", "warning", ""} {
		post(t, h, req{body: notification("firing", "g"+sev, alert("PaymentsErrorRate", sev, "fp"+sev)), bearer: "s3cret-token"})
		if its := f.items(t); len(its) != 0 {
			t.Fatalf("case %d: severity %q matched page|critical", i, sev)
		}
	}
	post(t, h, req{body: notification("firing", "g", alert("PaymentsErrorRateX", "page", "fp")), bearer: "s3cret-token"})
	if its := f.items(t); len(its) != 0 {
		t.Fatalf("alertname PaymentsErrorRateX matched PaymentsErrorRate")
	}
	post(t, h, req{body: notification("firing", "g", alert("PaymentsErrorRate", "critical", "fp")), bearer: "s3cret-token"})
	if its := f.items(t); len(its) != 1 {
		t.Fatalf("severity critical: %d items, want 1", len(its))
	}
}

func TestResolvedCancelsAQueuedItemAndNotesARunningOne(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	h := f.replica(t)
	post(t, h, req{body: notification("firing", "queued", alert("PaymentsErrorRate", "page", "fp1")), bearer: "s3cret-token"})
	post(t, h, req{body: notification("firing", "running", alert("PaymentsErrorRate", "page", "fp2")), bearer: "s3cret-token"})
	its := f.items(t)
	if len(its) != 2 {
		t.Fatalf("%d items, want 2", len(its))
	}
	byGroup := map[string]*workitems.Item{}
	for _, it := range its {
		byGroup[it.Origin.Alert.GroupKey] = it
	}
	run := byGroup["running"]
	fence, err := f.store.AcquireLease(ctx, run.ID, 1, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.store.StartAttempt(ctx, fence, "w1"); err != nil {
		t.Fatal(err)
	}
	ended := started.Add(10 * time.Minute)
	resolved := func(group, fp string) []byte {
		a := alert("PaymentsErrorRate", "page", fp)
		a["status"], a["endsAt"] = "resolved", ended
		return notification("resolved", group, a)
	}
	for _, g := range []struct{ group, fp string }{{"queued", "fp1"}, {"running", "fp2"}} {
		if code, out := post(t, h, req{body: resolved(g.group, g.fp), bearer: "s3cret-token"}); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
	}
	q, err := f.store.Get(ctx, byGroup["queued"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if q.State != workitems.StateCancelled || len(q.Resolution) != 1 ||
		q.Resolution[0].Input != "resolved before it started at 2026-12-07T10:10:00Z" || !q.Origin.Alert.ResolvedAt.Equal(ended) {
		t.Errorf("queued item: %s, resolutions %+v, resolved at %v", q.State, q.Resolution, q.Origin.Alert.ResolvedAt)
	}
	r, err := f.store.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != workitems.StateRunning || len(r.NextInput) != 1 || !strings.Contains(r.NextInput[0], "resolved at 2026-12-07T10:10:00Z") {
		t.Errorf("running item: %s, next input %q", r.State, r.NextInput)
	}
	evs, err := f.store.Events(ctx, run.ID, "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e workitems.Event) bool {
		return e.Type == workitems.EventAlertResolved && e.Data["effect"] == "noted" && e.Data["resolved_at"] == "2026-12-07T10:10:00Z"
	}) {
		t.Errorf("no alert_resolved event noted on the running item: %+v", evs)
	}
}

func TestMaxPerHourCapsAndCounts(t *testing.T) {
	f := newFixture(t)
	h := f.replica(t)
	for _, g := range []string{"d1", "d2", "d1"} {
		if code, out := post(t, h, req{body: notification("firing", g, alert("DiskFull", "page", "fp-"+g)), bearer: "s3cret-token"}); code != 200 {
			t.Fatalf("%d %s", code, out)
		}
	}
	if its := f.items(t); len(its) != 1 {
		t.Fatalf("%d items, want 1 (max_per_hour: 1)", len(its))
	}
	want := []string{"capped/alertmanager/made", "capped/alertmanager/capped", "capped/alertmanager/deduplicated"}
	if got := f.obs.list(); !slices.Equal(got, want) {
		t.Errorf("firings %v, want %v", got, want)
	}
}

// serve mounts the receiver beside the forges' POST /hooks/{forge}: the two must not clash.
func TestTheReceiverMountsBesideTheForgesWebhooks(t *testing.T) {
	f := newFixture(t)
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{forge}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	mux.Handle("POST /hooks/alertmanager/{name}", f.replica(t))
	if code, body := post(t, mux, req{body: notification("firing", "g", alert("PaymentsErrorRate", "page", "fp")), bearer: "s3cret-token"}); code != 200 {
		t.Errorf("the receiver answered %d %s", code, body)
	}
	if code, _ := post(t, mux, req{path: "/hooks/gitea"}); code != http.StatusTeapot {
		t.Errorf("a forge's webhook answered %d", code)
	}
}
