package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"outerloop/api"
	"outerloop/workitems"
)

func TestTemplatePageShowsHistoryAndPauseReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, testToken)
	f.item(t, "fix@1", "fix", "make TestAdd pass", escalate(""))
	f.item(t, "fix@2", "fix", "make TestAdd pass", func(it *workitems.Item) error {
		it.Spend = workitems.Spend{CostUSD: 1.5}
		it.Delivery = &workitems.Delivery{PR: &workitems.PullRequest{Number: 7, URL: "https://forge.example/o/r/pulls/7", State: "open"}}
		return it.SetState(workitems.StateRunning)
	})
	f.item(t, "docs@1", "docs", "refresh the docs", nil)
	if _, err := f.app.Queue.Pause(ctx, "fix", "alice", "upstream <down>"); err != nil {
		t.Fatal(err)
	}
	res, body := f.get(t, "/templates/fix")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	for _, w := range []string{`id="paused"`, "by alice", "upstream &lt;down&gt;", "fix@1", "fix@2", "$1.50",
		`href="https://forge.example/o/r/pulls/7"`, "#7", "escalated (same_failure_twice)", "2 items"} {
		if !strings.Contains(body, w) {
			t.Errorf("template page lacks %q", w)
		}
	}
	if strings.Contains(body, "docs@1") {
		t.Error("the page shows another template's item")
	}
	if i1, i2 := strings.Index(body, "fix@2"), strings.Index(body, "fix@1"); i1 > i2 {
		t.Error("the history is not newest first")
	}
	if strings.Contains(body, api.CSRFField) || strings.Contains(body, "/rerun") {
		t.Error("a page without a login must not show control forms")
	}
	if _, body := f.get(t, "/templates"); !strings.Contains(body, `href="/templates/fix"`) || !strings.Contains(body, "badge paused") {
		t.Error("the templates list neither links the template page nor shows the pause")
	}
	if res, body := f.get(t, "/templates/nope"); res.StatusCode != http.StatusNotFound || !strings.Contains(body, "no template") {
		t.Errorf("unknown template: %d", res.StatusCode)
	}
	if res, _ := f.get(t, "/templates/fix?page=0"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("bad page: %d", res.StatusCode)
	}
}

func TestTemplateControlsFromTheConsoleRecordTheActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, testToken)
	session := f.login(t, "alice")
	post := func(path string, form url.Values) *http.Response {
		if form == nil {
			form = url.Values{}
		}
		form.Set(api.CSRFField, f.auth.CSRFToken())
		return f.do(t, request{method: http.MethodPost, path: path, form: form, cookies: session})
	}
	if res := post("/templates/fix/pause", url.Values{"reason": {"flaky"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", res.StatusCode, readBody(t, res))
	}
	if p, _ := f.app.Queue.PauseOf(ctx, "fix"); p == nil || p.Actor != "alice" || p.Reason != "flaky" {
		t.Fatalf("pause %+v", p)
	}
	_, body := f.get(t, "/templates/fix", session...)
	if !strings.Contains(body, `action="/templates/fix/resume"`) || !strings.Contains(body, `action="/templates/fix/run"`) {
		t.Fatal("a logged-in page lacks the resume and run forms")
	}
	if res := post("/templates/fix/pause", nil); res.StatusCode != http.StatusConflict {
		t.Fatalf("second pause: %d", res.StatusCode)
	}
	if res := post("/templates/docs/pause", nil); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("pause of a template without a schedule: %d", res.StatusCode)
	}
	if res := post("/templates/fix/resume", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d", res.StatusCode)
	}
	if p, _ := f.app.Queue.PauseOf(ctx, "fix"); p != nil {
		t.Fatalf("still paused: %+v", p)
	}
	res := post("/templates/docs/run", url.Values{"input": {"now please"}})
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/items/docs@") {
		t.Fatalf("run now: %d %q", res.StatusCode, loc)
	}
	id, _ := url.PathUnescape(strings.TrimPrefix(loc, "/items/"))
	it, err := f.app.Store.Get(ctx, id)
	if err != nil || it.Origin.Actor != "alice" || it.Attempts[0].Condition.Input != "now please" {
		t.Fatalf("run-now item %+v %v", it, err)
	}
	if res := post("/items/"+id+"/rerun", nil); res.StatusCode != http.StatusConflict ||
		!strings.Contains(readBody(t, res), "still open") {
		t.Fatalf("rerun of an open item: %d", res.StatusCode)
	}
	if _, err := f.app.Queue.Resolve(ctx, id, workitems.Resolution{Action: workitems.ResolveCancel, Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	_, body = f.get(t, "/templates/docs", session...)
	if !strings.Contains(body, `action="/items/`+id+`/rerun"`) {
		t.Fatal("an ended item's row lacks the re-run form")
	}
	res = post("/items/"+id+"/rerun", nil)
	loc = res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/items/docs@") || loc == "/items/"+id {
		t.Fatalf("rerun: %d %q", res.StatusCode, loc)
	}
	re, _ := url.PathUnescape(strings.TrimPrefix(loc, "/items/"))
	if it, err := f.app.Store.Get(ctx, re); err != nil || it.RerunOf != id || it.Origin.Actor != "alice" {
		t.Fatalf("rerun item %+v %v", it, err)
	}
	_, body = f.get(t, "/templates/docs", session...)
	for _, w := range []string{"rerun", "run_now", "alice", "of <a href=\"/items/" + id} {
		if !strings.Contains(body, w) {
			t.Errorf("template page after the controls lacks %q", w)
		}
	}
	if _, body := f.get(t, "/items/"+re, session...); !strings.Contains(body, "Re-run of") || !strings.Contains(body, `href="/items/`+id+`"`) {
		t.Error("the re-run's page does not link the original")
	}
	if _, body := f.get(t, "/items/"+id, session...); !strings.Contains(body, "Re-run as") || !strings.Contains(body, `id="rerun"`) {
		t.Error("the original's page neither links the re-run nor offers another")
	}
	if _, body := f.get(t, "/items/"+id); strings.Contains(body, `id="rerun"`) {
		t.Error("the re-run form shows without a login")
	}
	// Without a session nothing is changed.
	res = f.do(t, request{method: http.MethodPost, path: "/templates/fix/pause", form: url.Values{api.CSRFField: {f.auth.CSRFToken()}}})
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("pause without a login: %d", res.StatusCode)
	}
	if p, _ := f.app.Queue.PauseOf(ctx, "fix"); p != nil {
		t.Fatalf("a refused pause paused: %+v", p)
	}
}
