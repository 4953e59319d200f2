package verify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The facts after the push: the worker's pipeline (and the wake of a waiting item) fills them
// in; the same table decides on them as on the local evidence. Nothing here calls a forge:
// the evidence is read by the caller (CI through the verifier's CI sources, reviews through a
// ReviewSource) and handed over.

// ReviewEvidence is what a pull request's reviews say about the pushed commit.
type ReviewEvidence struct {
	Required  int      // approvals that close (deliver.review.required_approvals)
	Approvals []string // accounts whose latest review approves the pushed commit (never outerloop's own)
	// ChangesRequested are the latest reviews that request changes, submitted after the push.
	ChangesRequested []ReviewNote
	Rounds           int // retries reviews have started so far
	MaxRounds        int
	OnChanges        workitems.OnChangesRequested
	Deadline         time.Time // until when a review is waited for
	PR               int
	URL              string
	// NotCounted are the reviewers whose reviews did not count because they lack write access
	// to the item's repository ("user (read access)"); the decision's reasons name them.
	NotCounted []string
}

// ReviewNote is one review that requests changes, with its inline comments.
type ReviewNote struct {
	User     string
	Body     string
	URL      string
	Comments []ReviewComment
}

// ReviewComment is one inline comment of a review.
type ReviewComment struct {
	Path string
	Line int
	Body string
}

// Limits of a review's text in the next attempt's input.
const (
	reviewInputMarker           = "A reviewer requested changes on the pull request"
	maxReviewInput              = 8 << 10
	maxReviewCommentsInInput    = 40
	maxReviewBodyInInput        = 2 << 10
	maxReviewCommentBodyInInput = 600
)

// Precondition is a problem found before any evidence could be read (the worker's resume, a
// config reload): the table's first rows decide on it.
type Precondition struct {
	Rule    workitems.RuleName // a precondition row's: workitems.RuleWorkspaceLost, workitems.RuleTemplateRemoved, workitems.RuleTemplateIncompatible
	Summary string
}

// preconditionRules are the rows for problems found before any evidence.
func preconditionRules() []Rule {
	row := func(name workitems.RuleName, when string, out workitems.Outcome) Rule {
		r := Rule{Name: name, When: when, Outcome: out,
			Match:  func(f *Facts) bool { return f.Precondition != nil && f.Precondition.Rule == name },
			Reason: func(f *Facts) string { return f.Precondition.Summary }}
		if out == workitems.OutcomeRetry {
			r.Next = func(f *Facts, c workitems.Condition) workitems.Condition {
				c.CleanCheckout = true
				c.Input = strings.TrimSpace(c.Input + "\n\n" + f.Precondition.Summary)
				return c
			}
		}
		return r
	}
	return []Rule{
		row(workitems.RuleTemplateRemoved, "the item's template was removed from the config (found at a resume or reload)", workitems.OutcomeEscalate),
		row(workitems.RuleTemplateIncompatible, "the item's template changed incompatibly with its pinned version (found at a resume or reload)", workitems.OutcomeEscalate),
		row(workitems.RuleWorkspaceLost, "a resumed attempt's workspace could not be restored for verification: the next attempt starts from a clean checkout", workitems.OutcomeRetry),
	}
}

