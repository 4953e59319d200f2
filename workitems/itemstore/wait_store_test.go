package itemstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func pushedDelivery(sha string, pr int) *workitems.Delivery {
	return &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Base: "b", Commit: sha, Tree: "t-" + sha,
		Branch: "outerloop/tmpl", PushedSHA: sha, PR: &workitems.PullRequest{Number: pr, URL: "https://forge/o/r/pulls/7", State: workitems.PROpen}}
}

func waitCI(deadline time.Time) workitems.Decision {
	return workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "ci_pending", Reasons: []string{"CI has not answered"}, Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: deadline, Forge: "gitea", Repo: "o/r", LocalRule: "all_green", LocalSummary: "3 passed"}}
}

// A wait holds the item in the waiting state and in three indexes (due time, commit, pull
// request) and nowhere else; each way out of the wait takes it out of all three in the same
// transaction, and a wake that names an ended wait writes nothing.
func TestWaitingIsAStateWithIndexesAndEveryWayOutClearsThem(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	now := time.Now().UTC()
	deadline := now.Add(30 * time.Minute)

	f := verifying(t, s, "w@1", "tmpl")
	it, err := s.RecordDelivery(ctx, f, waitCI(deadline), &workitems.Verdict{Passed: 3}, pushedDelivery("5ha1", 7), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := it.Wait
	if it.State != workitems.StateWaiting || w == nil || w.Kind != workitems.WaitCI || w.SHA != "5ha1" || w.PR != 7 ||
		w.Forge != "gitea" || w.Repo != "o/r" || !w.Deadline.Equal(deadline.Truncate(0)) || w.Seq != 1 || w.LocalRule != "all_green" {
		t.Fatalf("parked: %s %+v", it.State, w)
	}
	if a := it.Current(); a.State != workitems.AttemptVerifying || a.Decision != nil {
		t.Fatalf("a waiting attempt is still being verified and has no final decision: %+v", a)
	}
	if ids, _ := s.WaitingOnCommit(ctx, "5ha1"); !slices.Equal(ids, []string{"w@1"}) {
		t.Fatalf("by commit: %v", ids)
	}
	if ids, _ := s.WaitingOnPR(ctx, "gitea", "o/r", 7); !slices.Equal(ids, []string{"w@1"}) {
		t.Fatalf("by pull request: %v", ids)
	}
	if n, _ := s.WaitingCount(ctx); n != 1 {
		t.Fatalf("waiting count %d", n)
	}

	// Not due yet: nothing to claim. Due: claimed once, then hidden from a second poller.
	if ids, _ := s.ClaimDueWaits(ctx, now, time.Minute, 10); len(ids) != 0 {
		t.Fatalf("claimed before due: %v", ids)
	}
	later := now.Add(workitems.DefaultFirstPoll + time.Second)
	if ids, _ := s.ClaimDueWaits(ctx, later, time.Minute, 10); !slices.Equal(ids, []string{"w@1"}) {
		t.Fatalf("due claim: %v", ids)
	}
	if ids, _ := s.ClaimDueWaits(ctx, later, time.Minute, 10); len(ids) != 0 {
		t.Fatalf("a claimed wait was claimed again: %v", ids)
	}
	if err := s.PostponeWait(ctx, "w@1", later.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if np, _ := s.NextPoll(ctx, "w@1"); !np.Equal(later.Add(5 * time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("next poll %v", np)
	}

	// A wake of another wait writes nothing.
	if _, err := s.Wake(ctx, "w@1", 9, workitems.WakePoll, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "x", Actor: "verifier"}, nil); !errors.Is(err, itemstore.ErrWaitEnded) {
		t.Fatalf("stale wake: %v", err)
	}

	// Green CI, review required: wait again (a new seq), same indexes.
	review := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "review_pending", Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitReview, Deadline: now.Add(time.Hour), Forge: "gitea", Repo: "o/r"}}
	it, err = s.Wake(ctx, "w@1", 1, workitems.WakeWebhook, review, nil)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateWaiting || it.Wait.Seq != 2 || it.Wait.Kind != workitems.WaitReview || it.Wait.LocalRule != "all_green" {
		t.Fatalf("re-parked: %s %+v", it.State, it.Wait)
	}
	// The poller's postpone of the old wait cannot resurrect anything either way.
	if ids, _ := s.WaitingOnPR(ctx, "gitea", "o/r", 7); !slices.Equal(ids, []string{"w@1"}) {
		t.Fatalf("by pull request after re-park: %v", ids)
	}

	// Close: out of every index.
	it, err = s.Wake(ctx, "w@1", 2, workitems.WakeWebhook, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "approved", Actor: "verifier"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateClosed || it.Wait != nil || it.Current().Decision == nil || it.Current().State != workitems.AttemptDone {
		t.Fatalf("closed: %s %+v %+v", it.State, it.Wait, it.Current())
	}
	assertNotWaiting(t, s, "w@1", "5ha1", 7)
	types := eventTypes(t, s, "w@1")
	if !slices.Contains(types, string(workitems.EventWaiting)) || !slices.Contains(types, string(workitems.EventWoken)) {
		t.Fatalf("events %v", types)
	}

	// A person cancelling a waiting item, and a retry from the pull request, clear it too.
	for _, act := range []workitems.Resolution{{Action: workitems.ResolveCancel, Actor: "p"}, {Action: workitems.ResolveRetry, Actor: "p", Input: "/outerloop retry"}} {
		id := "w@" + string(act.Action)
		f := verifying(t, s, id, "tmpl")
		if _, err := s.RecordDelivery(ctx, f, waitCI(deadline), nil, pushedDelivery("5ha-"+id, 8), nil); err != nil {
			t.Fatal(err)
		}
		it, err := s.Resolve(ctx, id, act)
		if err != nil {
			t.Fatal(err)
		}
		if it.Wait != nil || it.State == workitems.StateWaiting {
			t.Fatalf("%s left a wait: %+v", act.Action, it)
		}
		assertNotWaiting(t, s, id, "5ha-"+id, 8)
	}
}

func assertNotWaiting(t *testing.T, s *itemstore.Store, id, sha string, pr int) {
	t.Helper()
	ctx := context.Background()
	if ids, _ := s.WaitingOnCommit(ctx, sha); slices.Contains(ids, id) {
		t.Fatalf("%s still indexed by commit", id)
	}
	if ids, _ := s.WaitingOnPR(ctx, "gitea", "o/r", pr); slices.Contains(ids, id) {
		t.Fatalf("%s still indexed by pull request", id)
	}
	if np, _ := s.NextPoll(ctx, id); !np.IsZero() {
		t.Fatalf("%s still in the poller's index", id)
	}
}

// The store's aggregate view (read by the metrics on every scrape) counts the waiting items by
// kind and holds the earliest next poll, from which the poll lag follows.
func TestStatsCountWaitingItemsByKindAndTheFirstPoll(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Waiting[workitems.WaitCI] != 0 || st.Waiting[workitems.WaitReview] != 0 || !st.FirstPollAt.IsZero() {
		t.Fatalf("nothing waits: %+v %v", st.Waiting, st.FirstPollAt)
	}
	f := verifying(t, s, "ws@1", "tmpl")
	if _, err := s.RecordDelivery(ctx, f, waitCI(time.Now().Add(time.Hour)), nil, pushedDelivery("5ha-ws", 9), nil); err != nil {
		t.Fatal(err)
	}
	st, err = s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	np, _ := s.NextPoll(ctx, "ws@1")
	if st.Waiting[workitems.WaitCI] != 1 || st.Waiting[workitems.WaitReview] != 0 || !st.FirstPollAt.Equal(np) {
		t.Fatalf("one CI wait: %+v first poll %v, next poll %v", st.Waiting, st.FirstPollAt, np)
	}
	lag, _ := s.PollLag(ctx, np.Add(time.Minute))
	if lag != time.Minute {
		t.Fatalf("poll lag %v, want the minute past the first poll", lag)
	}
}
