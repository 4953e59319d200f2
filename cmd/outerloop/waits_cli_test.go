package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

const cliReviewInput = "A reviewer requested changes on the pull request #7; address every point, keep the rest of the change, and do not reply to the reviewer:\n" +
	"\nReview by carol:\nName it Sum.\n- calc.go:3: rename this\n"

func TestPrintItemShowsTheWaitAndTheReviewRounds(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	next := since.Add(90 * time.Second)
	it := &workitems.Item{ID: "fix@1", Template: "fix", State: workitems.StateWaiting, Attempt: 2, MaxAttempts: 3,
		Wait: &workitems.Wait{Kind: workitems.WaitReview, Seq: 2, Attempt: 2, Forge: "tea", Repo: "o/r", SHA: "dddd3333eeee4444ffff", PR: 7,
			Since: since, Deadline: since.Add(72 * time.Hour), NextPoll: since.Add(time.Minute), Polls: 3, Reason: "waiting for a review of #7: 0 of 1 approvals"},
		Decisions: []workitems.Decision{{Outcome: workitems.OutcomeRetry, Rule: "changes_requested", At: since.Add(-time.Hour),
			Next: &workitems.Condition{Input: cliReviewInput}}}}
	var b bytes.Buffer
	printItem(&b, api.ItemView{Item: it, ReviewRounds: api.ReviewRounds(it), NextPoll: &next})
	out := b.String()
	for _, want := range []string{
		"WAITING for review (wait 2, attempt 2)\n",
		"  sha: dddd3333eeee4444ffff\n",
		"  pr: #7 of o/r on tea\n",
		"  since: 2026-12-01T10:00:00Z (",
		"  deadline: 2026-12-04T10:00:00Z\n",
		"  next poll: 2026-12-01T10:01:30Z (polled 3×)\n", // the poller's index wins over the wait's own
		"  reason: waiting for a review of #7: 0 of 1 approvals\n",
		"review round 1 (2026-12-01T09:00:00Z): changes requested by carol on #7\n",
		"  | Review by carol:\n  | Name it Sum.\n  | - calc.go:3: rename this\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printItem lacks %q:\n%s", want, out)
		}
	}

	t.Run("and without the index's next poll it prints the wait's own", func(t *testing.T) {
		var b bytes.Buffer
		printWait(&b, it.Wait, nil)
		if !strings.Contains(b.String(), "  next poll: 2026-12-01T10:01:00Z") {
			t.Errorf("%s", b.String())
		}
	})
}

// TestCLIListsAndShowsAWaitingItem seeds a waiting item through the store and reads it with the
// real binary: `items --state waiting`, `items ID` and `items ID --json`.
func TestCLIListsAndShowsAWaitingItem(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, fixTemplate)
	c := newCLI(t, cfg)
	s, ctx := c.store(), context.Background()
	it := &workitems.Item{ID: "fix@waiting", Template: "fix", Goal: "g", Origin: workitems.Origin{Kind: "manual"}, MaxAttempts: 2,
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}}
	if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Commit: "5ha5ha5ha5ha5ha", Tree: "t",
		PushedSHA: "5ha5ha5ha5ha5ha", PR: &workitems.PullRequest{Number: 12, State: workitems.PROpen}}
	d := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "ci_pending", Summary: "CI has not answered", Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: time.Now().Add(time.Hour), Forge: "tea", Repo: "o/r"}}
	if _, err := s.RecordDelivery(ctx, f, d, nil, del, nil); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := c.run("items", "--state", "waiting")
	if code != 0 || !strings.Contains(out, "fix@waiting") || !strings.Contains(out, "waiting") {
		t.Fatalf("items --state waiting: %d %s\n%s", code, errOut, out)
	}
	out, errOut, code = c.run("items", "fix@waiting")
	for _, want := range []string{"WAITING for ci (wait 1, attempt 1)", "sha: 5ha5ha5ha5ha5ha", "pr: #12 of o/r on tea", "deadline: ", "next poll: ", "reason: CI has not answered"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("items ID lacks %q: %d %s\n%s", want, code, errOut, out)
		}
	}
	out, _, _ = c.run("items", "fix@waiting", "--json")
	var v struct {
		Wait     *workitems.Wait `json:"wait"`
		NextPoll *time.Time      `json:"next_poll"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Wait == nil || v.Wait.Kind != workitems.WaitCI || v.Wait.PR != 12 || v.NextPoll == nil {
		t.Fatalf("items --json: %v %+v\n%s", err, v, out)
	}
}
