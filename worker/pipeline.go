package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/delivery"
	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/verify"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// The pipeline after the inner loop, driven here and nowhere else. Each stage is called once,
// in this order, through an interface the worker owns, with the stage's own request and result
// types; no stage calls back into another, and only the policy decides:
//
//	exit recorded ─▶ 1 local check (Verifier.Verify: evidence in the workspace, the table)
//	               ─▶ 2 delivery    (Deliverer.Deliver: commit, patch, push, pull request: facts)
//	               ─▶ 3 policy      (Evidence.AfterPush: the table on the delivery's facts)
//	               ─▶ 4 act         (Deliverer.Merge of an automerged close, Deliverer.Followup
//	                                 of an escalation: facts again; a refused merge is one
//	                                 more fact for the table, automerge_refused)
//	               ─▶ 5 record      (Store.RecordDelivery: decision, delivery and patch at once)
//
// A waiting item takes the same road from a wake task (Wake): its evidence read once and
// judged (Evidence.WakeFacts, Evidence.Decide) ─▶ act ─▶ record (Store.Wake). Problems found before any evidence
// (a lost workspace, a removed template) go straight to the table's first rows
// (Verifier.Judge with a verify.Precondition).

// Verifier is the local done check and the one decision policy (verify.Verifier).
type Verifier interface {
	// Verify runs the done check in the attempt's workspace and decides on its evidence. An
	// error is broken infrastructure, not a verdict: the item stays verifying and the task is
	// retried.
	Verify(ctx context.Context, req verify.Request) (verify.Result, error)
	// Check runs the done check for a loop that wants to see where it stands (a claim, not a
	// decision).
	Check(ctx context.Context, tmpl *config.Template, workspace string) (passed bool, summary string, err error)
	// Judge decides with the same table on facts gathered elsewhere: a precondition here.
	Judge(ctx context.Context, j verify.Judgement) workitems.Decision
}

// Deliverer makes a locally closed attempt a delivered change and acts at the forge
// (delivery.Deliverer). It returns facts; the policy decides.
type Deliverer interface {
	// Deliver commits the change and, through a forge, pushes it and opens or updates the pull
	// request. A failure a person must act on is a record with outcome failed; an error means
	// transient trouble only: the item stays verifying and the task is retried, without costing
	// an attempt.
	Deliver(ctx context.Context, r delivery.Request) (delivery.Result, error)
	// Merge merges a decided close's pull request (deliver.automerge). A refusal by the forge
	// is a *delivery.MergeRefusedError; any other error is transient.
	Merge(ctx context.Context, m delivery.Merge) (workitems.Delivery, error)
	// Followup tells the forge about an escalation of an item with a pull request (label and
	// comment). A failure is an event on the item, not an error.
	Followup(ctx context.Context, f delivery.Followup)
	// Ready marks a draft pull request ready for review once deliver.draft_until holds.
	Ready(ctx context.Context, r delivery.Ready) (workitems.Delivery, error)
	// Cleanup deletes the branch of a pull request that was merged or closed, when it is
	// outerloop's alone. Failures are events.
	Cleanup(ctx context.Context, c delivery.Cleanup) error
}

// Evidence gathers the facts after the push and has the policy decide on them (waits.Judge):
// right after a delivery (AfterPush: nothing read yet; CI and review the template asks for are
// pending), and at a wake of a waiting item (WakeFacts: CI on the pushed commit, the pull
// request's state and reviews, read once without waiting; Decide: the policy on them).
// mergeRefused, or Judgement.MergeRefused, is why the forge refused to merge a close: the
// facts are decided on again with it, never read again.
type Evidence interface {
	AfterPush(ctx context.Context, tmpl *config.Template, it *workitems.Item, attempt int,
		local workitems.Decision, del *workitems.Delivery, mergeRefused string) workitems.Decision
	WakeFacts(ctx context.Context, tmpl *config.Template, it *workitems.Item) (verify.Judgement, error)
	Decide(ctx context.Context, tmpl *config.Template, jd verify.Judgement) workitems.Decision
}

