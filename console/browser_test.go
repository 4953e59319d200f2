package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"outerloop/api"
	"outerloop/console"
	"outerloop/internal/sample"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// chromium returns the browser binary: $OUTERLOOP_CHROMIUM, /usr/bin/chromium or chromium on
// PATH. Without one the test is skipped, except in CI (CI set), where it fails:
// scripts/setup-chromium.sh installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("OUTERLOOP_CHROMIUM"), "/usr/bin/chromium"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (run scripts/setup-chromium.sh)")
	}
	t.Skip("chromium is not installed (run scripts/setup-chromium.sh)")
	return ""
}

// browser starts a headless chromium with a fresh profile and returns its context.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := chromium(t)
	profile, err := os.MkdirTemp("", "outerloop-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in containers
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
		// Chromium's helpers may still write for a moment after it exits; the profile is
		// scratch space in the system temp dir, so a failed removal is only logged.
		if err := os.RemoveAll(profile); err != nil {
			t.Logf("profile %s left behind: %v", profile, err)
		}
	})
	// The first run starts the browser, which lives as long as that run's context: this one,
	// not a step's deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs browser steps with a deadline, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// sampleRepo writes a Go module whose TestAdd fails until Add is fixed.
func sampleRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := sample.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixOnHint fixes the code only when a person's input says how: the verifier's own retry
// (whose input is the failure summary) fails the same way, so the item escalates.
const fixOnHint = `if echo "$OUTERLOOP_INPUT" | grep -q "flip the sign"; then ` + sample.FixCommand + `; echo "fixed: flipped the sign"; else echo "not sure what to change"; fi`

// awaitState follows the item's event stream until it reaches one of states.
func awaitState(t *testing.T, s *itemstore.Store, id string, states ...workitems.State) *workitems.Item {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	after := "0"
	for {
		it, err := s.Get(ctx, id)
		if err == nil {
			for _, st := range states {
				if it.State == st {
					return it
				}
			}
		}
		evs, err := s.Events(ctx, id, after, 100, time.Second)
		if ctx.Err() != nil {
			t.Fatalf("item %s did not reach %v within %s", id, states, time.Since(began).Round(time.Second))
		}
		if err == nil && len(evs) > 0 {
			after = evs[len(evs)-1].ID
		}
	}
}

