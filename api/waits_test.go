package api_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// waiting drives a new item of t1 to waiting for a review of pull request #7, through the store
// as the verifier would.
func (f *fixture) waiting(t *testing.T, kind workitems.WaitKind) string {
	t.Helper()
	ctx := context.Background()
	it, err := f.queue.Submit(ctx, scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := f.store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	if _, _, err := f.store.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Base: "b", Commit: "5ha", Tree: "t",
		Branch: "outerloop/t1", PushedSHA: "5ha", PR: &workitems.PullRequest{Number: 7, URL: "https://forge/o/r/pulls/7", State: workitems.PROpen}}
	d := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "review_pending", Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: kind, Deadline: time.Now().Add(time.Hour), Forge: "gitea", Repo: "o/r"}}
	if _, err := f.store.RecordDelivery(ctx, fence, d, &workitems.Verdict{Passed: 1}, del, nil); err != nil {
		t.Fatal(err)
	}
	return it.ID
}

func TestAWaitingItemIsListedAndShowsItsNextPoll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	id := f.waiting(t, workitems.WaitReview)
	code, m := f.do(t, "GET", "/api/items/"+id, "", "")
	if code != 200 || m["state"] != "waiting" {
		t.Fatalf("get: %d %v", code, m)
	}
	w, _ := m["wait"].(map[string]any)
	if w["kind"] != "review" || w["pr"] != float64(7) || w["sha"] != "5ha" {
		t.Fatalf("wait: %v", m["wait"])
	}
	np, _ := m["next_poll"].(string)
	if at, err := time.Parse(time.RFC3339, np); err != nil || at.Before(time.Now()) {
		t.Fatalf("next_poll %q: want a time to come (%v)", np, err)
	}
	if code, m := f.do(t, "GET", "/api/items?state=waiting", "", ""); code != 200 || len(m["items"].([]any)) != 1 {
		t.Fatalf("list waiting: %d %v", code, m)
	}

	t.Run("and an item that does not wait has no next poll", func(t *testing.T) {
		id := f.escalated(t)
		if _, m := f.do(t, "GET", "/api/items/"+id, "", ""); m["next_poll"] != nil || m["wait"] != nil {
			t.Fatalf("escalated item: next_poll %v wait %v", m["next_poll"], m["wait"])
		}
	})
}

func TestReviewRoundsAreReadFromChangesRequestedDecisions(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	review := "A reviewer requested changes on the pull request #12; address every point, keep the rest of the change, and do not reply to the reviewer:\n" +
		"\nReview by alice:\nPlease rename Add.\n- calc.go:3: not this name\n\nReview by bob:\nAnd test it.\n"
	it := &workitems.Item{Decisions: []workitems.Decision{
		{Outcome: workitems.OutcomeWait, Rule: "review_pending"},
		{Outcome: workitems.OutcomeRetry, Rule: "changes_requested", At: at, Reasons: []string{"a reviewer requested changes"},
			Next: &workitems.Condition{Input: "flip the sign\n\n" + review}},
		{Outcome: workitems.OutcomeEscalate, Rule: "changes_requested_escalate"},
		{Outcome: workitems.OutcomeRetry, Rule: "changes_requested", At: at.Add(time.Hour), Next: &workitems.Condition{Input: review}},
	}}
	rounds := api.ReviewRounds(it)
	if len(rounds) != 2 {
		t.Fatalf("%d rounds, want 2: %+v", len(rounds), rounds)
	}
	r := rounds[0]
	if r.N != 1 || !r.At.Equal(at) || r.PR != 12 || !slices.Equal(r.Reviewers, []string{"alice", "bob"}) || r.Review != review ||
		r.Input != "flip the sign\n\n"+review {
		t.Fatalf("round 1: %+v", r)
	}
	if r := rounds[1]; r.N != 2 || r.Input != "" || r.Review != review {
		t.Fatalf("round 2 (nothing but the review): %+v", r)
	}
}

func TestWaitHistoryPairsEachWaitWithWhatWokeIt(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	evs := []workitems.Event{
		{Type: workitems.EventWaiting, Attempt: 1, At: t0, Data: map[string]string{"kind": "ci", "sha": "abc", "pr": "7", "deadline": t0.Add(time.Hour).Format(time.RFC3339), "seq": "1"}},
		{Type: workitems.EventWoken, Attempt: 1, At: t0.Add(5 * time.Minute), Data: map[string]string{"by": "webhook", "kind": "ci", "seq": "1"}},
		{Type: workitems.EventWaiting, Attempt: 1, At: t0.Add(5 * time.Minute), Data: map[string]string{"kind": "review", "sha": "abc", "pr": "7", "seq": "2"}},
	}
	h := api.WaitHistory(evs)
	if len(h) != 2 || h[0].By != "webhook" || h[0].Waited(t0.Add(time.Hour)) != 5*time.Minute || h[0].PR != 7 || !h[0].Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("first wait: %+v", h)
	}
	if h[1].By != "" || !h[1].WokenAt.IsZero() || h[1].Waited(t0.Add(time.Hour)) != 55*time.Minute {
		t.Fatalf("the wait that lasts: %+v", h[1])
	}
}
