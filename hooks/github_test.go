package hooks_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"outerloop/hooks"
	"outerloop/workitems"
)

const (
	ghRepo = "octo-org/octo-repo"
	ghHead = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
)

// edit replaces old by new in a fixture (exactly once).
func edit(t *testing.T, b []byte, pairs ...string) []byte {
	t.Helper()
	s := string(b)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("test bug: %q not in the fixture", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return []byte(s)
}

func TestGitHubPayloadsBecomeEvents(t *testing.T) {
	t.Parallel()
	pr := func(a hooks.PRAction, s workitems.PRState) hooks.Event {
		return hooks.Event{Kind: hooks.KindPullRequest, Sender: "maintainer", Number: 2, IsPR: true, SHA: ghHead,
			Branch: "outerloop/deps-bump", PullRequest: &hooks.PullRequest{Action: a, State: s, Title: "Bump the dependencies"}}
	}
	merged := pr(hooks.PRMerged, workitems.PRMerged)
	merged.PullRequest.MergedBy, merged.PullRequest.MergeCommitSHA = "maintainer", "3f9c2d1a6b6a7e0c1d2e3f405162738495a6b7c8"
	cases := []struct {
		name, event, file string
		edits             []string
		want              hooks.Event
	}{
		{"AFailedCommitStatusIsAFailedCheck", "status", "status.json", nil, hooks.Event{Kind: hooks.KindCheck, Sender: "ci-bot",
			SHA: "6113728f27ae82c7b1a177c8d03f9e96e0adf246", Branch: "outerloop/deps-bump",
			Check: &hooks.Check{Name: "ci/build", State: workitems.CheckFailure, URL: "https://ci.example.com/build/42",
				Summary: "Build failed: 3 tests failed"}}},
		{"AnErroredCommitStatusIsAnInfraError", "status", "status.json", []string{`"state": "failure"`, `"state": "error"`}, hooks.Event{
			Kind: hooks.KindCheck, Sender: "ci-bot", SHA: "6113728f27ae82c7b1a177c8d03f9e96e0adf246", Branch: "outerloop/deps-bump",
			Check: &hooks.Check{Name: "ci/build", State: workitems.CheckInfraError, URL: "https://ci.example.com/build/42",
				Summary: "Build failed: 3 tests failed"}}},
		{"ACompletedCheckRunIsACheck", "check_run", "check_run.json", nil, hooks.Event{Kind: hooks.KindCheck, Sender: "octo-ci[bot]",
			SHA: ghHead, Branch: "outerloop/deps-bump", Check: &hooks.Check{Name: "test", State: workitems.CheckSuccess,
				URL: "https://github.com/octo-org/octo-repo/runs/128620228", Summary: "412 passed"}}},
		{"AnApprovalIsAReview", "pull_request_review", "pull_request_review.json", nil, hooks.Event{Kind: hooks.KindReview,
			Sender: "reviewer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
			Review: &hooks.Review{User: "reviewer", State: "approved", Body: "Looks good, one nit."}}},
		{"ChangesRequestedIsAReview", "pull_request_review", "pull_request_review.json",
			[]string{`"state": "approved"`, `"state": "changes_requested"`}, hooks.Event{Kind: hooks.KindReview,
				Sender: "reviewer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
				Review: &hooks.Review{User: "reviewer", State: "changes_requested", Body: "Looks good, one nit."}}},
		{"ACommentReviewInUpperCaseIsAReview", "pull_request_review", "pull_request_review.json",
			[]string{`"state": "approved"`, `"state": "COMMENTED"`}, hooks.Event{Kind: hooks.KindReview,
				Sender: "reviewer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
				Review: &hooks.Review{User: "reviewer", State: "commented", Body: "Looks good, one nit."}}},
		{"ADismissedReviewIsAReview", "pull_request_review", "pull_request_review_dismissed.json", nil, hooks.Event{
			Kind: hooks.KindReview, Sender: "maintainer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
			Review: &hooks.Review{User: "reviewer", State: "dismissed", Body: "Please split this."}}},
		{"ALineCommentIsAReviewComment", "pull_request_review_comment", "pull_request_review_comment.json", nil, hooks.Event{
			Kind: hooks.KindReviewComment, Sender: "reviewer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
			ReviewComment: &hooks.ReviewComment{User: "reviewer", Path: "go.mod", Line: 7, Body: "Pin this one, please.",
				URL: "https://github.com/octo-org/octo-repo/pull/2#discussion_r2"}}},
		{"ACommentOnAPullRequestIsACommentOnAPR", "issue_comment", "issue_comment.json", nil, hooks.Event{Kind: hooks.KindComment,
			Sender: "maintainer", Number: 2, IsPR: true, Comment: &hooks.Comment{User: "maintainer", Body: "/outerloop retry",
				URL: "https://github.com/octo-org/octo-repo/pull/2#issuecomment-492700400"}}},
		{"ACommentOnAnIssueIsNotOnAPR", "issue_comment", "issue_comment_issue.json", nil, hooks.Event{Kind: hooks.KindComment,
			Sender: "someone", Number: 7, Comment: &hooks.Comment{User: "someone", Body: "Still happening.",
				URL: "https://github.com/octo-org/octo-repo/issues/7#issuecomment-492700401"}}},
		{"AMergedPullRequestIsMerged", "pull_request", "pull_request_closed.json", nil, merged},
		{"AClosedUnmergedPullRequestIsClosed", "pull_request", "pull_request_closed.json",
			[]string{`"merged": true`, `"merged": false`}, pr(hooks.PRClosed, workitems.PRClosed)},
		{"AReopenedPullRequestIsOpen", "pull_request", "pull_request_closed.json",
			[]string{`"action": "closed"`, `"action": "reopened"`, `"merged": true`, `"merged": false`}, pr(hooks.PRReopened, workitems.PROpen)},
		{"ASynchronizedPullRequestIsOpen", "pull_request", "pull_request_closed.json",
			[]string{`"action": "closed"`, `"action": "synchronize"`, `"merged": true`, `"merged": false`}, pr(hooks.PRSynchronized, workitems.PROpen)},
		{"AnOpenedPullRequestIsOpen", "pull_request", "pull_request_closed.json",
			[]string{`"action": "closed"`, `"action": "opened"`, `"merged": true`, `"merged": false`}, pr(hooks.PROpened, workitems.PROpen)},
		{"ALabeledPullRequestIsLabeled", "pull_request", "pull_request_labeled.json", nil, hooks.Event{Kind: hooks.KindLabeled,
			Sender: "maintainer", Number: 2, IsPR: true, SHA: ghHead, Branch: "outerloop/deps-bump",
			Labeled: &hooks.Labeled{Labels: []string{"automerge"}, User: "maintainer", Title: "Bump the dependencies",
				Body: "Bumps the dependencies."}}},
		{"ALabeledIssueIsLabeled", "issues", "issues_labeled.json", nil, hooks.Event{Kind: hooks.KindLabeled, Sender: "maintainer",
			Number: 7, Labeled: &hooks.Labeled{Labels: []string{"outerloop"}, User: "maintainer", Title: "Flaky test in payments",
				Body: "It fails one run in ten."}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			body := fixture(t, "github/"+c.file)
			if c.edits != nil {
				body = edit(t, body, c.edits...)
			}
			a := hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders(c.event, "gh-delivery-1", ghSecret, body), body)
			if a.Code != http.StatusOK || a.Result != hooks.ResultAccepted || a.Kind != c.want.Kind {
				t.Fatalf("answered %+v", a)
			}
			got := hs.sink.got()
			if len(got) != 1 {
				t.Fatalf("sink got %d events", len(got))
			}
			want := c.want
			want.Forge, want.DeliveryID, want.Repo, want.Received = "gh", "gh-delivery-1", ghRepo, received
			if g, w := jsonOf(t, got[0]), jsonOf(t, want); g != w {
				t.Fatalf("event\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestGitHubCheckRunConclusionsMapAsForgeMapsThem(t *testing.T) {
	t.Parallel()
	for conclusion, want := range map[string]workitems.CheckState{
		"success": workitems.CheckSuccess, "failure": workitems.CheckFailure, "timed_out": workitems.CheckFailure,
		"neutral": workitems.CheckNeutral, "skipped": workitems.CheckNeutral, "cancelled": workitems.CheckCancelled,
		"action_required": workitems.CheckActionRequired, "stale": workitems.CheckStale, "startup_failure": workitems.CheckInfraError,
		"something_new": workitems.CheckUnknown,
	} {
		t.Run(conclusion, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			body := edit(t, fixture(t, "github/check_run.json"), `"conclusion": "success"`, `"conclusion": "`+conclusion+`"`)
			hs.do(t, http.MethodPost, "/hooks/gh", githubHeaders("check_run", "d", ghSecret, body), body)
			got := hs.sink.got()
			if len(got) != 1 || got[0].Check.State != want {
				t.Fatalf("got %+v, want state %s", got, want)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
