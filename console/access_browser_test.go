package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynqmon"

	"outerloop/api"
	"outerloop/console"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// TestInABrowserAsynqmonIsBehindTheLogin drives headless chromium against the console with a
// read login and asynqmon mounted: the console sends a stranger to the login page, an operator
// logs in with a personal token, pauses the queue from asynqmon's own origin, and a page of
// another origin that posts the same pause with the operator's cookie changes nothing. The
// audit list shows the login, the pause and the refusal.
func TestInABrowserAsynqmonIsBehindTheLogin(t *testing.T) {
	ctx := browser(t)
	a := openApp(t, handlerConfig(t))
	bg := context.Background()
	if _, err := a.Queue.Submit(bg, scheduler.Request{Template: "docs", Origin: workitems.Origin{Kind: "manual", Actor: "test"}}); err != nil {
		t.Fatal(err) // the queue exists in asynq once it holds a task
	}
	const aliceTok = "alice-operator-token-0123456789"
	auth, err := api.NewAuthWith(api.AuthOptions{ReadLogin: true, Clock: a.Store.Clock(),
		Credentials: []api.Credential{{Name: "alice", Role: api.RoleOperator, Token: aliceTok}}})
	if err != nil {
		t.Fatal(err)
	}
	audit := api.NewAuditLog(a.Store.Redis(), a.Store.Prefix(), 0, a.Store.Clock())
	mux := http.NewServeMux()
	api.New(api.Options{Queue: a.Queue, Auth: auth, Audit: audit, Logger: testLogger()}).Register(mux)
	con := console.New(console.Options{Queue: a.Queue, Auth: auth, Audit: audit, Logger: testLogger()})
	con.Register(mux)
	mon := asynqmon.New(asynqmon.Options{RootPath: api.QueuesPath, RedisConnOpt: a.AsynqOpt})
	mux.Handle(api.QueuesPath+"/", mon)
	srv := httptest.NewServer(api.Protect(mux, api.ProtectOptions{Auth: auth, Audit: audit, Logger: testLogger()}))
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("<!doctype html><title>elsewhere</title><p>another site</p>"))
	}))
	t.Cleanup(func() { srv.Close(); evil.Close(); con.Close(); _ = mon.Close() })
	q := a.QueueName()
	paused := func() bool {
		t.Helper()
		qi, err := a.Inspector().GetQueueInfo(q)
		if err != nil {
			t.Fatal(err)
		}
		return qi.Paused
	}

	run(t, ctx, "open the console", chromedp.Navigate(srv.URL+"/queues/"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc := value(t, ctx, "read the location", chromedp.Location()); !strings.Contains(loc, "/login?next=%2Fqueues%2F") {
		t.Fatalf("a stranger is at %s, not the login page", loc)
	}
	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), aliceTok),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitReady(chromedp.CSS("#root")), // asynqmon's page
	)
	pause := fmt.Sprintf(`fetch(%q, {method: "POST"}).then(r => r.status)`, "/queues/api/queues/"+q+":pause")
	if st := value(t, ctx, "pause from asynqmon's page", chromedp.Evaluate[int](pause, chromedp.EvalAwaitPromise)); st != http.StatusNoContent || !paused() {
		t.Fatalf("a same-origin pause with the session: %d, paused %v", st, paused())
	}
	if err := a.Inspector().UnpauseQueue(q); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open another site", chromedp.Navigate(evil.URL+"/"), chromedp.WaitVisible(chromedp.CSS("p")))
	cross := fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", credentials: "include"}).then(() => 1, () => 0)`,
		srv.URL+"/queues/api/queues/"+q+":pause")
	_ = value(t, ctx, "post a pause from another origin", chromedp.Evaluate[int](cross, chromedp.EvalAwaitPromise))
	if paused() {
		t.Fatal("a page of another origin paused the queue with the operator's cookie")
	}
	entries, _, err := audit.List(bg, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Actor+" "+e.Action+" "+string(e.Result))
	}
	// The browser sends alice's SameSite=Strict cookie with the other origin's post (127.0.0.1
	// on another port is the same site), so SameSite alone would not have stopped it: the
	// origin check refused it, and the refusal is recorded as hers.
	s := strings.Join(got, ", ")
	if s != "alice queues:pause refused, alice queues:pause ok, alice login ok" {
		t.Fatalf("audit: %s", s)
	}
	t.Logf("audit: %s", s)
}
