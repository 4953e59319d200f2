package hooks_test

import (
	"net/http"
	"testing"

	"outerloop/hooks"
	"outerloop/workitems"
)

// Gitea payloads in Gitea 1.27's shapes (modules/structs/hook.go), for what the real-Gitea test
// does not make Gitea send (reviews by another user, Actions).
func TestGiteaPayloadsBecomeEvents(t *testing.T) {
	t.Parallel()
	const sha = "9f1c2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b"
	review := func(state string) hooks.Event {
		return hooks.Event{Kind: hooks.KindReview, Sender: "reviewer", Number: 4, IsPR: true, SHA: sha, Branch: "outerloop/deps-bump",
			Review: &hooks.Review{User: "reviewer", State: state, Body: "LGTM"}}
	}
	cases := []struct {
		name, event, file string
		edits             []string
		want              hooks.Event
	}{
		{"AWarningStatusIsAFailedCheck", "status", "status.json", nil, hooks.Event{Kind: hooks.KindCheck, Sender: "ci-bot", SHA: sha,
			Check: &hooks.Check{Name: "ci/test", State: workitems.CheckFailure, URL: "http://ci.example.com/run/7", Summary: "2 tests failed"}}},
		{"ASkippedStatusIsNeutral", "status", "status.json", []string{`"state": "warning"`, `"state": "skipped"`}, hooks.Event{
			Kind: hooks.KindCheck, Sender: "ci-bot", SHA: sha,
			Check: &hooks.Check{Name: "ci/test", State: workitems.CheckNeutral, URL: "http://ci.example.com/run/7", Summary: "2 tests failed"}}},
		{"AnApprovalIsAReview", "pull_request_review_approved", "pull_request_review_approved.json", nil, review("approved")},
		{"ARejectionIsChangesRequested", "pull_request_review_rejected", "pull_request_review_approved.json",
			[]string{`"type": "pull_request_review_approved"`, `"type": "pull_request_review_rejected"`}, review("changes_requested")},
		{"ACommentReviewIsCommented", "pull_request_review_comment", "pull_request_review_approved.json",
			[]string{`"type": "pull_request_review_approved"`, `"type": "pull_request_review_comment"`}, review("commented")},
		{"APullRequestLabelUpdateCarriesTheCurrentLabels", "pull_request_label", "pull_request_label.json", nil, hooks.Event{
			Kind: hooks.KindLabeled, Sender: "maintainer", Number: 4, IsPR: true, SHA: sha, Branch: "outerloop/deps-bump",
			Labeled: &hooks.Labeled{Labels: []string{"outerloop", "automerge"}, Current: true, User: "maintainer",
				Title: "Bump the dependencies", Body: "Bumps them."}}},
		{"ALabelUpdateUnderTheCoarseEventNameIsLabeled", "pull_request", "pull_request_label.json", nil, hooks.Event{
			Kind: hooks.KindLabeled, Sender: "maintainer", Number: 4, IsPR: true, SHA: sha, Branch: "outerloop/deps-bump",
			Labeled: &hooks.Labeled{Labels: []string{"outerloop", "automerge"}, Current: true, User: "maintainer",
				Title: "Bump the dependencies", Body: "Bumps them."}}},
		{"AnIssueLabelUpdateCarriesTheCurrentLabels", "issue_label", "issue_label.json", nil, hooks.Event{Kind: hooks.KindLabeled,
			Sender: "maintainer", Number: 8, Labeled: &hooks.Labeled{Labels: []string{"outerloop"}, Current: true, User: "maintainer",
				Title: "Flaky test in payments", Body: "It fails one run in ten."}}},
		{"AddedLabelsAreReportedWhenThePayloadNamesThem", "issue_label", "issue_label.json",
			[]string{`"commit_id": ""`, `"commit_id": "", "changes": {"added_labels": [{"name": "urgent"}], "removed_labels": null}`},
			hooks.Event{Kind: hooks.KindLabeled, Sender: "maintainer", Number: 8, Labeled: &hooks.Labeled{Labels: []string{"urgent"},
				User: "maintainer", Title: "Flaky test in payments", Body: "It fails one run in ten."}}},
		{"AFinishedActionsJobIsACheck", "workflow_job", "workflow_job.json", nil, hooks.Event{Kind: hooks.KindCheck,
			Sender: "outerloop", SHA: sha, Branch: "outerloop/deps-bump", Check: &hooks.Check{Name: "test", State: workitems.CheckFailure,
				URL: "http://gitea.example.com/acme/payments/actions/runs/12/jobs/0"}}},
		{"AFinishedActionsRunIsACheckNamedByItsWorkflow", "workflow_run", "workflow_run.json", nil, hooks.Event{Kind: hooks.KindCheck,
			Sender: "outerloop", SHA: sha, Branch: "outerloop/deps-bump", Check: &hooks.Check{Name: "ci", State: workitems.CheckSuccess,
				URL: "http://gitea.example.com/acme/payments/actions/runs/12"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			body := fixture(t, "gitea/"+c.file)
			if c.edits != nil {
				body = edit(t, body, c.edits...)
			}
			a := hs.do(t, http.MethodPost, "/hooks/tea", giteaHeaders(c.event, "tea-delivery-1", teaSecret, body), body)
			if a.Code != http.StatusOK || a.Result != hooks.ResultAccepted || a.Kind != c.want.Kind {
				t.Fatalf("answered %+v", a)
			}
			got := hs.sink.got()
			if len(got) != 1 {
				t.Fatalf("sink got %d events", len(got))
			}
			want := c.want
			want.Forge, want.DeliveryID, want.Repo, want.Received = "tea", "tea-delivery-1", "acme/payments", received
			if g, w := jsonOf(t, got[0]), jsonOf(t, want); g != w {
				t.Fatalf("event\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestEveryKindIsProducedByAFixture(t *testing.T) {
	t.Parallel()
	// The fixtures tests above cover each kind; this keeps AllKinds and them in step.
	covered := map[hooks.Kind]bool{hooks.KindCheck: true, hooks.KindReview: true, hooks.KindReviewComment: true,
		hooks.KindPullRequest: true, hooks.KindComment: true, hooks.KindLabeled: true}
	for _, k := range hooks.AllKinds() {
		if !covered[k] {
			t.Errorf("kind %s has no fixture test", k)
		}
	}
	if len(covered) != len(hooks.AllKinds()) {
		t.Errorf("AllKinds lists %d kinds, the tests know %d", len(hooks.AllKinds()), len(covered))
	}
}
