package forge

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"outerloop/workitems"
)

// calcGo is the file the pull request adds; reviews comment on its lines 3 and 4.
const calcGo = "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n"

func TestGiteaReviewsArePullRequestEvidence(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "review")
	reviewer := e.srv.NewCollaborator(t, e.repo, "reviewer")
	const branch = "outerloop/calc"
	sha := e.branchCommit(t, branch, "calc.go", calcGo)
	if err := e.push(t, sha, branch, ""); err != nil {
		t.Fatal(err)
	}
	created, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "Add", Body: "adds Add", Base: "main", Head: branch})
	if err != nil {
		t.Fatal(err)
	}
	n := created.Number
	if err := e.f.AddLabels(bg, e.repo.Slug, n, []string{"outerloop"}); err != nil {
		t.Fatal(err)
	}
	pulls := fmt.Sprintf("/repos/%s/pulls/%d", e.repo.Slug, n)

	t.Run("PullRequestReadsOneByNumber", func(t *testing.T) {
		pr, err := e.f.PullRequest(bg, e.repo.Slug, n)
		if err != nil {
			t.Fatal(err)
		}
		if pr.Number != n || pr.State != workitems.PROpen || pr.HeadSHA != sha || pr.Body != "adds Add" || pr.MergeCommitSHA != "" ||
			fmt.Sprint(pr.Labels) != "[outerloop]" {
			t.Fatalf("pull request %+v", pr)
		}
		_, err = e.f.PullRequest(bg, e.repo.Slug, n+100)
		wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	})

	t.Run("ReviewsAreTheSubmittedOnesOldestFirstWithTheirInlineComments", func(t *testing.T) {
		// A review request and a pending review are entries of Gitea's list, not reviews (Gitea
		// drops a request once its reviewer reviews: the idle one's stays).
		idle := e.srv.NewCollaborator(t, e.repo, "idle")
		e.srv.API(t, http.MethodPost, pulls+"/requested_reviewers", map[string]any{"reviewers": []string{reviewer.Name, idle.Name}},
			http.StatusCreated, nil)
		var changes, approval struct{ ID int64 }
		reviewer.API(t, http.MethodPost, pulls+"/reviews", map[string]any{"event": "REQUEST_CHANGES", "body": "Two problems.",
			"commit_id": sha, "comments": []map[string]any{
				{"path": "calc.go", "body": "Name it Sum.", "new_position": 3},
				{"path": "calc.go", "body": "What about overflow?", "new_position": 4},
			}}, http.StatusOK, &changes)
		reviews, err := e.f.Reviews(bg, e.repo.Slug, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(reviews) != 1 {
			t.Fatalf("%d reviews, want the one submitted: %+v", len(reviews), reviews)
		}
		rc := reviews[0]
		if rc.ID != changes.ID || rc.State != ReviewChangesRequested || rc.User != reviewer.Name || rc.Body != "Two problems." ||
			rc.CommitSHA != sha || rc.SubmittedAt.IsZero() || rc.URL == "" {
			t.Fatalf("the change request %+v", rc)
		}
		if len(rc.Comments) != 2 {
			t.Fatalf("comments %+v, want two", rc.Comments)
		}
		for i, want := range []ReviewComment{{User: reviewer.Name, Path: "calc.go", Line: 3, Body: "Name it Sum."},
			{User: reviewer.Name, Path: "calc.go", Line: 4, Body: "What about overflow?"}} {
			got := rc.Comments[i]
			if got.ID == 0 || got.URL == "" {
				t.Fatalf("comment %d lacks its id or URL: %+v", i, got)
			}
			got.ID, got.URL = 0, ""
			if got != want {
				t.Fatalf("comment %d\n got %+v\nwant %+v", i, got, want)
			}
		}

		reviewer.API(t, http.MethodPost, pulls+"/reviews", map[string]any{"event": "APPROVED", "body": "Fine now.", "commit_id": sha},
			http.StatusOK, &approval)
		// The author cannot approve, but can comment.
		e.srv.API(t, http.MethodPost, pulls+"/reviews", map[string]any{"event": "COMMENT", "body": "Thanks."}, http.StatusOK, nil)
		reviewer.API(t, http.MethodPost, pulls+"/reviews", map[string]any{"event": "PENDING", "body": "draft"}, http.StatusOK, nil)
		reviews, err = e.f.Reviews(bg, e.repo.Slug, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(reviews) != 3 {
			t.Fatalf("%d reviews, want the three submitted: %+v", len(reviews), reviews)
		}
		var raw []struct{ State string }
		e.srv.API(t, http.MethodGet, pulls+"/reviews", nil, http.StatusOK, &raw)
		if states := fmt.Sprint(raw); !strings.Contains(states, "REQUEST_REVIEW") || !strings.Contains(states, "PENDING") {
			t.Fatalf("Gitea's list %s: want the request and the pending review in it, to be left out", states)
		}
		old, ap, cm := reviews[0], reviews[1], reviews[2]
		// Gitea itself dismisses a reviewer's earlier verdict when they give a new one.
		if old.ID != changes.ID || old.State != ReviewDismissed || len(old.Comments) != 2 {
			t.Fatalf("the superseded change request %+v", old)
		}
		if ap.ID != approval.ID || ap.State != ReviewApproved || ap.User != reviewer.Name || ap.Body != "Fine now." || len(ap.Comments) != 0 ||
			ap.SubmittedAt.Before(old.SubmittedAt) || ap.CommitSHA != sha {
			t.Fatalf("the approval %+v", ap)
		}
		if cm.State != ReviewCommented || cm.User != e.srv.Admin || cm.Body != "Thanks." {
			t.Fatalf("the comment %+v", cm)
		}

		// A maintainer's dismissal: the approval counts no more.
		e.srv.API(t, http.MethodPost, fmt.Sprintf("%s/reviews/%d/dismissals", pulls, approval.ID),
			map[string]string{"message": "stale"}, http.StatusOK, nil)
		reviews, err = e.f.Reviews(bg, e.repo.Slug, n)
		if err != nil || len(reviews) != 3 || reviews[1].ID != approval.ID || reviews[1].State != ReviewDismissed {
			t.Fatalf("after the dismissal: %+v, %v", reviews, err)
		}
		_, err = e.f.Reviews(bg, e.repo.Slug, n+100)
		wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	})

	t.Run("PermissionIsTheUsersOnTheRepository", func(t *testing.T) {
		for user, want := range map[string]Permission{reviewer.Name: PermWrite, e.srv.Admin: PermAdmin, "nobody-" + reviewer.Name: PermNone} {
			got, err := e.f.Permission(bg, e.repo.Slug, user)
			if err != nil || got != want {
				t.Fatalf("%s: %s, %v; want %s", user, got, err, want)
			}
		}
		if p, _ := e.f.Permission(bg, e.repo.Slug, reviewer.Name); !p.CanWrite() {
			t.Fatal("a writer can write")
		}
		_, err := e.f.Permission(bg, e.srv.Admin+"/no-such-repo", reviewer.Name)
		wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
		_, err = e.f.Permission(bg, e.repo.Slug, "../admin")
		wantErr(t, err, workitems.ClassInvalidInput, nil)
	})

	t.Run("SelfIsTheTokensAccountAndFollowsARotatedToken", func(t *testing.T) {
		if me, err := e.f.Self(bg); err != nil || me != e.srv.Admin {
			t.Fatalf("self %q, %v; want %s", me, err, e.srv.Admin)
		}
		var tok atomic.Value
		tok.Store(e.srv.Token())
		f := e.forge(t, e.srv.URL, func(k string) string {
			if k == "GITEA_TOKEN" {
				return tok.Load().(string)
			}
			return ""
		})
		if me, err := f.Self(bg); err != nil || me != e.srv.Admin {
			t.Fatalf("self %q, %v", me, err)
		}
		tok.Store(reviewer.Token())
		if me, err := f.Self(bg); err != nil || me != reviewer.Name {
			t.Fatalf("after rotation: self %q, %v; want %s", me, err, reviewer.Name)
		}
		tok.Store("")
		_, err := f.Self(bg)
		fe := wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
		noSecret(t, "the error", fe.Error(), e.srv.Token(), reviewer.Token())
		tok.Store("wrong-token")
		_, err = f.Self(bg)
		wantErr(t, err, workitems.ClassPermission, ErrAuth)
	})

	t.Run("AClosedPullRequestReadsClosedByWhoClosedItLast", func(t *testing.T) {
		if pr, err := e.f.PullRequest(bg, e.repo.Slug, n); err != nil || pr.ClosedBy != "" || pr.MergedBy != "" {
			t.Fatalf("an open pull request was closed by nobody: %+v, %v", pr, err)
		}
		// The reviewer (not the token's account) closes it: the timeline names them.
		reviewer.API(t, http.MethodPatch, pulls, map[string]string{"state": "closed"}, http.StatusCreated, nil)
		pr, err := e.f.PullRequest(bg, e.repo.Slug, n)
		if err != nil || pr.State != workitems.PRClosed || pr.Merged() || pr.ClosedAt.IsZero() || pr.ClosedBy != reviewer.Name || pr.MergedBy != "" {
			t.Fatalf("closed by %s: %+v, %v", reviewer.Name, pr, err)
		}
		// Reopened and closed again by the admin: the newest close counts.
		e.srv.API(t, http.MethodPatch, pulls, map[string]string{"state": "open"}, http.StatusCreated, nil)
		e.srv.ClosePullRequest(t, e.repo, n)
		if pr, err := e.f.PullRequest(bg, e.repo.Slug, n); err != nil || pr.State != workitems.PRClosed || pr.ClosedBy != e.srv.Admin {
			t.Fatalf("closed again by %s: %+v, %v", e.srv.Admin, pr, err)
		}
	})
}

func TestGiteaPullRequestReadsMergedWithItsMergeCommit(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "merged")
	const branch = "outerloop/merged"
	sha := e.branchCommit(t, branch, "calc.go", calcGo)
	if err := e.push(t, sha, branch, ""); err != nil {
		t.Fatal(err)
	}
	pr, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "Add", Base: "main", Head: branch})
	if err != nil {
		t.Fatal(err)
	}
	merge, err := e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: workitems.MergeMerge, ExpectedHeadSHA: sha})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.f.PullRequest(bg, e.repo.Slug, pr.Number)
	if err != nil || got.State != workitems.PRMerged || got.MergeCommitSHA != merge || got.HeadSHA != sha || got.MergedBy != e.srv.Admin || got.ClosedBy != "" {
		t.Fatalf("merged: %+v, %v", got, err)
	}
	if !strings.HasPrefix(got.URL, e.srv.URL+"/") {
		t.Fatalf("URL %q", got.URL)
	}
}