// deliveryRules are the rows on the delivery's facts and the pull request's state, before any
// CI or review: they come right after the exit rules.
func deliveryRules() []Rule {
	del := func(f *Facts) *workitems.Delivery { return f.Delivery }
	failed := func(f *Facts) bool { return del(f) != nil && del(f).Outcome == workitems.DeliveryFailed }
	prState := func(f *Facts, s workitems.PRState) bool {
		return del(f) != nil && del(f).PR != nil && del(f).PR.State == s && f.Local != nil
	}
	return []Rule{
		{Name: workitems.RuleBaseMoved, When: "the base branch moved since the attempt started and the change conflicts with it",
			Outcome: workitems.OutcomeRetry,
			Match:   func(f *Facts) bool { return failed(f) && del(f).ErrorClass == workitems.ClassConflict },
			Reason: func(f *Facts) string {
				return "base_moved: " + del(f).Error + ": the next attempt starts from the new base"
			},
			Next: func(f *Facts, c workitems.Condition) workitems.Condition {
				c.Input = strings.TrimSpace(c.Input + "\n\nThe base branch moved and the previous change conflicts with it (" +
					shorten.Clip(del(f).Error, 300) + "); make the change again on the new base.")
				return c
			}},
		{Name: workitems.RuleDeliveryFailed, When: "the change could not be delivered (not transient: a protected branch, a missing token, a forge that refuses)",
			Outcome: workitems.OutcomeEscalate,
			Match:   failed,
			Reason: func(f *Facts) string {
				return fmt.Sprintf("delivery failed (%s): %s", del(f).ErrorClass, del(f).Error)
			}},
		{Name: workitems.RuleDeclined, When: "a person closed a pull request with this same tree unmerged before: nothing is pushed",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				return del(f) != nil && del(f).Outcome == workitems.DeliveryDeclined && f.Wait == nil
			},
			Reason: func(f *Facts) string {
				return fmt.Sprintf("declined: a person closed pull request #%d with this same tree unmerged; no new pull request", del(f).PR.Number)
			}},
		{Name: workitems.RuleAlreadyDelivered, When: "the open pull request (or the template's last delivered patch) already holds this tree, made by another item: nothing is pushed",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				return del(f) != nil && del(f).Outcome == workitems.DeliveryUnchanged && del(f).SameAs != nil
			},
			Reason: func(f *Facts) string {
				if pr := del(f).SameAs.PR; pr != nil {
					return fmt.Sprintf("the open pull request #%d (%s) already holds this change: nothing pushed", pr.Number, pr.URL)
				}
				return "the result equals the patch item " + del(f).SameAs.Item + " delivered: nothing new"
			}},
		{Name: workitems.RuleHeldByPerson, When: "a scheduled tick found its branch with commits outerloop did not push (deliver.on_foreign_commits stop): nothing is pushed, the pull request is told once, the next tick finds it held too",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				return held(f) && f.Item != nil && f.Item.Origin.Kind == workitems.OriginCron
			},
			Reason: heldReason},
		{Name: workitems.RuleHeldByPersonEscalate, When: "the item's branch has commits outerloop did not push (deliver.on_foreign_commits stop, or a change that conflicts with them): nothing is pushed; a person hands it back (`/outerloop rebase`, or deleting the branch) or takes it over",
			Outcome: workitems.OutcomeEscalate,
			Match:   held,
			Reason:  heldReason},
		{Name: workitems.RuleObsolete, When: "the attempt found nothing to change, or the base already has the change, and the branch's open pull request was closed as no longer needed (only commented when a person committed to it)",
			Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool {
				return del(f) != nil && del(f).Outcome == workitems.DeliveryObsolete
			},
			Reason: func(f *Facts) string {
				d := del(f)
				if d.PR == nil {
					return "obsolete: nothing to change"
				}
				if d.Held != nil {
					return fmt.Sprintf("obsolete: nothing to change; pull request #%d stays open, held: %s", d.PR.Number, d.Held)
				}
				return fmt.Sprintf("obsolete: nothing to change; pull request #%d was closed as no longer needed", d.PR.Number)
			}},
		{Name: workitems.RulePREndRefused, When: "the pull request was merged or closed while the item waited, by an account without write access to the item's repository (or one the forge did not name): not a person's decision the item takes",
			Outcome: workitems.OutcomeEscalate,
			Match: func(f *Facts) bool {
				return f.PREndRefused != "" && (prState(f, workitems.PRMerged) || prState(f, workitems.PRClosed))
			},
			Reason: func(f *Facts) string {
				return fmt.Sprintf("pull request #%d was %s, but %s: a person with write access decides", del(f).PR.Number, del(f).PR.State, f.PREndRefused)
			}},
		{Name: workitems.RulePRMerged, When: "a person merged the pull request while the item waited", Outcome: workitems.OutcomeClose,
			Match:  func(f *Facts) bool { return prState(f, workitems.PRMerged) },
			Reason: func(f *Facts) string { return fmt.Sprintf("pull request #%d was merged by a person", del(f).PR.Number) }},
		{Name: workitems.RulePRClosed, When: "a person closed the pull request unmerged while the item waited: the item ends as declined", Outcome: workitems.OutcomeClose,
			Match: func(f *Facts) bool { return prState(f, workitems.PRClosed) },
			Reason: func(f *Facts) string {
				return fmt.Sprintf("declined: pull request #%d was closed unmerged by a person", del(f).PR.Number)
			}},
		{Name: workitems.RuleAutomergeRefused, When: "automerge was refused (the head moved, conflicts, a required check or approval the forge wants)",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return f.MergeRefused != "" },
			Reason:  func(f *Facts) string { return "automerge refused: " + f.MergeRefused }},
	}
}