func artifactDir(t *testing.T) string {
	if d := os.Getenv("OUTERLOOP_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestInABrowserAPersonRetriesAnEscalatedItemAndWatchesItClose runs the whole system in this
// process (store and queue on the shared Redis, a worker running a script template) and drives
// the console in headless chromium: log in, find the escalated item in the inbox, retry it with
// the hint the script needs, and watch the item page turn to closed through server-sent events.
func TestInABrowserAPersonRetriesAnEscalatedItemAndWatchesItClose(t *testing.T) {
	ctx := browser(t)
	repo := sampleRepo(t)
	cfg := testConfig(t, fmt.Sprintf(`
  - name: fix-calc
    schedule: "0 3 * * *"
    daily_cost_cap_usd: 3
    repo: %s
    goal: make TestAdd pass in the calc package
    loop:
      kind: script
      commands: [%q]
    done_check: {commands: ["go test -json ./..."]}
`, repo, fixOnHint))
	a := openApp(t, cfg)
	w := a.Worker(2, "browser-test")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })

	bg := context.Background()
	it, err := a.Queue.Submit(bg, scheduler.Request{Template: "fix-calc", Origin: workitems.Origin{Kind: "manual", Actor: "browser-test"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := awaitState(t, a.Store, it.ID, workitems.StateEscalated, workitems.StateClosed); got.State != workitems.StateEscalated {
		t.Fatalf("the item should escalate first, it is %s", got.State)
	}

	auth := api.NewAuth(testToken)
	mux := http.NewServeMux()
	api.New(api.Options{Queue: a.Queue, Auth: auth, Logger: testLogger()}).Register(mux)
	console.New(console.Options{Queue: a.Queue, Auth: auth, Logger: testLogger(), EventBlock: 2 * time.Second}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// Runs first: the browser's event stream is an active connection that Close would wait on
	// for ever when the test fails before the browser is stopped.
	t.Cleanup(srv.CloseClientConnections)

	// Any dialog (alert, confirm) would mean a script from the data ran.
	var dialogs atomic.Int32
	run(t, ctx, "open the login page", chromedp.Navigate(srv.URL+"/login"))
	dctx, stopDialogs := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for _, err := range chromedp.Events(dctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			dialogs.Add(1)
			_, _ = chromedp.Call(dctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	t.Cleanup(func() { stopDialogs(); <-watching })

	run(t, ctx, "log in",
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.SendKeys(chromedp.ID("name"), "alice"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`section.esc[data-item="`+it.ID+`"]`)),
	)
	inbox := value(t, ctx, "read the inbox", chromedp.Text(chromedp.CSS(`section.esc[data-item="`+it.ID+`"]`)))
	for _, want := range []string{"make TestAdd pass", "TestAdd", "Suggested"} {
		if !strings.Contains(inbox, want) {
			t.Errorf("the inbox entry lacks %q:\n%s", want, inbox)
		}
	}
	if who := value(t, ctx, "read the header", chromedp.Text(chromedp.CSS(".who"))); !strings.Contains(who, "alice") {
		t.Errorf("the header does not show the actor: %q", who)
	}
	dir := artifactDir(t)
	shot := func(name string, full bool) {
		t.Helper()
		a := chromedp.CaptureScreenshot()
		if full {
			a = chromedp.FullScreenshot(100) // 100: PNG
		}
		png := value(t, ctx, "screenshot "+name, a)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}
	shot("console-inbox.png", true)

	form := `section.esc[data-item="` + it.ID + `"] form.act`
	run(t, ctx, "retry with input from the inbox",
		chromedp.SendKeys(chromedp.CSS(form+` textarea[name="input"]`), "flip the sign in Add: it subtracts"),
		chromedp.Click(chromedp.CSS(form+` button[value="retry"]`)),
		chromedp.WaitVisible(chromedp.ID("live")),
	)
	if loc := value(t, ctx, "read the location", chromedp.Location()); !strings.HasSuffix(loc, "/items/"+it.ID) {
		t.Fatalf("after the retry the browser is at %s", loc)
	}
	flash := value(t, ctx, "read the flash", chromedp.Text(chromedp.ID("flash")))
	if !strings.Contains(flash, "retry queued by alice") {
		t.Errorf("flash: %q", flash)
	}
	// Mark this page: if it is still marked when the item shows closed, the change came
	// through the live stream, not a reload.
	run(t, ctx, "mark the page", chromedp.Evaluate[chromedp.Void](`window.olSamePage = true`))
	run(t, ctx, "watch the item close live", chromedp.WaitVisible(chromedp.CSS(`#live[data-state="closed"] #state [data-state="closed"]`)))
	if same := value(t, ctx, "check the page was not reloaded", chromedp.Evaluate[bool](`window.olSamePage === true`)); !same {
		t.Error("the item page was reloaded instead of updated live")
	}
	state := value(t, ctx, "read the state", chromedp.Text(chromedp.ID("state")))
	if strings.TrimSpace(state) != "closed" {
		t.Errorf("state shows %q", state)
	}
	timeline := value(t, ctx, "read the timeline", chromedp.Text(chromedp.ID("timeline")))
	for _, want := range []string{"resolved", "by alice", "closed"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q", want)
		}
	}
	shot("console-item.png", false)

	// The closed item's delivery: the commit's files and its unified diff, drawn with the
	// console's own stylesheet (the CSP allows no inline style).
	run(t, ctx, "show the delivery", chromedp.WaitVisible(chromedp.CSS(`#delivery pre.diff .dl-add`)))
	adds := value(t, ctx, "read the added lines", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#delivery pre.diff .dl-add")).map(e => e.textContent)`))
	dels := value(t, ctx, "read the deleted lines", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#delivery pre.diff .dl-del")).map(e => e.textContent)`))
	if fmt.Sprint(adds) != "[+func Add(a, b int) int { return a + b }]" || fmt.Sprint(dels) != "[-func Add(a, b int) int { return a - b }]" {
		t.Errorf("the diff shows added %q, deleted %q", adds, dels)
	}
	files := value(t, ctx, "read the changed files", chromedp.Text(chromedp.CSS(`#delivery table.files tbody`)))
	if !strings.Contains(files, "calc.go") || !strings.Contains(files, "+1") {
		t.Errorf("changed files: %q", files)
	}
	green := value(t, ctx, "read an added line's colour", chromedp.Evaluate[string](
		`getComputedStyle(document.querySelector("#delivery pre.diff .dl-add")).backgroundColor`))
	if green != "rgb(230, 246, 234)" {
		t.Errorf("added lines are drawn with background %q: the stylesheet did not apply", green)
	}
	raw := value(t, ctx, "read the raw link", chromedp.Evaluate[string](`document.querySelector("#delivery a.raw").href`))
	closedItem, err := a.Store.Get(bg, it.ID)
	if err != nil || closedItem.Delivery == nil {
		t.Fatalf("the closed item has no delivery: %v", err)
	}
	if !strings.HasSuffix(raw, fmt.Sprintf("/api/items/%s/diff?attempt=%d", it.ID, closedItem.Delivery.Attempt)) {
		t.Errorf("raw patch link %q", raw)
	}
	run(t, ctx, "scroll to the delivery", chromedp.ScrollIntoView(chromedp.CSS(`#delivery`)))
	shot("console-delivery.png", false)

	final, err := a.Store.Get(bg, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != workitems.StateClosed || len(final.Resolution) != 1 || final.Resolution[0].Actor != "alice" ||
		final.Current().Condition.Input != "flip the sign in Add: it subtracts" {
		t.Fatalf("the store disagrees with the page: %s, %+v", final.State, final.Resolution)
	}

	// An item whose goal is markup: it must render as text. Made only now, in the store without
	// a task: a queued item older than the worker's reconcile period (30 s) would be given one.
	const xssGoal = `<script>alert("pwned")</script><img src=x onerror="alert('img')"> fix it`
	xss := &workitems.Item{ID: "fix-calc@untrusted", Template: "fix-calc", Goal: xssGoal, Origin: workitems.Origin{Kind: "manual"},
		Budget: cfg.Templates[0].Budget, MaxAttempts: 2}
	if err := a.Store.Create(bg, xss, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open the item with markup in its goal",
		chromedp.Navigate(srv.URL+"/items/"+xss.ID),
		chromedp.WaitVisible(chromedp.CSS(".goal.big")),
	)
	goal := value(t, ctx, "read the goal", chromedp.Text(chromedp.CSS(".goal.big")))
	if strings.TrimSpace(goal) != xssGoal {
		t.Errorf("the goal should show as text: %q", goal)
	}
	injected := value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("main script, main img").length`))
	if injected != 0 {
		t.Errorf("%d elements were injected from the goal", injected)
	}
	// A delivery whose file names and patch text are markup: drawn as text, nothing runs.
	const hostile = `<img src=x onerror="alert('name')">.go`
	recordDelivery(t, a.Store, xss.ID, workitems.Delivery{Mode: workitems.DeliverPatch, Outcome: workitems.DeliveryPatched, Base: "b", Commit: "c",
		Files: []workitems.ChangedFile{{Path: hostile, Added: 1}}, FileCount: 1, Added: 1, PatchBytes: 100},
		"diff --git a/"+hostile+" b/"+hostile+"\n@@ -0,0 +1 @@\n+<script>alert('diff')</script><img src=y onerror=\"alert('diff')\">\n")
	run(t, ctx, "open the delivery with markup",
		chromedp.Navigate(srv.URL+"/items/"+xss.ID),
		chromedp.WaitVisible(chromedp.CSS(`#delivery pre.diff .dl-add`)),
	)
	line := value(t, ctx, "read the hostile line", chromedp.Text(chromedp.CSS(`#delivery pre.diff .dl-add`)))
	if line != `+<script>alert('diff')</script><img src=y onerror="alert('diff')">` {
		t.Errorf("the patch line should show as text: %q", line)
	}
	if name := value(t, ctx, "read the hostile file name", chromedp.Text(chromedp.CSS(`#delivery code.path`))); name != hostile {
		t.Errorf("the file name should show as text: %q", name)
	}
	injected = value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("main script, main img").length`))
	if injected != 0 {
		t.Errorf("%d elements were injected from the delivery", injected)
	}
	run(t, ctx, "open the list with the markup goal", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-item="`+xss.ID+`"]`)))
	if n := dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened: a script from the data ran", n)
	}
}
