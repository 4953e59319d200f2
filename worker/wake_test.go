package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"outerloop/delivery"
	"outerloop/lib/redistest"
	"outerloop/verify"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

type wakeVerifier struct{}

func (wakeVerifier) Verify(context.Context, verify.Request) (verify.Result, error) {
	return verify.Result{}, errors.New("not in this test")
}
func (wakeVerifier) Check(context.Context, *config.Template, string) (bool, string, error) {
	return false, "", nil
}
func (wakeVerifier) Judge(_ context.Context, j verify.Judgement) workitems.Decision {
	return workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: j.Precondition.Rule, Actor: "verifier"}
}

// judgeCall is one decision of the wake's evidence stage.
type judgeCall struct {
	item         string
	mergeRefused string
}

// judged answers the wake's judge: the decision given, then (after a refused merge) escalate.
// reads counts the evidence reads (WakeFacts), calls the decisions.
type judged struct {
	d     workitems.Decision
	reads int
	calls []judgeCall
	ci    *verify.CIEvidence // the CI the read finds (nil: none asked for)
	state workitems.PRState  // the pull request's state the read finds ("": as recorded)
}

func (j *judged) AfterPush(context.Context, *config.Template, *workitems.Item, int, workitems.Decision, *workitems.Delivery, string) workitems.Decision {
	panic("not in this test")
}

func (j *judged) WakeFacts(_ context.Context, tmpl *config.Template, it *workitems.Item) (verify.Judgement, error) {
	j.reads++
	del := it.Delivery
	if j.state != "" {
		d := *del
		pr := *d.PR
		pr.State = j.state
		d.PR = &pr
		del = &d
	}
	return verify.Judgement{Template: tmpl, Item: it, Delivery: del, CI: j.ci}, nil
}

func (j *judged) Decide(_ context.Context, _ *config.Template, jd verify.Judgement) workitems.Decision {
	j.calls = append(j.calls, judgeCall{item: jd.Item.ID, mergeRefused: jd.MergeRefused})
	if jd.MergeRefused != "" {
		return workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "automerge_refused",
			Reasons: []string{"automerge refused: " + jd.MergeRefused}, Actor: "verifier"}
	}
	return j.d
}

type refusingDeliverer struct {
	mu        sync.Mutex
	merges    int
	followups []workitems.Decision
	readies   []delivery.Ready
	cleanups  []delivery.Cleanup
}

func (d *refusingDeliverer) Deliver(context.Context, delivery.Request) (delivery.Result, error) {
	return delivery.Result{}, errors.New("not in this test")
}
func (d *refusingDeliverer) Merge(_ context.Context, m delivery.Merge) (workitems.Delivery, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.merges++
	return m.Delivery, &delivery.MergeRefusedError{Err: errors.New("the head moved")}
}
func (d *refusingDeliverer) Ready(_ context.Context, r delivery.Ready) (workitems.Delivery, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readies = append(d.readies, r)
	del := r.Delivery
	pr := *del.PR
	pr.Draft = false
	del.PR = &pr
	return del, nil
}
func (d *refusingDeliverer) Cleanup(_ context.Context, c delivery.Cleanup) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, c)
	return nil
}
func (d *refusingDeliverer) Followup(_ context.Context, f delivery.Followup) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.followups = append(d.followups, f.Decision)
}

type enqueued struct {
	mu  sync.Mutex
	ids []string
}

func (e *enqueued) EnqueueAttempt(_ context.Context, it *workitems.Item) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids = append(e.ids, workitems.TaskID(it.ID, it.Attempt))
	return nil
}
func (e *enqueued) Reconcile(context.Context, time.Duration) (int, error) { return 0, nil }
func (e *enqueued) Recover(context.Context) (int, error)                  { return 0, nil }