func held(f *Facts) bool {
	return f.Delivery != nil && f.Delivery.Outcome == workitems.DeliveryHeld && f.Delivery.Held != nil
}

func heldReason(f *Facts) string {
	d := f.Delivery
	s := "held: " + d.Held.String() + " to " + d.Branch + ": outerloop pushed nothing"
	if d.Error != "" {
		s += " (" + d.Error + ")"
	}
	if d.PR != nil {
		s += fmt.Sprintf("; hand it back with `/outerloop rebase` on #%d or by deleting the branch", d.PR.Number)
	}
	return s
}

// ciRerunRule waits for CI checks that failed for infrastructure reasons and that the read of
// this wake asked to run again: their new results decide, not the failures.
func ciRerunRule() Rule {
	return Rule{Name: workitems.RuleCIRerun, When: "CI checks on the pushed commit failed for infrastructure reasons and were just asked to run again (at most retry.infra_retries times)",
		Outcome: workitems.OutcomeWait,
		Match:   func(f *Facts) bool { return f.Wait != nil && f.CIReruns > f.Wait.InfraReruns },
		Reason: func(f *Facts) string {
			limit := 0
			if f.Template != nil {
				limit = f.Template.Retry.InfraRetries
			}
			return fmt.Sprintf("re-running CI checks that failed for infrastructure reasons (%d of %d): %s", f.CIReruns, limit, InfraProblem(f.CI))
		},
		Wait: func(f *Facts) workitems.WaitPlan {
			return workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: f.Wait.Deadline, InfraReruns: f.CIReruns}
		}}
}

// ciPendingRule waits for CI that has not answered before its deadline (ci_missing decides
// after it).
func ciPendingRule() Rule {
	return Rule{Name: workitems.RuleCIPending, When: "required CI checks on the pushed commit have no result yet and the wait (done_check.ci.wait) has not run out",
		Outcome: workitems.OutcomeWait,
		Match: func(f *Facts) bool {
			return f.CI != nil && len(f.CI.Missing) > 0 && f.Now.Before(f.CIDeadline) && len(f.CI.failed()) == 0 &&
				len(f.CI.withState(CIActionRequired)) == 0
		},
		Reason: func(f *Facts) string {
			return fmt.Sprintf("waiting for CI on %s: %s (until %s)", shorten.SHA(f.CI.SHA), strings.Join(f.CI.Missing, ", "), f.CIDeadline.UTC().Format(time.RFC3339))
		},
		Wait: func(f *Facts) workitems.WaitPlan {
			return workitems.WaitPlan{Kind: workitems.WaitCI, Deadline: f.CIDeadline}
		}}
}