// decide takes a finished attempt down the pipeline: local check, delivery, the policy on the
// delivery's facts, act, record; a retry's next attempt is enqueued.
func (h *Handler) decide(ctx context.Context, it *workitems.Item, tmpl *config.Template, fence *itemstore.Fence,
	ws, base string, log *slog.Logger) error {
	a := it.Current()
	events := &storeSink{store: h.o.Store, fence: fence, item: it.ID, attempt: a.N, log: log}

	// 1. The local check.
	local, err := h.verifyLocal(ctx, it, tmpl, events, ws, base, log)
	if err != nil {
		// Broken infrastructure, not a verdict: the item stays verifying and the task is retried.
		return fmt.Errorf("worker: verify %s attempt %d: %w", it.ID, a.N, err)
	}
	d := withActor(local.Decision, workitems.ActorVerifierName)

	// 2. Delivery of a local close.
	var res delivery.Result
	if h.o.Deliverer != nil && d.Outcome == workitems.OutcomeClose {
		var delivered *itemstore.LastDelivered // what the template's ticks delivered as a patch last
		if !tmpl.Deliver.Mode.NeedsForge() {
			if delivered, err = h.o.Store.LastDelivered(ctx, it.Template); err != nil {
				return fmt.Errorf("worker: deliver %s attempt %d: %w", it.ID, a.N, err)
			}
		}
		res, err = h.o.Deliverer.Deliver(ctx, delivery.Request{Template: tmpl, Item: it, Attempt: a.N, Workspace: ws,
			GitDir: proc.WorkspaceGitDir(ws), Base: base, Decision: d, Verdict: &local.Verdict, Events: events,
			NetworkRefused: h.refusedOf(ctx, it.ID, a.N, log), Delivered: delivered})
		if err != nil {
			// Like a verify error: the item stays verifying and the task is retried; a resumed
			// delivery reuses the commit it made.
			return fmt.Errorf("worker: deliver %s attempt %d: %w", it.ID, a.N, err)
		}
	}
	del := res.Delivery

	// 3. The policy on the delivery's facts, when they say something: a forge took the change
	// (CI, review and the pull request's state follow), or the delivery ended the item another
	// way (failed, declined, already there, unchanged).
	closed := d
	if judgedAfterPush(tmpl, del) {
		d = withActor(h.evidence().AfterPush(ctx, tmpl, it, a.N, closed, del, ""), workitems.ActorVerifierName)
	}

	// 4. Act at the forge.
	if h.merges(tmpl, d, del) {
		merged, refused, err := h.merge(ctx, tmpl, it, a.N, *del, events)
		if err != nil {
			return fmt.Errorf("worker: merge %s attempt %d: %w", it.ID, a.N, err)
		}
		if refused != "" {
			d = withActor(h.evidence().AfterPush(ctx, tmpl, it, a.N, closed, del, refused), workitems.ActorVerifierName)
		} else {
			del = &merged
		}
	}
	h.followup(ctx, tmpl, it, a.N, d, del, events)

	// 5. Record decision, delivery and patch in one transaction.
	it, err = h.o.Store.RecordDelivery(ctx, fence, d, &local.Verdict, del, res.Patch)
	if errors.Is(err, workitems.ErrLeaseLost) || errors.Is(err, workitems.ErrStale) {
		log.Warn("decision not recorded", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	h.recorded(ctx, it, a.N, del != nil, log)
	return nil
}

// verifyLocal runs the local check within the attempt's verify reserve; its commands report
// progress as the loop's do (fenced, as every event).
func (h *Handler) verifyLocal(ctx context.Context, it *workitems.Item, tmpl *config.Template, events EventSink,
	ws, base string, log *slog.Logger) (verify.Result, error) {
	a := it.Current()
	exit := workitems.Exit{Reason: workitems.ExitFailed, Message: "no exit recorded"}
	if a.Exit != nil {
		exit = *a.Exit
	}
	reserve := it.AttemptBudget(a.Condition).VerifyReserve.D()
	if t := tmpl.DoneCheck.Timeout.D(); t > 0 {
		reserve = t
	}
	if reserve <= 0 {
		reserve = 10 * time.Minute
	}
	vctx, cancel := context.WithTimeout(ctx, reserve)
	defer cancel()
	vctx = withCheckProgress(vctx, events, h.o.ProgressEvery)
	var refused []string
	if exit.Reason != workitems.ExitCompleted {
		// A failure after refused connections is most likely theirs: the verifier's why names
		// them and the setting that allows them.
		refused = h.refusedOf(ctx, it.ID, a.N, log)
	}
	return h.o.Verifier.Verify(vctx, verify.Request{Template: tmpl, Item: it, Attempt: a.N, Exit: exit, Workspace: ws,
		GitDir: proc.WorkspaceGitDir(ws), BaseCommit: base, NetworkRefused: refused,
		// A change delivered through a forge has its CI read on the pushed commit (a wait),
		// not on the local one, which no CI has seen.
		DeferCI: tmpl.Deliver.Mode.NeedsForge() && tmpl.DoneCheck.CI != nil})
}

// judgedAfterPush says whether a delivery's facts can change the local close, so that the
// policy decides on them: the delivery ended without the change going through (failed,
// declined, unchanged), or a forge took it and the template asks for CI on the pushed commit
// or a review. Otherwise (a patch, a local commit, a pull request nothing is asked of) the
// local close stands as the table decided it.
func judgedAfterPush(tmpl *config.Template, del *workitems.Delivery) bool {
	if del == nil {
		return false
	}
	switch del.Outcome {
	case workitems.DeliveryFailed, workitems.DeliveryDeclined, workitems.DeliveryUnchanged, workitems.DeliveryHeld, workitems.DeliveryObsolete:
		return true
	}
	return tmpl.Deliver.Mode.NeedsForge() && (tmpl.DoneCheck.CI != nil || tmpl.Deliver.Review != nil)
}

// merges says whether a decision asks for a merge: a close of an open pull request holding the
// pushed commit, with deliver.automerge.
func (h *Handler) merges(tmpl *config.Template, d workitems.Decision, del *workitems.Delivery) bool {
	return h.o.Deliverer != nil && d.Outcome == workitems.OutcomeClose && tmpl.Deliver.Automerge &&
		del != nil && del.PR != nil && del.PR.State == workitems.PROpen && del.PushedSHA != ""
}

// merge merges a close's pull request. refused is why the forge refused it (a fact for the
// policy); an error is transient trouble (the task is tried again).
func (h *Handler) merge(ctx context.Context, tmpl *config.Template, it *workitems.Item, n int, del workitems.Delivery,
	events EventSink) (merged workitems.Delivery, refused string, err error) {
	merged, err = h.o.Deliverer.Merge(ctx, delivery.Merge{Template: tmpl, Item: it, Attempt: n, Delivery: del, Events: events})
	var r *delivery.MergeRefusedError
	if errors.As(err, &r) {
		return del, r.Err.Error(), nil
	}
	return merged, "", err
}

// followup tells the pull request of an escalated item so (labelled and commented); a retry's
// next attempt updates the pull request itself.
func (h *Handler) followup(ctx context.Context, tmpl *config.Template, it *workitems.Item, n int, d workitems.Decision,
	del *workitems.Delivery, events EventSink) {
	if h.o.Deliverer == nil || d.Outcome != workitems.OutcomeEscalate {
		return
	}
	if del == nil {
		del = it.Delivery
	}
	if del == nil {
		return
	}
	h.o.Deliverer.Followup(ctx, delivery.Followup{Template: tmpl, Item: it, Attempt: n, Decision: d, Delivery: *del, Events: events})
}

// precondition decides on a problem found before any evidence (rule: one of the table's
// precondition rows) with the policy.
func (h *Handler) precondition(ctx context.Context, it *workitems.Item, attempt int, rule workitems.RuleName, summary string) workitems.Decision {
	return h.o.Verifier.Judge(ctx, verify.Judgement{Template: h.templateOrName(it), Item: it, Attempt: attempt,
		Precondition: &verify.Precondition{Rule: rule, Summary: summary}})
}

// templateOrName is the item's template in the config in force, or a stand-in with its name.
func (h *Handler) templateOrName(it *workitems.Item) *config.Template {
	if t, ok := h.config().ItemTemplate(it); ok {
		return t
	}
	return &config.Template{Name: it.Template}
}

// evidence is the after-push stage: the wired one, or, for a handler without forges, the policy
// on the delivery's facts alone.
func (h *Handler) evidence() Evidence {
	if h.o.Evidence != nil {
		return h.o.Evidence
	}
	return deliveryFactsOnly{h.o.Verifier}
}

// deliveryFactsOnly is the after-push stage of a handler wired without one (no forge to read):
// the table decides on the delivery's facts, with no CI or review evidence.
type deliveryFactsOnly struct{ v Verifier }

func (e deliveryFactsOnly) AfterPush(ctx context.Context, tmpl *config.Template, it *workitems.Item, n int,
	local workitems.Decision, del *workitems.Delivery, mergeRefused string) workitems.Decision {
	return e.v.Judge(ctx, verify.Judgement{Template: tmpl, Item: it, Attempt: n, Local: &local, Delivery: del, MergeRefused: mergeRefused})
}

func (deliveryFactsOnly) WakeFacts(_ context.Context, _ *config.Template, it *workitems.Item) (verify.Judgement, error) {
	return verify.Judgement{}, fmt.Errorf("worker: wake of %s: no evidence reader wired", it.ID)
}

func (e deliveryFactsOnly) Decide(ctx context.Context, _ *config.Template, jd verify.Judgement) workitems.Decision {
	return e.v.Judge(ctx, jd)
}

func withActor(d workitems.Decision, actor string) workitems.Decision {
	if d.Actor == "" {
		d.Actor = actor
	}
	return d
}

// ProcessWake is the asynq handler of wake tasks: it judges a waiting item on its evidence
// as it is now, acts, and records the decision. It holds the worker for a few forge reads, never
// for the wait itself.
func (h *Handler) ProcessWake(ctx context.Context, t *asynq.Task) error {
	var p workitems.WakePayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Item == "" || p.Seq < 1 {
		return fmt.Errorf("worker: wake payload %q is not {item, seq, by}: %w", shorten.Clip(string(t.Payload()), 200), asynq.SkipRetry)
	}
	key := fmt.Sprintf("%s/wake-%d", p.Item, p.Seq)
	h.track(key, 1)
	defer h.track(key, -1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.abandon, cancel)()
	return h.Wake(ctx, p)
}

// Wake takes one wake of a waiting item down the pipeline's second half: the evidence read
// once and judged, act, record (the body of ProcessWake).
func (h *Handler) Wake(ctx context.Context, p workitems.WakePayload) error {
	log := h.o.Logger.With("item", p.Item, "wait", p.Seq, "by", p.By)
	it, err := h.o.Store.Get(ctx, p.Item)
	if errors.Is(err, workitems.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if it.State != workitems.StateWaiting || it.Wait == nil || it.Wait.Seq != p.Seq {
		log.Debug("wake dropped: the wait has ended", "state", it.State)
		return nil
	}
	n := it.Wait.Attempt
	events := &storeSink{store: h.o.Store, item: it.ID, attempt: n, log: log}

	// 3. The policy on the evidence as it is now (or on a precondition: the template is gone).
	tmpl, ok := h.config().ItemTemplate(it)
	var d workitems.Decision
	var del *workitems.Delivery
	var facts verify.Judgement
	if !ok {
		tmpl = &config.Template{Name: it.Template}
		d = h.precondition(ctx, it, n, workitems.ConfigTemplateRemoved.Rule(),
			fmt.Sprintf("template %q is no longer configured (config %s); the item was waiting for %s", it.Template, h.config().Version(), it.Wait))
	} else {
		if facts, err = h.evidence().WakeFacts(ctx, tmpl, it); err != nil {
			return fmt.Errorf("worker: judge waiting %s: %w", it.ID, err)
		}
		d, del = h.evidence().Decide(ctx, tmpl, facts), facts.Delivery
	}
	d = withActor(d, workitems.ActorVerifierName)
	if del != nil && len(del.Checks) > 0 {
		events.Emit(ctx, workitems.Event{Type: workitems.EventDelivery, Message: fmt.Sprintf("CI on %s: %s (%s)", shorten.SHA(del.PushedSHA), d.Outcome, d.Rule),
			Data: map[string]string{"step": string(workitems.StepCI), "sha": del.PushedSHA, "outcome": string(d.Outcome), "rule": string(d.Rule)}})
	}

	// 4. Act at the forge. A draft waiting for green CI becomes ready; a refused merge is one
	// more fact: the same facts, decided again.
	if del != nil && h.o.Deliverer != nil && tmpl.Deliver.DraftUntil == workitems.DraftUntilCIGreen && facts.CI != nil && facts.CI.Green() {
		ready, err := h.o.Deliverer.Ready(ctx, delivery.Ready{Template: tmpl, Item: it, Attempt: n, Delivery: *del, Events: events,
			Why: fmt.Sprintf("the required CI checks passed on %s", shorten.SHA(del.PushedSHA))})
		if err != nil {
			return fmt.Errorf("worker: mark the pull request of %s ready: %w", it.ID, err)
		}
		del = &ready
		facts.Delivery = del
	}
	if h.merges(tmpl, d, del) {
		merged, refused, err := h.merge(ctx, tmpl, it, n, *del, events)
		if err != nil {
			return fmt.Errorf("worker: merge waiting %s: %w", it.ID, err)
		}
		if refused != "" {
			facts.MergeRefused = refused
			d = withActor(h.evidence().Decide(ctx, tmpl, facts), workitems.ActorVerifierName)
		} else {
			del = &merged
		}
	}
	h.followup(ctx, tmpl, it, n, d, del, events)
	if del != nil && del.PR != nil && del.PR.State != workitems.PROpen && h.o.Deliverer != nil {
		if err := h.o.Deliverer.Cleanup(ctx, delivery.Cleanup{Template: tmpl, Item: it, Attempt: n, Delivery: *del, Events: events}); err != nil {
			log.Warn("the branch of an ended pull request was not cleaned up", "err", err)
		}
	}

	// 5. Record.
	w := *it.Wait
	it, err = h.o.Store.Wake(ctx, it.ID, p.Seq, p.By, d, del)
	if errors.Is(err, itemstore.ErrWaitEnded) || errors.Is(err, workitems.ErrInvalidTransition) {
		log.Info("wake not recorded: the wait ended meanwhile", "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if o, ok := h.o.Observer.(wakeObserver); ok {
		o.Woken(w.Kind, p.By, h.o.Clock.Now().Sub(w.Since))
	}
	h.recorded(ctx, it, n, del != nil && del.Outcome == workitems.DeliveryMerged, log)
	return nil
}

// wakeObserver is the metrics' side of wakes: how long an item waited, for what, and what woke
// it (metrics.Metrics implements it).
type wakeObserver interface {
	Woken(kind workitems.WaitKind, by workitems.WakeReason, waited time.Duration)
}

// recorded reports a recorded decision (metrics, log) and enqueues a retry's next attempt.
// delivered says the delivery record is new (counted once: at the push, or a merge at a wake).
func (h *Handler) recorded(ctx context.Context, it *workitems.Item, n int, delivered bool, log *slog.Logger) {
	last := it.Decisions[len(it.Decisions)-1]
	h.o.Observer.Decision(it.Template, last.Kind(), last.Outcome, last.Rule, it.ID)
	if it.Delivery != nil && it.Delivery.Attempt == n && delivered {
		h.o.Observer.Delivery(it.Template, it.Delivery.Outcome, it.ID)
		log.Info("decision", "outcome", last.Outcome, "rule", last.Rule, "state", it.State,
			"delivery", it.Delivery.Outcome, "commit", it.Delivery.Commit)
	} else {
		log.Info("decision", "outcome", last.Outcome, "rule", last.Rule, "state", it.State)
	}
	if it.State == workitems.StateRetryWait && h.o.Enqueuer != nil {
		if err := h.o.Enqueuer.EnqueueAttempt(ctx, it); err != nil {
			log.Warn("enqueue of the retry failed; reconcile will repair it", "err", err)
		}
	}
}
