package forge

import (
	"encoding/json"
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