// reviewRules decide on the pull request's review once everything else is green.
func reviewRules() []Rule {
	rv := func(f *Facts) *ReviewEvidence { return f.Review }
	changes := func(f *Facts) bool { return rv(f) != nil && len(rv(f).ChangesRequested) > 0 }
	return []Rule{
		{Name: workitems.RuleChangesRequestedEscalate, When: "a review requests changes and deliver.review.on_changes_requested is escalate",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return changes(f) && rv(f).OnChanges == workitems.ChangesEscalate },
			Reason:  func(f *Facts) string { return "a reviewer requested changes: " + reviewHeadline(rv(f)) }},
		{Name: workitems.RuleReviewRoundsExhausted, When: "a review requests changes and deliver.review.max_rounds review retries were spent",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return changes(f) && rv(f).Rounds >= rv(f).MaxRounds },
			Reason: func(f *Facts) string {
				return fmt.Sprintf("a reviewer requested changes again after %d review rounds (max_rounds %d): %s", rv(f).Rounds, rv(f).MaxRounds, reviewHeadline(rv(f)))
			}},
		{Name: workitems.RuleChangesRequested, When: "a review of the pushed commit requests changes: the next attempt gets the review's body and inline comments and pushes to the same pull request",
			Outcome: workitems.OutcomeRetry,
			Match:   changes,
			Reason:  func(f *Facts) string { return "a reviewer requested changes: " + reviewHeadline(rv(f)) },
			Next:    withReviewInput},
		{Name: workitems.RuleReviewPending, When: "CI is green (or not asked for) and the pull request has fewer approvals than deliver.review.required_approvals, before the review wait runs out",
			Outcome: workitems.OutcomeWait,
			Match: func(f *Facts) bool {
				return rv(f) != nil && len(rv(f).Approvals) < rv(f).Required && f.Now.Before(rv(f).Deadline) && allGreen(f)
			},
			Reason: func(f *Facts) string {
				return fmt.Sprintf("waiting for a review of #%d: %d of %d approvals", rv(f).PR, len(rv(f).Approvals), rv(f).Required)
			},
			Wait: func(f *Facts) workitems.WaitPlan {
				return workitems.WaitPlan{Kind: workitems.WaitReview, Deadline: rv(f).Deadline, PollIn: time.Minute}
			}},
		{Name: workitems.RuleReviewMissing, When: "the review wait (deliver.review.wait) ran out without the approvals required",
			Outcome: workitems.OutcomeEscalate,
			Match:   func(f *Facts) bool { return rv(f) != nil && len(rv(f).Approvals) < rv(f).Required && allGreen(f) },
			Reason: func(f *Facts) string {
				return fmt.Sprintf("no review after waiting: %d of %d approvals on #%d", len(rv(f).Approvals), rv(f).Required, rv(f).PR)
			}},
	}
}

func reviewHeadline(r *ReviewEvidence) string {
	var users []string
	n := 0
	for _, c := range r.ChangesRequested {
		users = append(users, c.User)
		n += len(c.Comments)
	}
	first := ""
	if len(r.ChangesRequested) > 0 {
		first = shorten.Clip(r.ChangesRequested[0].Body, 160)
	}
	return fmt.Sprintf("%s on #%d (%d inline comments): %s", strings.Join(users, ", "), r.PR, n, first)
}

