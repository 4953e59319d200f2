package giteatest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"outerloop/lib/testwait"
)

// What webhook tests need: a hook on a repository, and the actions that make Gitea deliver
// (pull requests opened, commented on, closed, merged). The server's app.ini lets webhooks go to
// loopback addresses (the tests' httptest servers).

// CreateHook adds a Gitea-type webhook to repo (owner/name) that POSTs JSON to url, signed with
// secret, for events (Gitea's names: "status", "issues", "issue_comment", "pull_request",
// "pull_request_review", "workflow_job"…; "pull_request" and "issues" include their
// sub-events), and returns its id. Gitea delivers from a queue, within a moment of the event.
func (s *Server) CreateHook(t testing.TB, repo, url, secret string, events []string) int64 {
	t.Helper()
	var h struct {
		ID int64 `json:"id"`
	}
	s.API(t, http.MethodPost, "/repos/"+repo+"/hooks", map[string]any{
		"type":   "gitea",
		"active": true,
		"events": events,
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, http.StatusCreated, &h)
	return h.ID
}

// OpenPullRequest opens a pull request from head to base (branches of r) and returns its number.
func (s *Server) OpenPullRequest(t testing.TB, r Repo, head, base, title string) int {
	t.Helper()
	var pr struct {
		Number int `json:"number"`
	}
	s.API(t, http.MethodPost, "/repos/"+r.Slug+"/pulls", map[string]string{"head": head, "base": base, "title": title},
		http.StatusCreated, &pr)
	return pr.Number
}

// CommentIssue posts a comment on issue or pull request number as the admin.
func (s *Server) CommentIssue(t testing.TB, r Repo, number int, body string) {
	t.Helper()
	s.API(t, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", r.Slug, number), map[string]string{"body": body},
		http.StatusCreated, nil)
}

// MergePullRequest merges pull request number (a merge commit). Gitea checks mergeability
// after a push in the background and refuses (405) until it has: that is retried until the
// test's deadline (testwait), however long a loaded machine takes.
func (s *Server) MergePullRequest(t testing.TB, r Repo, number int) {
	t.Helper()
	path := fmt.Sprintf("/repos/%s/pulls/%d/merge", r.Slug, number)
	began, deadline := time.Now(), testwait.Deadline(t)
	for {
		code, body, err := s.Do(context.Background(), http.MethodPost, path, map[string]string{"Do": "merge"})
		if err == nil && code == http.StatusOK {
			return
		}
		if err != nil || code != http.StatusMethodNotAllowed || time.Now().After(deadline) {
			t.Fatalf("giteatest: merge %s #%d (mergeability awaited %s): HTTP %d, %v: %s", r.Slug, number,
				time.Since(began).Round(time.Second), code, err, body)
		}
		// Gitea gives no event for "mergeability checked": the merge answer is the signal.
		time.Sleep(100 * time.Millisecond)
	}
}
