package forge

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"outerloop/workitems"
)

// requestsTo is the fake's requests whose "METHOD path" starts with prefix.
func (f *fakeGitHub) requestsTo(prefix string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if strings.HasPrefix(r, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func TestGitHubPullRequestReadsOneByNumber(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	open := e.fake.newPull("Open", "body", "main", "outerloop/a", false)
	open["labels"] = []any{map[string]any{"name": "outerloop", "color": "ededed"}}
	e.fake.newPull("Declined", "", "main", "outerloop/b", false)
	merged := e.fake.newPull("Merged", "", "main", "outerloop/c", false)
	merged["head"].(map[string]any)["sha"] = strings.Repeat("d", 40)
	merged["state"], merged["merged"], merged["merged_at"], merged["closed_at"], merged["merge_commit_sha"] = "closed", true,
		e.fake.now.Format(time.RFC3339), e.fake.now.Format(time.RFC3339), strings.Repeat("e", 40)
	merged["merged_by"] = map[string]any{"login": "ana", "type": "User"}
	e.fake.closePull(2)

	// A secondary rate limit is waited out, as for every call.
	e.fake.faults = []string{"secondary"}
	pr, err := e.f.PullRequest(bg, ghRepo, 1)
	if err != nil || pr.State != workitems.PROpen || pr.Body != "body" || pr.MergeCommitSHA != "" || fmt.Sprint(pr.Labels) != "[outerloop]" {
		t.Fatalf("open: %+v, %v (an open PR's test merge commit is not a merge)", pr, err)
	}
	if len(e.clock.Waits()) != 1 {
		t.Fatalf("waits %v, want one for the rate limit", e.clock.Waits())
	}
	if pr.MergedBy != "" || pr.ClosedBy != "" || len(e.fake.requestsTo("GET /repos/acme/payments/issues/1")) != 0 {
		t.Fatalf("an open pull request was merged or closed by nobody: %+v (and its issue is not read)", pr)
	}
	// Who closed it comes from the issue (GitHub's pull request object does not say).
	if pr, err := e.f.PullRequest(bg, ghRepo, 2); err != nil || pr.State != workitems.PRClosed || pr.ClosedAt.IsZero() || pr.ClosedBy != fakeCloser || pr.MergedBy != "" {
		t.Fatalf("declined: %+v, %v", pr, err)
	}
	if pr, err := e.f.PullRequest(bg, ghRepo, 3); err != nil || pr.State != workitems.PRMerged || pr.MergeCommitSHA != strings.Repeat("e", 40) ||
		pr.HeadSHA != strings.Repeat("d", 40) || pr.MergedBy != "ana" || pr.ClosedBy != "" {
		t.Fatalf("merged: %+v, %v", pr, err)
	}
	if got := e.fake.requestsTo("GET /repos/acme/payments/issues/"); len(got) != 1 || got[0] != "GET /repos/acme/payments/issues/2" {
		t.Fatalf("issue reads %v, want only the closed one's", got)
	}
	_, err = e.f.PullRequest(bg, ghRepo, 9)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestGitHubReviewsMapEveryStateAndCarryTheirComments(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	head := strings.Repeat("a", 40)
	e.fake.reviews[1] = []map[string]any{
		ghReview(11, "alice", "CHANGES_REQUESTED", "Two problems.", head, t0),
		ghReview(12, "bob", "COMMENTED", "", head, t0.Add(time.Minute)),
		ghReview(13, "carol", "DISMISSED", "was wrong", head, t0.Add(2*time.Minute)),
		ghReview(14, "alice", "APPROVED", "Fine now.", head, t0.Add(3*time.Minute)),
		ghReview(15, "dave", "PENDING", "draft", "", time.Time{}),
	}
	e.fake.reviewComments[1] = []map[string]any{
		ghReviewComment(101, 11, "alice", "calc.go", 3, 3, "Name it Sum.", t0),
		ghReviewComment(102, 11, "alice", "calc.go", 0, 7, "Outdated: overflow?", t0),
		ghReviewComment(103, 12, "bob", "README.md", 1, 1, "typo", t0.Add(time.Minute)),
		ghReviewComment(104, 15, "dave", "calc.go", 2, 2, "pending", t0), // of the pending review
	}
	reviews, err := e.f.Reviews(bg, ghRepo, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reviews {
		got = append(got, fmt.Sprintf("%d %s %s %q %d", r.ID, r.User, r.State, r.Body, len(r.Comments)))
		if r.CommitSHA != head || r.SubmittedAt.IsZero() || !strings.Contains(r.URL, "#pullrequestreview-") {
			t.Errorf("review %+v lacks its commit, time or URL", r)
		}
	}
	want := []string{`11 alice changes_requested "Two problems." 2`, `12 bob commented "" 1`, `13 carol dismissed "was wrong" 0`,
		`14 alice approved "Fine now." 0`}
	if !slices.Equal(got, want) {
		t.Fatalf("reviews\n got %q\nwant %q (the pending one left out)", got, want)
	}
	wantComments := []ReviewComment{
		{ID: 101, User: "alice", Path: "calc.go", Line: 3, Body: "Name it Sum.", URL: "https://github.com/acme/payments/pull/1#discussion_r101"},
		{ID: 102, User: "alice", Path: "calc.go", Line: 7, Body: "Outdated: overflow?", URL: "https://github.com/acme/payments/pull/1#discussion_r102"},
	}
	if !slices.Equal(reviews[0].Comments, wantComments) {
		t.Fatalf("comments\n got %+v\nwant %+v", reviews[0].Comments, wantComments)
	}
	if c := e.fake.requestsTo("GET /repos/acme/payments/pulls/1/comments"); len(c) != 1 ||
		!strings.Contains(c[0], "sort=created") || !strings.Contains(c[0], "direction=desc") {
		t.Fatalf("comment requests %q: want one, newest first", c)
	}

	// No reviews: no comment listing.
	if reviews, err := e.f.Reviews(bg, ghRepo, 2); err != nil || len(reviews) != 0 {
		t.Fatalf("%+v, %v", reviews, err)
	}
	if c := e.fake.requestsTo("GET /repos/acme/payments/pulls/2/comments"); len(c) != 0 {
		t.Fatalf("comments listed for a pull request without reviews: %q", c)
	}
	_, err = e.f.Reviews(bg, "acme/elsewhere", 1)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestGitHubReviewsKeepTheNewestWithinTheBounds(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 450                     // five pages of 100
	long := strings.Repeat("€", 2000) // 6000 bytes; 4096 is not a character boundary
	var cid int64
	for i := int64(1); i <= n; i++ {
		at := t0.Add(time.Duration(i) * time.Minute)
		body := fmt.Sprintf("review %d", i)
		if i == n {
			body = long
		}
		e.fake.reviews[1] = append(e.fake.reviews[1], ghReview(i, "alice", "COMMENTED", body, "", at))
		for range 3 {
			cid++
			cbody := fmt.Sprintf("comment %d", cid)
			if cid == 3*n {
				cbody = long
			}
			e.fake.reviewComments[1] = append(e.fake.reviewComments[1], ghReviewComment(cid, i, "alice", "a.go", 1, 1, cbody, at))
		}
	}
	reviews, err := e.f.Reviews(bg, ghRepo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(reviews) != MaxReviews || reviews[0].ID != n-MaxReviews+1 || reviews[MaxReviews-1].ID != n {
		t.Fatalf("%d reviews from %d to %d, want the newest %d oldest first", len(reviews), reviews[0].ID, reviews[len(reviews)-1].ID, MaxReviews)
	}
	// Page 1 says where the last page is; the pages between are skipped.
	var pages []string
	for _, r := range e.fake.requestsTo("GET /repos/acme/payments/pulls/1/reviews") {
		u, err := url.Parse(strings.TrimPrefix(r, "GET "))
		if err != nil || u.Query().Get("per_page") != "100" {
			t.Fatalf("request %q not at 100 a page", r)
		}
		pages = append(pages, cmpOr(u.Query().Get("page"), "1"))
	}
	if fmt.Sprint(pages) != "[1 4 5]" {
		t.Fatalf("review pages read %v, want the first, then the last two", pages)
	}
	kept, from := 0, int64(0)
	for _, r := range reviews {
		kept += len(r.Comments)
		if len(r.Comments) > 0 && from == 0 {
			from = r.ID
		}
		if !slices.IsSortedFunc(r.Comments, func(a, b ReviewComment) int { return int(a.ID - b.ID) }) {
			t.Fatalf("review %d comments not oldest first", r.ID)
		}
	}
	// 200 comments at 3 a review: the newest 66 reviews whole, and 2 of the one before.
	if kept != MaxReviewComments || from != n-66 || len(reviews[MaxReviews-67].Comments) != 2 {
		t.Fatalf("%d comments kept, from review %d", kept, from)
	}
	if c := e.fake.requestsTo("GET /repos/acme/payments/pulls/1/comments"); len(c) != 2 {
		t.Fatalf("%d comment pages read, want the two holding the newest 200", len(c))
	}
	for _, body := range []string{reviews[MaxReviews-1].Body, reviews[MaxReviews-1].Comments[2].Body} {
		kept, marker, ok := strings.Cut(body, "\n\n[outerloop: clipped, ")
		if !ok || len(kept) > MaxReviewBody || !utf8.ValidString(kept) || marker != fmt.Sprintf("%d more bytes]", len(long)-len(kept)) ||
			!strings.HasPrefix(long, kept) {
			t.Fatalf("clipped body: %d bytes kept, marker %q", len(kept), marker)
		}
	}
}

func TestGitHubPermissionMapsEveryLevel(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	e.fake.perms = map[string]string{"acme": "admin", "maint": "maintain", "writer": "write", "triager": "triage",
		"reader": "read", "outsider": "none"}
	want := map[string]Permission{"acme": PermAdmin, "maint": PermWrite, "writer": PermWrite, "triager": PermRead,
		"reader": PermRead, "outsider": PermNone, "no-such-user": PermNone}
	for user, w := range want {
		got, err := e.f.Permission(bg, ghRepo, user)
		if err != nil || got != w {
			t.Errorf("%s: %s, %v; want %s", user, got, err, w)
		}
		if got.CanWrite() != (w == PermWrite || w == PermAdmin) {
			t.Errorf("%s: CanWrite %v", user, got.CanWrite())
		}
	}
	_, err := e.f.Permission(bg, "acme/elsewhere", "writer")
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	e.fake.faults = []string{"401"}
	_, err = e.f.Permission(bg, ghRepo, "writer")
	wantErr(t, err, workitems.ClassPermission, ErrAuth)
	_, err = e.f.Permission(bg, ghRepo, "a/../../x")
	wantErr(t, err, workitems.ClassInvalidInput, nil)
}

func TestGitHubSelfIsCachedPerToken(t *testing.T) {
	t.Parallel()
	var tok atomic.Value
	getenv := func(k string) string {
		if k == "GH_BOT_TOKEN" {
			return tok.Load().(string)
		}
		return ""
	}
	set := func(s string) { tok.Store(s) }
	set(ghToken)
	e := newGHEnv(t, getenv)
	e.fake.logins["ghp_rotated"] = "outerloop-bot-2"
	for range 3 {
		if me, err := e.f.Self(bg); err != nil || me != "outerloop-bot" {
			t.Fatalf("self %q, %v", me, err)
		}
	}
	if got := e.fake.requestsTo("GET /user"); len(got) != 1 {
		t.Fatalf("GET /user %d times, want once (cached)", len(got))
	}
	set("ghp_rotated")
	if me, err := e.f.Self(bg); err != nil || me != "outerloop-bot-2" {
		t.Fatalf("after rotation: %q, %v", me, err)
	}
	set("ghp_revoked")
	_, err := e.f.Self(bg)
	fe := wantErr(t, err, workitems.ClassPermission, ErrAuth)
	noSecret(t, "the error", fe.Error(), "ghp_revoked", ghToken)
	set("")
	_, err = e.f.Self(bg)
	wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
	if got := e.fake.requestsTo("GET /user"); len(got) != 3 {
		t.Fatalf("GET /user %d times, want 3 (a failure is not cached, no token sends nothing)", len(got))
	}
	set(ghToken)
	e.fake.faults = []string{"secondary"}
	if me, err := e.f.Self(bg); err != nil || me != "outerloop-bot" {
		t.Fatalf("back to the first token: %q, %v", me, err)
	}
}