// withReviewInput is the next attempt's condition after a review that requests changes: the
// review's body and every inline comment with its file and line, after whatever a person said.
func withReviewInput(f *Facts, c workitems.Condition) workitems.Condition {
	human := c.Input
	if i := strings.Index(human, reviewInputMarker); i >= 0 {
		human = strings.TrimSpace(human[:i])
	}
	if i := strings.Index(human, failureMarker); i >= 0 {
		human = strings.TrimSpace(human[:i])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d; address every point, keep the rest of the change, and do not reply to the reviewer:\n", reviewInputMarker, f.Review.PR)
	comments := 0
	for _, r := range f.Review.ChangesRequested {
		fmt.Fprintf(&b, "\nReview by %s:\n%s\n", r.User, clipKeep(strings.TrimSpace(r.Body), maxReviewBodyInInput))
		for _, cm := range r.Comments {
			if comments == maxReviewCommentsInInput {
				fmt.Fprintf(&b, "(more inline comments on the pull request)\n")
				break
			}
			comments++
			loc := cm.Path
			if cm.Line > 0 {
				loc = fmt.Sprintf("%s:%d", cm.Path, cm.Line)
			}
			fmt.Fprintf(&b, "- %s: %s\n", loc, clipKeep(strings.TrimSpace(cm.Body), maxReviewCommentBodyInInput))
		}
	}
	in := clipKeep(b.String(), maxReviewInput)
	if human != "" {
		in = human + "\n\n" + in
	}
	c.Input = proc.Redact(in)
	return c
}

// clipKeep cuts s to n bytes, keeping lines intact where it can, and says so.
func clipKeep(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := s[:n]
	if i := strings.LastIndexByte(cut, '\n'); i > n/2 {
		cut = cut[:i]
	}
	return cut + "\n(cut)"
}

// Judgement is what the pipeline hands the policy after the push, or at a wake.
type Judgement struct {
	Template *config.Template
	Item     *workitems.Item
	Attempt  int
	// Local is the local evidence's close that let the change be delivered (nil: there was
	// none, e.g. a precondition).
	Local        *workitems.Decision
	Delivery     *workitems.Delivery
	CI           *CIEvidence // nil: the template asks for no CI
	CIDeadline   time.Time
	Review       *ReviewEvidence // nil: the template asks for no review, or CI has not passed
	MergeRefused string
	// PREndRefused says why the pull request's merge or close is no authority over the item:
	// who merged or closed it lacks write access to the item's repository, or the forge did not
	// say who ("": it may end the item).
	PREndRefused string
	Wait         *workitems.Wait // the wait being woken (nil at push time)
	// CIReruns counts the re-runs of CI checks that failed for infrastructure reasons so far,
	// this read's included (Facts.CIReruns).
	CIReruns     int
	Precondition *Precondition
}

// Judge decides on the facts after the push with the one table (no evidence is read here).
func (v *Verifier) Judge(ctx context.Context, j Judgement) workitems.Decision {
	f := &Facts{Exit: workitems.Exit{Reason: workitems.ExitCompleted}, Attempt: j.Attempt, Item: j.Item, Template: j.Template,
		Now: v.clock.Now(), Local: j.Local, Delivery: j.Delivery, CI: j.CI, CIDeadline: j.CIDeadline, Review: j.Review,
		MergeRefused: j.MergeRefused, PREndRefused: j.PREndRefused, Wait: j.Wait, CIReruns: j.CIReruns, Precondition: j.Precondition}
	if j.Item != nil {
		for _, a := range j.Item.Attempts {
			if a.N == j.Attempt {
				f.Condition = a.Condition
			}
		}
	}
	d, _ := conclude(f)
	if j.Review != nil && len(j.Review.NotCounted) > 0 {
		d.Reasons = append(d.Reasons, "reviews not counted, their authors lack write access to the repository: "+strings.Join(j.Review.NotCounted, ", "))
	}
	if j.Local != nil && d.Outcome != workitems.OutcomeWait && j.Local.Rule != "" && d.Rule != j.Local.Rule {
		d.Reasons = append(d.Reasons, "the local check had passed ("+string(j.Local.Rule)+"): "+strings.Join(j.Local.Reasons, "; "))
	}
	v.logger.LogAttrs(ctx, slog.LevelInfo, "decision after the push",
		slog.String("template", templateName(j.Template)), slog.Int("attempt", j.Attempt),
		slog.String("outcome", string(d.Outcome)), slog.String("rule", string(d.Rule)))
	return d
}

func templateName(t *config.Template) string {
	if t == nil {
		return ""
	}
	return t.Name
}

// ReviewRounds counts the retries reviews have started on an item.
func ReviewRounds(it *workitems.Item) int {
	if it == nil {
		return 0
	}
	return len(slices.DeleteFunc(slices.Clone(it.Decisions), func(d workitems.Decision) bool {
		return d.Rule != workitems.RuleChangesRequested || d.Outcome != workitems.OutcomeRetry
	}))
}

// deliveredGreen says why a delivered change closes: its CI and review, as far as asked for.
func deliveredGreen(f *Facts) string {
	var parts []string
	if f.CI != nil {
		parts = append(parts, fmt.Sprintf("all %d required CI checks green on %s", len(f.CI.Required), shorten.SHA(f.CI.SHA)))
	}
	if f.Review != nil {
		parts = append(parts, fmt.Sprintf("approved by %s", strings.Join(f.Review.Approvals, ", ")))
	}
	if len(parts) == 0 {
		parts = append(parts, "delivered")
	}
	return strings.Join(parts, "; ")
}
