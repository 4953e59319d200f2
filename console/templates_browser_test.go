package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"outerloop/api"
	"outerloop/console"
	"outerloop/workitems/itemstore"
)

// TestInABrowserAnOperatorPausesRunsAndResumesATemplate drives headless chromium through the
// template page: an operator logs in, pauses the schedule with a reason (the banner shows who
// and why), runs the template now (the item appears in its history, made by her), and resumes.
// Each step is checked in Redis as well as on the page.
func TestInABrowserAnOperatorPausesRunsAndResumesATemplate(t *testing.T) {
	ctx := browser(t)
	a := openApp(t, handlerConfig(t))
	bg := context.Background()
	const aliceTok = "alice-operator-token-0123456789"
	auth, err := api.NewAuthWith(api.AuthOptions{Clock: a.Store.Clock(),
		Credentials: []api.Credential{{Name: "alice", Role: api.RoleOperator, Token: aliceTok}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	con := console.New(console.Options{Queue: a.Queue, Auth: auth, Logger: testLogger()})
	con.Register(mux)
	srv := httptest.NewServer(api.Protect(mux, api.ProtectOptions{Auth: auth, Logger: testLogger()}))
	// The console first: it ends the item page's live stream, which srv.Close would wait on.
	t.Cleanup(func() { con.Close(); srv.Close() })

	run(t, ctx, "log in",
		chromedp.Navigate(srv.URL+"/login?next=/templates/fix"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceTok),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("controls")),
	)
	run(t, ctx, "pause with a reason",
		chromedp.SendKeys(chromedp.CSS(`#controls input[name="reason"]`), "upstream is down"),
		chromedp.Click(chromedp.CSS(`#controls button[value="pause"]`)),
		chromedp.WaitVisible(chromedp.ID("paused")),
	)
	banner := value(t, ctx, "read the banner", chromedp.Text(chromedp.ID("paused")))
	if !strings.Contains(banner, "by alice") || !strings.Contains(banner, "upstream is down") {
		t.Errorf("paused banner %q", banner)
	}
	if p, err := a.Queue.PauseOf(bg, "fix"); err != nil || p == nil || p.Actor != "alice" || p.Reason != "upstream is down" {
		t.Fatalf("pause in Redis: %+v %v", p, err)
	}

	run(t, ctx, "run now",
		chromedp.SendKeys(chromedp.CSS(`#controls input[name="input"]`), "try the fix"),
		chromedp.Click(chromedp.CSS(`#controls button[value="run"]`)),
		chromedp.WaitVisible(chromedp.ID("timeline")), // the new item's page, not the template's
	)
	items, err := a.Store.List(bg, itemstore.ListOptions{Template: "fix", Limit: 10})
	if err != nil || len(items) != 1 || items[0].Origin.Actor != "alice" || items[0].Attempts[0].Condition.Input != "try the fix" {
		t.Fatalf("run-now items %+v %v; the page says %q", items, err, value(t, ctx, "read the page", chromedp.Text(chromedp.CSS("main"))))
	}
	// Run now leads to the new item's page; its template's history lists it.
	if loc := value(t, ctx, "read the location", chromedp.Location()); !strings.HasSuffix(loc, "/items/"+items[0].ID) {
		t.Errorf("after run now the browser is at %s, want the new item's page", loc)
	}
	run(t, ctx, "open the template's history",
		chromedp.Navigate(srv.URL+"/templates/fix"),
		chromedp.WaitVisible(chromedp.CSS("#history tbody tr")),
	)
	row := value(t, ctx, "read the history", chromedp.Text(chromedp.CSS("#history tbody tr")))
	if !strings.Contains(row, items[0].ID) || !strings.Contains(row, "by alice") {
		t.Errorf("history row %q does not show %s by alice", row, items[0].ID)
	}

	run(t, ctx, "resume",
		chromedp.Navigate(srv.URL+"/templates/fix"),
		chromedp.WaitVisible(chromedp.CSS(`#controls button[value="resume"]`)),
		chromedp.Click(chromedp.CSS(`#controls button[value="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#controls button[value="pause"]`)),
	)
	if p, err := a.Queue.PauseOf(bg, "fix"); err != nil || p != nil {
		t.Fatalf("after resume: pause %+v %v", p, err)
	}
}
