package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// deliver runs the fixture item id through attempt 1 and records a close with del and patch.
func (f *fixture) deliver(t *testing.T, id string, del workitems.Delivery, patch string) {
	t.Helper()
	f.item(t, id, "fix", "make TestAdd pass", nil)
	recordDelivery(t, f.app.Store, id, del, patch)
}

// recordDelivery runs a queued item's attempt 1 to a close with del and patch, as a worker would.
func recordDelivery(t *testing.T, s *itemstore.Store, id string, del workitems.Delivery, patch string) {
	t.Helper()
	ctx := context.Background()
	fence, err := s.AcquireLease(ctx, id, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordDelivery(ctx, fence, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Actor: "verifier"},
		&workitems.Verdict{Passed: 1}, &del, []byte(patch)); err != nil {
		t.Fatal(err)
	}
}

const hostileName = `<img src=x onerror=alert(1)>.go`

const hostilePatch = "diff --git a/" + hostileName + " b/" + hostileName + "\n" +
	"new file mode 100644\n" +
	"--- /dev/null\n" +
	"+++ b/" + hostileName + "\n" +
	"@@ -0,0 +1,3 @@\n" +
	"+<script>alert('patch')</script>\n" +
	"+--- not a header: an added line\n" +
	"+ordinary\n" +
	"diff --git a/calc.go b/calc.go\n" +
	"--- a/calc.go\n" +
	"+++ b/calc.go\n" +
	"@@ -1,2 +1,2 @@\n" +
	" package calc\n" +
	"--- a removed line that looks like a header\n" +
	"-func Add(a, b int) int { return a - b }\n" +
	"+func Add(a, b int) int { return a + b }\n" +
	"\\ No newline at end of file\n" +
	"# outerloop: patch truncated: 400 of 9000 bytes kept\n"

func TestTheItemPageShowsTheDeliveryFilesAndDiffEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.deliver(t, "fix@d", workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened,
		Base: "1111111111111111111111111111111111111111", Commit: "2222222222222222222222222222222222222222", Tree: "t",
		Files:     []workitems.ChangedFile{{Path: hostileName, Added: 3}, {Path: "calc.go", Added: 1, Deleted: 2}, {Path: "logo.png", Binary: true}},
		FileCount: 4, Added: 4, Deleted: 2, PatchBytes: 9000, PatchTruncated: true,
		Branch: "outerloop/fix", PushedSHA: "2222222222222222222222222222222222222222",
		PR: &workitems.PullRequest{Number: 12, URL: "https://forge.example/acme/calc/pulls/12", State: workitems.PROpen},
		Checks: []workitems.CheckResult{
			{Name: "test", State: workitems.CheckSuccess, URL: "https://ci.example/runs/1", Summary: "ok <b>bold</b>"},
			{Name: "evil", State: workitems.CheckFailure, URL: "javascript:alert(1)", Summary: "x"},
		},
		MergeCommit: "3333333333333333333333333333333333333333"}, hostilePatch)
	res, body := f.get(t, "/items/fix@d")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	// html/template writes "+" as "&#43;".
	for _, want := range []string{
		`<section id="delivery">`, `data-outcome="pr_opened"`, "mode <code>pull_request</code>", ">222222222222<", "4 files",
		`<a class="pr" href="https://forge.example/acme/calc/pulls/12" rel="noreferrer">#12</a>`, "<code>outerloop/fix</code>",
		"Merged as", ">333333333333<",
		`<a href="https://ci.example/runs/1" rel="noreferrer">test</a>`, "ok &lt;b&gt;bold&lt;/b&gt;",
		`<code class="path">&lt;img src=x onerror=alert(1)&gt;.go</code>`, "and 4 files in all",
		`<a class="raw" href="/api/items/fix@d/diff?attempt=1">raw</a>`, "stored truncated: 9000 bytes",
		`<span class="dl-file">diff --git a/&lt;img src=x onerror=alert(1)&gt;.go`,
		`<span class="dl-meta">new file mode 100644</span>`, `<span class="dl-meta">--- /dev/null</span>`,
		`<span class="dl-hunk">@@ -0,0 &#43;1,3 @@</span>`,
		`<span class="dl-add">&#43;&lt;script&gt;alert(&#39;patch&#39;)&lt;/script&gt;</span>`,
		`<span class="dl-add">&#43;--- not a header: an added line</span>`,
		`<span class="dl-ctx"> package calc</span>`,
		`<span class="dl-del">--- a removed line that looks like a header</span>`,
		`<span class="dl-add">&#43;func Add(a, b int) int { return a &#43; b }</span>`,
		`<span class="dl-meta">\ No newline at end of file</span>`,
		`<span class="dl-note"># outerloop: patch truncated`,
		`<p class="delivered">Delivery: <span class="badge st-good">pr_opened</span>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("item page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>alert", "<img src=x", `href="javascript:`, " style="} {
		if strings.Contains(body, bad) {
			t.Errorf("item page contains %q: unescaped data or inline style", bad)
		}
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP: %q", csp)
	}
}

