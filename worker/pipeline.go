package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/lib/shorten"
	"outerloop/workitems"
)

// The pipeline after the inner loop, driven here and nowhere else:
//
//	local done check (Verifier.Verify) → delivery (commit, push, pull request: facts) →
//	the one policy on those facts (Verifier.AfterPush) → act (merge, label) → record
//
// and, for an item that waits, the same from a wake task: its evidence read once and judged
// (Evidence.Judge) → act → record (Store.Wake). No stage calls back into another.

// AfterPushInput is what the policy decides on after a delivery.
type AfterPushInput struct {
	Template *workitems.Template
	Item     *workitems.Item
	Attempt  int
	// Local is the local evidence's close that let the change be delivered.
	Local    workitems.Decision
	Delivery *workitems.Delivery
	// MergeRefused is why the forge refused to merge a close (automerge).
	MergeRefused string
	// Precondition, instead of a delivery, is a problem the worker found before any evidence
	// (a lost workspace, a removed or incompatible template): the policy's first rows decide it.
	Precondition *Precondition
}

// Precondition is a problem found before any evidence could be read; Rule names its row of the
// policy (workitems.RuleWorkspaceLost, RuleTemplateRemoved, RuleTemplateIncompatible).
type Precondition struct {
	Rule    workitems.RuleName
	Summary string
}

// templateOrName is the item's template in the config in force, or a stand-in with its name.
func (h *Handler) templateOrName(it *workitems.Item) *workitems.Template {
	if t, ok := h.config().ItemTemplate(it); ok {
		return t
	}
	return &workitems.Template{Name: it.Template}
}

// Evidence reads a waiting item's evidence — CI on its pushed commit, its pull request's state
// and reviews — once, without waiting, and decides with the one policy (waits.Judge through an
// adapter). mergeRefused, when set, is why the forge refused the merge of a close.
type Evidence interface {
	Judge(ctx context.Context, in JudgeInput) (JudgeResult, error)
}

// JudgeInput is a waiting item to judge.
type JudgeInput struct {
	Template     *workitems.Template
	Item         *workitems.Item
	MergeRefused string
}

// JudgeResult is the decision with the delivery record as the evidence left it (the pull
// request's state, the checks read).
type JudgeResult struct {
	Decision workitems.Decision
	Delivery *workitems.Delivery
}

// afterPush decides on a delivery with the policy, when it has something to say: a forge took
// the change (CI, review and the pull request's state follow), or the delivery's facts end the
// item another way (failed, declined, already there, unchanged).
func (h *Handler) afterPush(ctx context.Context, tmpl *workitems.Template, it *workitems.Item, n int,
	local workitems.Decision, del *workitems.Delivery) workitems.Decision {
	if del == nil {
		return local
	}
	switch {
	case tmpl.Deliver.Mode.NeedsForge(), del.Outcome == workitems.DeliveryFailed, del.Outcome == workitems.DeliveryDeclined,
		del.Outcome == workitems.DeliveryUnchanged:
	default:
		return local
	}
	d := h.o.Verifier.AfterPush(ctx, AfterPushInput{Template: tmpl, Item: it, Attempt: n, Local: local, Delivery: del})
	if d.Actor == "" {
		d.Actor = workitems.ActorVerifierName
	}
	return d
}

// act does what a decision asks of the forge before it is recorded: a close with automerge
// merges (a refusal is a fact the policy decides on again, through redo), and an escalation of
// an item with a pull request is told to it (labelled and commented). It returns the decision and delivery
// to record; an error is transient trouble (the task is tried again).
func (h *Handler) act(ctx context.Context, tmpl *workitems.Template, it *workitems.Item, n int, d workitems.Decision,
	del *workitems.Delivery, events EventSink, redo func(mergeRefused string) (workitems.Decision, error)) (workitems.Decision, *workitems.Delivery, error) {
	if h.o.Deliverer == nil {
		return d, del, nil
	}
	if d.Outcome == workitems.OutcomeClose && tmpl.Deliver.Automerge && del != nil && del.PR != nil &&
		del.PR.State == workitems.PROpen && del.PushedSHA != "" {
		merged, err := h.o.Deliverer.Merge(ctx, MergeInput{Template: tmpl, Item: it, Attempt: n, Delivery: *del, Events: events})
		var refused *MergeRefusedError
		switch {
		case errors.As(err, &refused):
			if d, err = redo(refused.Reason); err != nil {
				return d, del, err
			}
		case err != nil:
			return d, del, err
		default:
			del = &merged
		}
	}
	if d.Outcome == workitems.OutcomeEscalate { // a retry's next attempt updates the pull request itself
		latest := del
		if latest == nil {
			latest = it.Delivery
		}
		if latest != nil {
			h.o.Deliverer.Followup(ctx, FollowupInput{Template: tmpl, Item: it, Attempt: n, Decision: d, Delivery: *latest, Events: events})
		}
	}
	return d, del, nil
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

// Wake judges and records one wake of a waiting item (the body of ProcessWake).
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
	if h.o.Evidence == nil {
		return fmt.Errorf("worker: wake of %s: no evidence reader wired", p.Item)
	}
	n := it.Wait.Attempt
	events := &storeSink{store: h.o.Store, item: it.ID, attempt: n, log: log}
	tmpl, ok := h.config().ItemTemplate(it)
	var res JudgeResult
	if !ok {
		res.Decision = h.o.Verifier.AfterPush(ctx, AfterPushInput{Template: &workitems.Template{Name: it.Template}, Item: it, Attempt: n,
			Precondition: &Precondition{Rule: workitems.ConfigTemplateRemoved.Rule(),
				Summary: fmt.Sprintf("template %q is no longer configured (config %s); the item was waiting for %s", it.Template, h.config().Version(), it.Wait)}})
		tmpl = &workitems.Template{Name: it.Template}
	} else if res, err = h.o.Evidence.Judge(ctx, JudgeInput{Template: tmpl, Item: it}); err != nil {
		return fmt.Errorf("worker: judge waiting %s: %w", it.ID, err)
	}
	d, del := res.Decision, res.Delivery
	if d.Actor == "" {
		d.Actor = workitems.ActorVerifierName
	}
	if del != nil && len(del.Checks) > 0 {
		events.Emit(ctx, workitems.Event{Type: workitems.EventDelivery, Message: fmt.Sprintf("CI on %s: %s (%s)", shorten.SHA(del.PushedSHA), d.Outcome, d.Rule),
			Data: map[string]string{"step": string(workitems.StepCI), "sha": del.PushedSHA, "outcome": string(d.Outcome), "rule": string(d.Rule)}})
	}
	d, del, err = h.act(ctx, tmpl, it, n, d, del, events, func(refused string) (workitems.Decision, error) {
		r, err := h.o.Evidence.Judge(ctx, JudgeInput{Template: tmpl, Item: it, MergeRefused: refused})
		return r.Decision, err
	})
	if err != nil {
		return fmt.Errorf("worker: act on waiting %s: %w", it.ID, err)
	}
	w := *it.Wait
	it, err = h.o.Store.Wake(ctx, it.ID, p.Seq, p.By, d, del)
	if errors.Is(err, workitems.ErrWaitEnded) || errors.Is(err, workitems.ErrInvalidTransition) {
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
	h.o.Observer.Decision(it.Template, workitems.ActorVerifier, last.Outcome, last.Rule, it.ID)
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
