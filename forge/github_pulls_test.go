package forge

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"outerloop/workitems"
)

// openPR pushes a commit to branch on the fake's remote and opens a pull request from it.
func (e *ghEnv) openPR(t *testing.T, branch string, draft bool) *PullRequest {
	t.Helper()
	if e.fake.branchSHA("main") == "" {
		if err := e.push(t, e.base, "main", ""); err != nil {
			t.Fatal(err)
		}
	}
	gitRun(t, e.dir, "checkout", "-q", "-B", branch, e.base)
	sha := commitFile(t, e.dir, branch+".txt", branch+"\n", "change on "+branch)
	if err := e.push(t, sha, branch, ""); err != nil {
		t.Fatal(err)
	}
	pr, err := e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "Change " + branch, Base: "main", Head: branch, Draft: draft})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// count is how many API requests the fake saw that start with prefix ("PATCH /repos/…").
func (f *fakeGitHub) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// first is the body and Authorization header of the first request line the fake saw.
func (f *fakeGitHub) first(t *testing.T, line string) (body, auth string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.requests, line)
	if i < 0 {
		t.Fatalf("no request %q in %v", line, f.requests)
	}
	return f.bodies[i], f.auth[i]
}

func TestGitHubClosesAnOpenPullRequestAndRefusesAMergedOne(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	pr := e.openPR(t, "outerloop/obsolete", false)
	patch := "PATCH /repos/" + ghRepo + "/pulls/" + strconv.Itoa(pr.Number)

	closed, err := e.f.ClosePullRequest(bg, ghRepo, pr.Number)
	if err != nil {
		t.Fatal(err)
	}
	if closed.State != workitems.PRClosed || closed.Number != pr.Number || closed.Merged() || closed.ClosedAt.IsZero() {
		t.Fatalf("closed %+v", closed)
	}
	if got, err := e.f.PullRequest(bg, ghRepo, pr.Number); err != nil || got.State != workitems.PRClosed {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if got := e.fake.count(patch); got != 1 {
		t.Fatalf("%d PATCHes of the pull request, want 1", got)
	}
	var sent map[string]any
	if body, _ := e.fake.first(t, patch); json.Unmarshal([]byte(body), &sent) != nil || sent["state"] != "closed" {
		t.Fatalf("PATCH body %v: want state closed", sent)
	}

	// Closed already: returned as it is, nothing sent.
	again, err := e.f.ClosePullRequest(bg, ghRepo, pr.Number)
	if err != nil || again.State != workitems.PRClosed {
		t.Fatalf("closing twice: %+v, %v", again, err)
	}
	if got := e.fake.count(patch); got != 1 {
		t.Fatalf("closing a closed pull request sent a PATCH (%d)", got)
	}

	merged := e.openPR(t, "outerloop/landed", false)
	if _, err := e.f.Merge(bg, ghRepo, merged.Number, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: merged.HeadSHA}); err != nil {
		t.Fatal(err)
	}
	_, err = e.f.ClosePullRequest(bg, ghRepo, merged.Number)
	wantErr(t, err, workitems.ClassInvalidInput, ErrNotOpen)
	if got, _ := e.f.PullRequest(bg, ghRepo, merged.Number); !got.Merged() {
		t.Fatalf("the merged pull request is now %s", got.State)
	}

	_, err = e.f.ClosePullRequest(bg, ghRepo, 99)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestGitHubCloseOfAPullRequestMergedMeanwhileIsNotOpen(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	pr := e.openPR(t, "outerloop/racing", false)
	// Merged by someone between the client's read and its PATCH: GitHub refuses (422).
	e.fake.onPatch = func(p map[string]any) {
		at := e.fake.now.Format(time.RFC3339)
		p["state"], p["merged"], p["merged_at"], p["closed_at"] = "closed", true, at, at
	}
	_, err := e.f.ClosePullRequest(bg, ghRepo, pr.Number)
	fe := wantErr(t, err, workitems.ClassInvalidInput, ErrNotOpen)
	if fe.StatusCode != 422 {
		t.Fatalf("status %d, want GitHub's 422: %v", fe.StatusCode, fe)
	}
}

func TestGitHubMarksADraftReadyThroughGraphQL(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	pr := e.openPR(t, "outerloop/draft", true)
	if !pr.Draft {
		t.Fatalf("opened as a draft: %+v", pr)
	}
	if got, err := e.f.PullRequest(bg, ghRepo, pr.Number); err != nil || !got.Draft {
		t.Fatalf("read back before: %+v, %v", got, err)
	}

	ready, err := e.f.MarkReady(bg, ghRepo, pr.Number)
	if err != nil {
		t.Fatal(err)
	}
	if ready.Draft || ready.Number != pr.Number || ready.State != workitems.PROpen || ready.Title != pr.Title {
		t.Fatalf("marked ready: %+v", ready)
	}
	if got, err := e.f.PullRequest(bg, ghRepo, pr.Number); err != nil || got.Draft {
		t.Fatalf("read back after: %+v, %v", got, err)
	}
	// One mutation, to the GraphQL endpoint, with the pull request's node id, and the token.
	if got := e.fake.count("POST /graphql"); got != 1 {
		t.Fatalf("%d GraphQL requests, want 1: %v", got, e.fake.requests)
	}
	body, auth := e.fake.first(t, "POST /graphql")
	var sent struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal([]byte(body), &sent); err != nil || !strings.Contains(sent.Query, "markPullRequestReadyForReview") ||
		sent.Variables["id"] != ghNodeID(pr.Number) {
		t.Fatalf("GraphQL body %s (%v)", body, err)
	}
	if auth != "Bearer "+ghToken {
		t.Fatal("the GraphQL request was not authorised with the token")
	}
	if !slices.Equal(e.fake.readied, []string{ghNodeID(pr.Number)}) {
		t.Fatalf("readied %v", e.fake.readied)
	}

	// Ready already: returned unchanged, no mutation.
	again, err := e.f.MarkReady(bg, ghRepo, pr.Number)
	if err != nil || again.Draft {
		t.Fatalf("again: %+v, %v", again, err)
	}
	if got := e.fake.count("POST /graphql"); got != 1 {
		t.Fatalf("marking a ready pull request ready sent a mutation (%d)", got)
	}
	evidence := "evidence: all green"
	if edited, err := e.f.EditPullRequest(bg, ghRepo, pr.Number, PullRequestEdit{Body: &evidence}); err != nil || edited.Draft {
		t.Fatalf("edited %+v, %v", edited, err)
	}

	// A closed draft is not made ready.
	closedDraft := e.openPR(t, "outerloop/abandoned", true)
	e.fake.closePull(closedDraft.Number)
	_, err = e.f.MarkReady(bg, ghRepo, closedDraft.Number)
	wantErr(t, err, workitems.ClassInvalidInput, ErrNotOpen)
	if got := e.fake.count("POST /graphql"); got != 1 {
		t.Fatalf("a closed draft got a mutation (%d)", got)
	}
	_, err = e.f.MarkReady(bg, ghRepo, 99)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestGitHubGraphQLRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	pr := e.openPR(t, "outerloop/limited", true)
	before := len(e.clock.Waits())
	// The read passes; the mutation meets GraphQL's rate limit (200 with an error), then passes.
	e.fake.faults = []string{"none", "graphql-rate-limit"}
	ready, err := e.f.MarkReady(bg, ghRepo, pr.Number)
	if err != nil || ready.Draft {
		t.Fatalf("%+v, %v", ready, err)
	}
	if got := e.fake.count("POST /graphql"); got != 2 {
		t.Fatalf("%d GraphQL requests, want the limited one and its retry", got)
	}
	if waits := e.clock.Waits(); len(waits) != before+1 {
		t.Fatalf("waits %v: want one wait for the reset", waits)
	}
}

func TestGitHubGraphQLErrorsAreClassified(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	g := e.f.(*gitHub)
	var out map[string]any

	// A node id that resolves to nothing: NOT_FOUND, answered with 200.
	err := g.graphQL(bg, "mark pull request ready", ghRepo, markReadyMutation, map[string]any{"id": "PR_kwDOnothing"}, &out)
	fe := wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	if !strings.Contains(fe.Error(), "Could not resolve to a node") || fe.StatusCode != 200 {
		t.Fatalf("%v (HTTP %d)", fe, fe.StatusCode)
	}
	// A query the server does not take: an error without a type.
	err = g.graphQL(bg, "query", ghRepo, `query { viewer { login } }`, nil, &out)
	fe = wantErr(t, err, workitems.ClassInvalidInput, nil)
	if !strings.Contains(fe.Message, "the fake answers markPullRequestReadyForReview") {
		t.Fatalf("message %q", fe.Message)
	}
	// The API's own refusals keep their classes (here: the credentials).
	e.fake.faults = []string{"401"}
	err = g.graphQL(bg, "mark pull request ready", ghRepo, markReadyMutation, map[string]any{"id": ghNodeID(1)}, &out)
	wantErr(t, err, workitems.ClassPermission, ErrAuth)
	noSecret(t, "the forge's log", e.logs.String(), e.secrets()...)
}

func TestGitHubMarkReadyWithoutATokenSendsNoMutation(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	pr := e.openPR(t, "outerloop/tokenless", true)
	f, err := New(Config{Name: "github", ForgeConfig: e.f.(*gitHub).cfg.ForgeConfig, Getenv: func(string) string { return "" },
		Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.MarkReady(bg, ghRepo, pr.Number)
	wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
	if got := e.fake.count("POST /graphql"); got != 0 {
		t.Fatalf("a mutation went out without a token (%d)", got)
	}
	if got, _ := e.f.PullRequest(bg, ghRepo, pr.Number); !got.Draft {
		t.Fatal("the draft was marked ready without a token")
	}
}

func TestGraphQLURLIsBesideTheRESTRoot(t *testing.T) {
	t.Parallel()
	for rest, want := range map[string]string{
		"https://api.github.com/":         "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/": "https://ghe.example.com/api/graphql",
		"http://127.0.0.1:8080/":          "http://127.0.0.1:8080/graphql",
		"https://proxy.example.com/gh/":   "https://proxy.example.com/gh/graphql",
	} {
		u, err := url.Parse(rest)
		if err != nil {
			t.Fatal(err)
		}
		if got := graphQLURL(u); got != want {
			t.Errorf("%s: %s, want %s", rest, got, want)
		}
	}
}
