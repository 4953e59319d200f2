package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

const reviewInput = "A reviewer requested changes on the pull request #7; address every point, keep the rest of the change, and do not reply to the reviewer:\n" +
	"\nReview by carol:\nPlease name it Sum, and <b>test</b> it.\n- calc.go:3: rename this\n- calc_test.go:9: add a negative case\n"

// park runs attempt n of an item to its exit and records the delivery's wait decision, as the
// verifier does after pushing (sha on pull request #pr).
func park(t *testing.T, s *itemstore.Store, id string, n int, kind workitems.WaitKind, sha string, pr int) *workitems.Item {
	t.Helper()
	ctx := context.Background()
	fence, err := s.AcquireLease(ctx, id, n, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Base: "b", Commit: sha, Tree: "t-" + sha,
		Branch: "outerloop/fix", PushedSHA: sha, PR: &workitems.PullRequest{Number: pr, URL: fmt.Sprintf("https://forge.example/o/r/pulls/%d", pr), State: workitems.PROpen}}
	rule := workitems.RuleCIPending
	if kind == workitems.WaitReview {
		rule = workitems.RuleReviewPending
	}
	d := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: rule, Summary: "waiting for " + string(kind), Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: kind, Deadline: s.Now().Add(72 * time.Hour), Forge: "tea", Repo: "o/r", LocalRule: "all_green", LocalSummary: "3 passed"}}
	it, err := s.RecordDelivery(ctx, fence, d, &workitems.Verdict{Passed: 3}, del, nil)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// backdate moves the start of an item's current wait into the past (waits begin at the
// store's now; the inbox lists only old ones).
func backdate(t *testing.T, s *itemstore.Store, id string, d time.Duration) {
	t.Helper()
	if _, err := s.Update(context.Background(), id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		it.Wait.Since = it.Wait.Since.Add(-d)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// reviewedAndWaitingAgain is an item that waited for CI on its first push (woken by a webhook),
// got a review that requested changes (round 1), pushed again and now waits for a review of
// the same pull request.
func reviewedAndWaitingAgain(t *testing.T, f *fixture, id string) *workitems.Item {
	t.Helper()
	s, ctx := f.app.Store, context.Background()
	f.item(t, id, "fix", "make TestAdd pass", nil)
	it := park(t, s, id, 1, workitems.WaitCI, "aaaa1111bbbb2222cccc", 7)
	retry := workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "changes_requested", Reasons: []string{"a reviewer requested changes: carol on #7"},
		Actor: "verifier", Next: &workitems.Condition{Input: reviewInput}}
	if _, err := s.Wake(ctx, id, it.Wait.Seq, workitems.WakeWebhook, retry, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkQueued(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	return park(t, s, id, 2, workitems.WaitReview, "dddd3333eeee4444ffff", 7)
}

func TestTheItemPageSaysWhatAWaitingItemWaitsForAndWhatWokeItsWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	it := reviewedAndWaitingAgain(t, f, "fix@waiting")
	if it.State != workitems.StateWaiting || it.Wait.Kind != workitems.WaitReview || it.Wait.Seq != 2 {
		t.Fatalf("setup: %s %+v", it.State, it.Wait)
	}
	res, body := f.get(t, "/items/fix@waiting")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	for _, want := range []string{
		`Waiting for a review of <a class="pr" href="https://forge.example/o/r/pulls/7" rel="noreferrer">#7</a>`,
		`class="next-poll">in `, `class="deadline">in 2d`, "(" + it.Wait.Since.UTC().Format("2006-01-02 15:04:05") + " UTC)",
		`<td class="woken-by"><span class="badge st-muted">webhook</span>`, "CI on aaaa1111bbbb of #7", // the past wait
		"<h2>Review rounds</h2>", "changes requested by carol", "Please name it Sum, and &lt;b&gt;test&lt;/b&gt; it.",
		"- calc.go:3: rename this",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the item page lacks %q", want)
		}
	}
	if strings.Contains(body, "The next attempt's whole input") {
		t.Error("a round whose input is only the review shows it twice")
	}

	t.Run("and the items list filters by waiting", func(t *testing.T) {
		f.item(t, "fix@queued", "fix", "other", nil)
		res, body := f.get(t, "/?state=waiting")
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "fix@waiting") || strings.Contains(body, "fix@queued") {
			t.Fatalf("%d: waiting filter\n%s", res.StatusCode, body)
		}
		if !strings.Contains(body, `<option value="waiting"`) {
			t.Error("the state filter does not offer waiting")
		}
	})
}

func TestAWaitForCIOnABranchNamesTheCommitAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.item(t, "fix@ci", "fix", "g", nil)
	it := park(t, f.app.Store, "fix@ci", 1, workitems.WaitCI, "0123456789abcdef", 3)
	_, body := f.get(t, "/items/fix@ci")
	if !strings.Contains(body, `Waiting for CI on <code title="0123456789abcdef">0123456789ab</code> of <a class="pr" href="https://forge.example/o/r/pulls/3"`) {
		t.Errorf("CI wait headline missing:\n%s", body)
	}
	if !strings.Contains(body, `<span class="badge st-wait">waiting</span>`) || it.Wait.Seq != 1 {
		t.Error("the current wait is not listed as still waiting")
	}
}