func TestTheItemPageShowsUnchangedAndFailedDeliveries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.deliver(t, "fix@same", workitems.Delivery{Mode: workitems.DeliverPatch, Outcome: workitems.DeliveryUnchanged, Base: "b", Tree: "t",
		SameAs: &workitems.DeliveryRef{Item: "fix@first", Attempt: 2, Commit: "c"}}, "")
	_, body := f.get(t, "/items/fix@same")
	for _, want := range []string{`data-outcome="unchanged"`, `Same result as <a href="/items/fix@first">fix@first</a> (attempt 2)`} {
		if !strings.Contains(body, want) {
			t.Errorf("unchanged: page lacks %q", want)
		}
	}
	if strings.Contains(body, `<pre class="diff">`) {
		t.Error("an unchanged delivery has no diff to draw")
	}
	f.deliver(t, "fix@nopatch", workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryFailed, Base: "b", Commit: "c",
		Error: "delivery: template \"fix\": deliver.mode pull_request needs a forge: forge delivery not configured", ErrorClass: workitems.ClassInvalidInput}, "")
	_, body = f.get(t, "/items/fix@nopatch")
	for _, want := range []string{`data-outcome="failed"`, "Delivery failed (invalid_input): delivery: template &#34;fix&#34;", "No patch is stored"} {
		if !strings.Contains(body, want) {
			t.Errorf("failed: page lacks %q", want)
		}
	}
	// An item without any delivery has no delivery section.
	f.item(t, "fix@none", "fix", "x", nil)
	if _, body := f.get(t, "/items/fix@none"); strings.Contains(body, `id="delivery"`) {
		t.Error("a delivery section without a delivery")
	}
}

// A held delivery says who holds the branch and that nothing was pushed (not that delivery
// failed); a draft pull request says so; a person's name is escaped.
func TestTheItemPageShowsAHeldBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	f.deliver(t, "fix@held", workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryHeld, Base: "b", Commit: "c",
		Branch: "outerloop/fix", Error: "the change conflicts with their commits in calc.go",
		PR:   &workitems.PullRequest{Number: 3, URL: "https://forge.example/acme/calc/pulls/3", State: workitems.PROpen, Draft: true},
		Held: &workitems.BranchHold{User: "Pat <b>Person</b>", SHA: "0123456789abcdef0123456789abcdef01234567", Commits: 2}}, "")
	_, body := f.get(t, "/items/fix@held")
	for _, want := range []string{`data-outcome="held"`, "<dt>Held</dt>",
		"Pat &lt;b&gt;Person&lt;/b&gt; pushed 0123456789ab (2 commits outerloop did not push)",
		"Nothing pushed: the change conflicts with their commits in calc.go", `<span class="badge st-muted">draft</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("held: page lacks %q", want)
		}
	}
	if strings.Contains(body, "Delivery failed") || strings.Contains(body, "<b>Person") {
		t.Error("a held delivery is shown as failed, or the name unescaped")
	}
}