// wakeConfig has template t, with a forge to deliver to.
func wakeConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(`
templates:
  - name: t
    goal: g
    loop: {kind: script, commands: ["true"]}
    budget: {wall_time: 5m}
    done_check: {commands: ["true"]}
forges:
  tea: {kind: gitea, base_url: "http://127.0.0.1:1"}
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func parkedItem(t *testing.T, s *itemstore.Store, id string) {
	t.Helper()
	ctx := context.Background()
	it := &workitems.Item{ID: id, Template: "t", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
	if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f, err := s.AcquireLease(ctx, id, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
		t.Fatal(err)
	}
	del := &workitems.Delivery{Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, Commit: "5ha", PushedSHA: "5ha",
		PR: &workitems.PullRequest{Number: 4, State: workitems.PROpen}}
	d := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "ci_pending", Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: time.Now().Add(time.Hour), Forge: "tea", Repo: "o/r"}}
	if _, err := s.RecordDelivery(ctx, f, d, nil, del, nil); err != nil {
		t.Fatal(err)
	}
}

// A wake judges, acts and records once: a close whose merge the forge refuses is decided again
// on that fact (escalated, the pull request labelled), and a wake of a wait that has ended
// writes nothing.
func TestAWakeActsOnTheDecisionAndRecordsItOnce(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix)
	cfg := wakeConfig(t)
	tmpl, _ := cfg.Template("t")
	tmpl.Deliver.Automerge = true // as a template with deliver: {automerge: true} would have it
	ctx := context.Background()
	parkedItem(t, s, "m@1")
	ev := &judged{d: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "checks_passed", Reasons: []string{"green"}, Actor: "verifier"}}
	del := &refusingDeliverer{}
	enq := &enqueued{}
	h := worker.NewHandler(worker.HandlerOptions{Store: s, Config: cfg, Verifier: wakeVerifier{}, Evidence: ev, Deliverer: del, Enqueuer: enq})

	if err := h.Wake(ctx, workitems.WakePayload{Item: "m@1", Seq: 7, By: workitems.WakePoll}); err != nil {
		t.Fatal(err)
	}
	if it, _ := s.Get(ctx, "m@1"); it.State != workitems.StateWaiting || len(ev.calls) != 0 {
		t.Fatalf("a wake of another wait must do nothing: %s, %d judged", it.State, len(ev.calls))
	}
	if err := h.Wake(ctx, workitems.WakePayload{Item: "m@1", Seq: 1, By: workitems.WakeWebhook}); err != nil {
		t.Fatal(err)
	}
	it, err := s.Get(ctx, "m@1")
	if err != nil {
		t.Fatal(err)
	}
	last := it.Decisions[len(it.Decisions)-1]
	// The forge was read once; the refused merge was decided on with the same facts.
	if it.State != workitems.StateEscalated || last.Rule != "automerge_refused" || del.merges != 1 || len(ev.calls) != 2 ||
		ev.calls[1].mergeRefused != "the head moved" || ev.reads != 1 {
		t.Fatalf("state %s rule %s merges %d reads %d judged %+v", it.State, last.Rule, del.merges, ev.reads, ev.calls)
	}
	if len(del.followups) != 1 || del.followups[0].Outcome != workitems.OutcomeEscalate {
		t.Fatalf("the escalation is told to the pull request: %+v", del.followups)
	}
	// The same wake again (asynq delivers at least once): nothing more.
	if err := h.Wake(ctx, workitems.WakePayload{Item: "m@1", Seq: 1, By: workitems.WakeWebhook}); err != nil || del.merges != 1 {
		t.Fatalf("a repeated wake acted again: %v, %d merges", err, del.merges)
	}

	// A retry from a wake enqueues the next attempt.
	parkedItem(t, s, "r@1")
	next := workitems.Condition{Input: "CI test failed"}
	ev.d = workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "ci_failed", Next: &next, Reasons: []string{"red"}, Actor: "verifier"}
	if err := h.Wake(ctx, workitems.WakePayload{Item: "r@1", Seq: 1, By: workitems.WakePoll}); err != nil {
		t.Fatal(err)
	}
	if it, _ := s.Get(ctx, "r@1"); it.State != workitems.StateRetryWait || it.Attempt != 2 || len(enq.ids) != 1 || enq.ids[0] != "r@1/attempt-2" {
		t.Fatalf("retry: %s %d %v", it.State, it.Attempt, enq.ids)
	}
}

// deliver.draft_until ci_green: a wake that reads the required CI green marks the draft ready
// (and records it so) before the decision acts; a wake that reads pending CI does not. A wake
// that finds the pull request merged asks for its branch to be cleaned up.
func TestAWakeMarksADraftReadyOnGreenCIAndCleansUpAnEndedPullRequest(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix)
	cfg := wakeConfig(t)
	tmpl, _ := cfg.Template("t")
	tmpl.Deliver.DraftUntil = workitems.DraftUntilCIGreen
	ctx := context.Background()
	for _, id := range []string{"p@1", "g@1", "e@1"} {
		parkedItem(t, s, id)
		if _, err := s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
			it.Delivery.PR.Draft = true
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	del := &refusingDeliverer{}
	wait := workitems.Decision{Outcome: workitems.OutcomeWait, Rule: "review_pending", Reasons: []string{"review"}, Actor: "verifier",
		Wait: &workitems.WaitPlan{Kind: workitems.WaitReview, Deadline: time.Now().Add(time.Hour), Forge: "tea", Repo: "o/r"}}
	pending := &verify.CIEvidence{SHA: "5ha", Required: []string{"ci"}, Missing: []string{"ci"}}
	green := &verify.CIEvidence{SHA: "5ha", Required: []string{"ci"}, Checks: []verify.CICheck{{Name: "ci", State: verify.CISuccess, SHA: "5ha"}}}

	ev := &judged{d: wait, ci: pending}
	h := worker.NewHandler(worker.HandlerOptions{Store: s, Config: cfg, Verifier: wakeVerifier{}, Evidence: ev, Deliverer: del, Enqueuer: &enqueued{}})
	if err := h.Wake(ctx, workitems.WakePayload{Item: "p@1", Seq: 1, By: workitems.WakePoll}); err != nil {
		t.Fatal(err)
	}
	if len(del.readies) != 0 {
		t.Fatalf("pending CI made the draft ready: %+v", del.readies)
	}
	ev.ci = green
	if err := h.Wake(ctx, workitems.WakePayload{Item: "g@1", Seq: 1, By: workitems.WakePoll}); err != nil {
		t.Fatal(err)
	}
	it, _ := s.Get(ctx, "g@1")
	if len(del.readies) != 1 || del.readies[0].Item.ID != "g@1" || it.Delivery.PR.Draft || it.State != workitems.StateWaiting {
		t.Fatalf("green CI: readies %d, recorded draft %v, state %s", len(del.readies), it.Delivery.PR.Draft, it.State)
	}

	closed := &judged{d: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "pr_merged", Reasons: []string{"merged"}, Actor: "verifier"}, state: workitems.PRMerged}
	h = worker.NewHandler(worker.HandlerOptions{Store: s, Config: cfg, Verifier: wakeVerifier{}, Evidence: closed, Deliverer: del, Enqueuer: &enqueued{}})
	if err := h.Wake(ctx, workitems.WakePayload{Item: "e@1", Seq: 1, By: workitems.WakePoll}); err != nil {
		t.Fatal(err)
	}
	if len(del.cleanups) != 1 || del.cleanups[0].Item.ID != "e@1" || del.cleanups[0].Delivery.PR.State != workitems.PRMerged {
		t.Fatalf("cleanups %+v", del.cleanups)
	}
}