func TestTheInboxListsPullRequestsWaitingLongForAReviewOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	s := f.app.Store
	for _, c := range []struct {
		id   string
		kind workitems.WaitKind
		age  time.Duration
	}{
		{"fix@old-review", workitems.WaitReview, 30 * time.Hour},
		{"fix@new-review", workitems.WaitReview, time.Hour},
		{"fix@old-ci", workitems.WaitCI, 50 * time.Hour},
	} {
		f.item(t, c.id, "fix", "g", nil)
		park(t, s, c.id, 1, c.kind, "5ha-"+c.id, 11)
		backdate(t, s, c.id, c.age)
	}
	res, body := f.get(t, "/escalations")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	sec := body[strings.Index(body, `id="waiting-people"`):]
	for _, want := range []string{"Pull requests waiting for a person", "longer than 24h00m", `data-item="fix@old-review"`,
		`href="https://forge.example/o/r/pulls/11" rel="noreferrer">#11</a>`, `<td class="age" title="since`, ">30h00m<", ">fix</a>", "items 1–3 of 3"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the waiting section lacks %q:\n%s", want, sec)
		}
	}
	for _, not := range []string{"fix@new-review", "fix@old-ci"} {
		if strings.Contains(sec, not) {
			t.Errorf("the waiting section lists %s", not)
		}
	}
	if res, _ := f.get(t, "/escalations?waiting=0"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("waiting=0: %d", res.StatusCode)
	}
}

// One page of the waiting section reads one page of waiting items: the pager walks them.
func TestTheInboxPagesThroughTheWaitingItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	s := f.app.Store
	const n = 52 // more than one page of 50
	for i := range n {
		id := fmt.Sprintf("fix@w%02d", i)
		f.item(t, id, "fix", "g", nil)
		park(t, s, id, 1, workitems.WaitReview, "5ha-"+id, 100+i)
		backdate(t, s, id, 48*time.Hour)
	}
	_, body := f.get(t, "/escalations")
	if c := strings.Count(body, `<tr data-item="fix@w`); c != 50 {
		t.Fatalf("first page: %d rows, want 50", c)
	}
	if !strings.Contains(body, `href="/escalations?waiting=2" rel="next"`) {
		t.Fatal("no link to the next page of waiting items")
	}
	_, body = f.get(t, "/escalations?waiting=2")
	if c := strings.Count(body, `<tr data-item="fix@w`); c != 2 || !strings.Contains(body, "items 51–52 of 52") || !strings.Contains(body, `rel="prev"`) {
		t.Fatalf("second page: %d rows\n%s", c, body[strings.Index(body, `id="waiting-people"`):])
	}
}

// TestInABrowserAWaitingItemAndTheInboxShowTheWait opens, in headless chromium, the page of an
// item waiting for a review after one review round, and the inbox listing its pull request.
func TestInABrowserAWaitingItemAndTheInboxShowTheWait(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, testToken)
	reviewedAndWaitingAgain(t, f, "fix@browser")
	backdate(t, f.app.Store, "fix@browser", 26*time.Hour)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(func() { f.console.Close(); srv.Close() })

	run(t, ctx, "open the waiting item", chromedp.Navigate(srv.URL+"/items/fix@browser"), chromedp.WaitVisible(chromedp.ID("wait")))
	card := value(t, ctx, "read the wait", chromedp.Text(chromedp.ID("wait")))
	for _, want := range []string{"Waiting for a review of #7", "Since", "26h00m ago", "Until", "Next poll", "Why", "waiting for review", "Pushed after", "all_green — 3 passed"} {
		if !strings.Contains(card, want) {
			t.Errorf("the wait card lacks %q:\n%s", want, card)
		}
	}
	href := value(t, ctx, "read the pull request link", chromedp.Evaluate[string](`document.querySelector("#wait a.pr").href`))
	if href != "https://forge.example/o/r/pulls/7" {
		t.Errorf("pull request link %q", href)
	}
	woken := value(t, ctx, "read what woke the waits", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#waits td.woken-by")).map(e => e.textContent.trim())`))
	if fmt.Sprint(woken) != "[webhook waiting]" {
		t.Errorf("woken by %v, want the CI wait by webhook and the review wait still waiting", woken)
	}
	review := value(t, ctx, "read the review round", chromedp.Text(chromedp.CSS("#review-round-1 pre.review")))
	if !strings.Contains(review, "Review by carol:\nPlease name it Sum, and <b>test</b> it.\n- calc.go:3: rename this") {
		t.Errorf("the review round should show the review as text, lines kept:\n%q", review)
	}
	if n := value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("#review-rounds b:not(.card-head b)").length`)); n != 0 {
		t.Errorf("%d elements were injected from the review", n)
	}

	screenshot(t, ctx, "console-waiting-item.png")

	run(t, ctx, "open the inbox", chromedp.Navigate(srv.URL+"/escalations"), chromedp.WaitVisible(chromedp.ID("waiting-people")))
	row := value(t, ctx, "read the waiting row", chromedp.Text(chromedp.CSS(`#waiting-people tr[data-item="fix@browser"]`)))
	for _, want := range []string{"fix@browser", "#7", "26h00m", "fix"} {
		if !strings.Contains(row, want) {
			t.Errorf("the inbox row lacks %q: %q", want, row)
		}
	}
	screenshot(t, ctx, "console-inbox-waiting.png")
	run(t, ctx, "follow the item link", chromedp.Click(chromedp.CSS(`#waiting-people tr[data-item="fix@browser"] a.id`)), chromedp.WaitVisible(chromedp.ID("wait")))
}

// screenshot saves a full-page PNG in the artifacts directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}
