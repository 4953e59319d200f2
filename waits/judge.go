package waits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"outerloop/forge"
	"outerloop/verify"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Judge builds the facts a waiting item is decided on and has the one policy (verify) decide.
// It reads evidence once and never waits: CI on the pushed commit through the verifier's CI
// sources, the pull request's state and reviews through the forge.
type Judge struct {
	Verifier *verify.Verifier
	Forges   forge.Set
	Logger   *slog.Logger
	// Config is the config in force (waits.first_poll); nil: the defaults.
	Config func() *config.Config
}

// firstPoll is how long after a wait begins the poller first looks.
func (j *Judge) firstPoll() time.Duration {
	if j.Config != nil {
		if c := j.Config(); c != nil && c.Waits.FirstPoll > 0 {
			return c.Waits.FirstPoll.D()
		}
	}
	return workitems.DefaultFirstPoll
}

// AfterPush decides right after a delivery: nothing has been read yet, so CI the template asks
// for is pending until its deadline, and a review it asks for is still to come.
func (j *Judge) AfterPush(ctx context.Context, tmpl *config.Template, it *workitems.Item, n int,
	local workitems.Decision, del *workitems.Delivery, mergeRefused string) workitems.Decision {
	now := j.Verifier.Now()
	jd := verify.Judgement{Template: tmpl, Item: it, Attempt: n, Local: &local, Delivery: del, MergeRefused: mergeRefused}
	if pushedForReview(del) {
		if ci := tmpl.DoneCheck.CI; ci != nil {
			jd.CI = &verify.CIEvidence{Required: ci.Required, Missing: slices.Clone(ci.Required), SHA: del.PushedSHA}
			jd.CIDeadline = ciDeadline(del.At, now, ci, j.firstPoll())
		}
		if rv := tmpl.Deliver.Review; rv != nil && del.PR != nil {
			jd.Review = &verify.ReviewEvidence{Required: rv.RequiredApprovals, PR: del.PR.Number, URL: del.PR.URL,
				Rounds: verify.ReviewRounds(it), MaxRounds: rv.MaxRounds, OnChanges: rv.OnChangesRequested, Deadline: now.Add(rv.Wait.D())}
		}
	}
	d := j.Verifier.Judge(ctx, jd)
	return j.withWhere(d, tmpl, &local)
}

// pushedForReview: the delivery put a new commit on the forge (CI and review follow it).
func pushedForReview(del *workitems.Delivery) bool {
	if del == nil || del.PushedSHA == "" {
		return false
	}
	switch del.Outcome {
	case workitems.DeliveryPushed, workitems.DeliveryPROpened, workitems.DeliveryPRUpdated:
		return true
	}
	return false
}

// ciDeadline is until when CI on a commit pushed at pushed is waited for: done_check.ci.wait,
// and at least the first poll from now, so a wait of 0 still reads CI once (a push and a pull
// request that took longer than the first poll must not escalate ci_missing unread).
func ciDeadline(pushed, now time.Time, ci *config.CICheck, first time.Duration) time.Time {
	if pushed.IsZero() {
		pushed = now
	}
	dl := pushed.Add(ci.Wait.D())
	if soonest := now.Add(first); dl.Before(soonest) {
		dl = soonest
	}
	return dl
}

// withWhere adds to a wait decision where the evidence is (the forge and repository of the
// delivery), the local close that got the change pushed, and when to poll first.
func (j *Judge) withWhere(d workitems.Decision, tmpl *config.Template, local *workitems.Decision) workitems.Decision {
	if d.Wait == nil {
		return d
	}
	plan := *d.Wait
	if plan.PollIn <= 0 || plan.PollIn > j.firstPoll() {
		plan.PollIn = j.firstPoll()
	}
	plan.Forge, plan.Repo = tmpl.Deliver.Forge, tmpl.Deliver.Repo
	if local != nil {
		plan.LocalRule, plan.LocalSummary = local.Rule, firstOf(local.Reasons)
	}
	d.Wait = &plan
	return d
}

// Evidence is what a waiting item's evidence says now.
type Evidence struct {
	PR       *forge.PullRequest // nil: no pull request
	CI       *verify.CIEvidence // nil: no CI asked for
	Review   *verify.ReviewEvidence
	Reruns   int // infrastructure re-runs asked for so far (with this read)
	Delivery *workitems.Delivery
	// PREndRefused says why the pull request's merge or close does not end the item: who did it
	// has no write access to the item's repository, or the forge did not say who ("": it may).
	PREndRefused string
}

// Read reads a waiting item's evidence once. With rerun, CI checks that failed for
// infrastructure reasons are asked to run again (up to retry.infra_retries): only the wake that
// records does that, never the poller's look.
func (j *Judge) Read(ctx context.Context, tmpl *config.Template, it *workitems.Item, rerun bool) (Evidence, error) {
	w := it.Wait
	var ev Evidence
	if it.Delivery != nil {
		rec := *it.Delivery
		ev.Delivery = &rec
	}
	ev.Reruns = w.InfraReruns
	f, err := j.forge(w.Forge)
	if w.PR != 0 {
		if err != nil {
			return ev, err
		}
		if ev.PR, err = f.PullRequest(ctx, w.Repo, w.PR); err != nil {
			return ev, err
		}
		if ev.Delivery != nil && ev.Delivery.PR != nil {
			pr := *ev.Delivery.PR
			pr.State = ev.PR.State
			ev.Delivery.PR = &pr
			if ev.PR.State == workitems.PRMerged {
				ev.Delivery.MergeCommit = ev.PR.MergeCommitSHA
				ev.Delivery.Outcome = workitems.DeliveryMerged
			}
			if ev.PR.State == workitems.PRClosed {
				ev.Delivery.Outcome = workitems.DeliveryDeclined
			}
		}
		if ev.PR.State != workitems.PROpen {
			// Merged or closed by a person with write access: nothing else matters. By anyone
			// else it is not theirs to end (the policy escalates).
			if ev.PREndRefused, err = j.endRefused(ctx, f, w.Repo, ev.PR); err != nil {
				return ev, err
			}
			if ev.PREndRefused != "" {
				j.log().Warn("waits: a pull request's end refused as the end of its item", "item", it.ID, "repo", w.Repo,
					"pr", w.PR, "state", ev.PR.State, "why", ev.PREndRefused)
			}
			return ev, nil
		}
	}
	if ci := tmpl.DoneCheck.CI; ci != nil && w.SHA != "" {
		if ev.CI, err = j.Verifier.ReadCI(ctx, ci, w.SHA); err != nil {
			return ev, err
		}
		if rerun && verify.InfraProblem(ev.CI) != "" && ev.Reruns < tmpl.Retry.InfraRetries && j.Verifier.RerunInfraFailures(ctx, ci, ev.CI) {
			ev.Reruns++
		}
		if ev.Delivery != nil {
			ev.Delivery.Checks = checkResults(ev.CI)
		}
	}
	if rv := tmpl.Deliver.Review; rv != nil && w.PR != 0 && (ev.CI == nil || ev.CI.Green()) {
		if ev.Review, err = j.readReview(ctx, f, tmpl, it, rv); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

// endRefused says why the merge or close of pull request pr of repo is not an end of its item:
// the account that did it has no write access to repo, or the forge did not name it. It is ""
// when outerloop's own account or one with write access did it.
func (j *Judge) endRefused(ctx context.Context, f ReviewForge, repo string, pr *forge.PullRequest) (string, error) {
	by, did := pr.ClosedBy, "closed"
	if pr.State == workitems.PRMerged {
		by, did = pr.MergedBy, "merged"
	}
	if by == "" {
		return fmt.Sprintf("the forge did not say who %s it", did), nil
	}
	self, err := f.Self(ctx)
	if err != nil && workitems.ClassOf(err) == workitems.ClassTransient {
		return "", err
	}
	if err == nil && by == self {
		return "", nil // outerloop's own merge (automerge) or close
	}
	perm, err := permission(ctx, f, repo, by)
	if err != nil {
		return "", err
	}
	if perm.CanWrite() {
		return "", nil
	}
	return fmt.Sprintf("%s, who %s it, has %s access to %s", by, did, perm, repo), nil
}

// permission is user's permission on repo; only transient trouble is an error (anything else
// the forge refuses is no permission).
func permission(ctx context.Context, f permissionReader, repo, user string) (forge.Permission, error) {
	perm, err := f.Permission(ctx, repo, user)
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return forge.PermNone, err
		}
		return forge.PermNone, nil
	}
	return perm, nil
}

// readReview reads the pull request's reviews: each account's latest review submitted after the
// commit was pushed, never outerloop's own account, and only from accounts with write access to
// the item's repository (the others are NotCounted).
func (j *Judge) readReview(ctx context.Context, f ReviewForge, tmpl *config.Template, it *workitems.Item, rv *config.Review) (*verify.ReviewEvidence, error) {
	w := it.Wait
	self, err := f.Self(ctx)
	if err != nil {
		return nil, err
	}
	reviews, err := f.Reviews(ctx, w.Repo, w.PR)
	if err != nil {
		return nil, err
	}
	deadline := w.Deadline
	if w.Kind != workitems.WaitReview {
		deadline = j.Verifier.Now().Add(rv.Wait.D()) // CI just passed: the review wait starts now
	}
	out := &verify.ReviewEvidence{Required: rv.RequiredApprovals, PR: w.PR, Rounds: verify.ReviewRounds(it), MaxRounds: rv.MaxRounds,
		OnChanges: rv.OnChangesRequested, Deadline: deadline}
	if it.Delivery != nil && it.Delivery.PR != nil {
		out.URL = it.Delivery.PR.URL
	}
	latest := map[string]forge.Review{}
	var order []string
	for _, r := range reviews {
		if r.User == "" || r.User == self || r.State == forge.ReviewCommented {
			continue
		}
		if !w.PushedAt.IsZero() && !r.SubmittedAt.IsZero() && r.SubmittedAt.Before(w.PushedAt) {
			continue // a review of an earlier commit
		}
		if _, seen := latest[r.User]; !seen {
			order = append(order, r.User)
		}
		latest[r.User] = r
	}
	for _, u := range order {
		r := latest[u]
		if r.State != forge.ReviewApproved && r.State != forge.ReviewChangesRequested {
			continue // dismissed: neither counts
		}
		perm, err := permission(ctx, f, w.Repo, u)
		if err != nil {
			return nil, err
		}
		if !perm.CanWrite() {
			out.NotCounted = append(out.NotCounted, fmt.Sprintf("%s (%s access)", u, perm))
			j.log().Info("waits: a review not counted: its author lacks write access", "item", it.ID, "repo", w.Repo,
				"pr", w.PR, "reviewer", u, "permission", perm, "review", r.State)
			continue
		}
		switch r.State {
		case forge.ReviewApproved:
			out.Approvals = append(out.Approvals, u)
		case forge.ReviewChangesRequested:
			note := verify.ReviewNote{User: u, Body: r.Body, URL: r.URL}
			for _, c := range r.Comments {
				note.Comments = append(note.Comments, verify.ReviewComment{Path: c.Path, Line: c.Line, Body: c.Body})
			}
			out.ChangesRequested = append(out.ChangesRequested, note)
		}
	}
	return out, nil
}

// WakeFacts reads a waiting item's evidence once, for the wake that records the decision (CI
// re-runs it asks for included): the facts the policy decides on (Decide). The error is
// transient trouble reading it.
func (j *Judge) WakeFacts(ctx context.Context, tmpl *config.Template, it *workitems.Item) (verify.Judgement, error) {
	return j.facts(ctx, tmpl, it, true)
}

// Decide has the policy decide on facts WakeFacts read; a refused merge is one more fact
// (Judgement.MergeRefused), decided on without reading the forge again.
func (j *Judge) Decide(ctx context.Context, tmpl *config.Template, jd verify.Judgement) workitems.Decision {
	return j.withWhere(j.Verifier.Judge(ctx, jd), tmpl, jd.Local)
}

// Peek is WakeFacts and Decide without side effects (no CI re-runs): the poller's look at
// whether a wake has something to decide.
func (j *Judge) Peek(ctx context.Context, tmpl *config.Template, it *workitems.Item) (workitems.Decision, error) {
	jd, err := j.facts(ctx, tmpl, it, false)
	if err != nil {
		return workitems.Decision{}, err
	}
	return j.Decide(ctx, tmpl, jd), nil
}

func (j *Judge) facts(ctx context.Context, tmpl *config.Template, it *workitems.Item, rerun bool) (verify.Judgement, error) {
	w := it.Wait
	if w == nil {
		return verify.Judgement{}, errors.New("waits: the item is not waiting")
	}
	ev, err := j.Read(ctx, tmpl, it, rerun)
	if err != nil {
		return verify.Judgement{}, fmt.Errorf("waits: evidence of %s: %w", it.ID, err)
	}
	local := &workitems.Decision{Outcome: workitems.OutcomeClose, Rule: w.LocalRule}
	if w.LocalSummary != "" {
		local.Reasons = []string{w.LocalSummary}
	}
	jd := verify.Judgement{Template: tmpl, Item: it, Attempt: w.Attempt, Local: local, Delivery: ev.Delivery, CI: ev.CI,
		Review: ev.Review, PREndRefused: ev.PREndRefused, Wait: w, CIReruns: ev.Reruns}
	jd.CIDeadline = w.Deadline
	if w.Kind != workitems.WaitCI {
		jd.CIDeadline = j.Verifier.Now() // CI had answered before this wait
	}
	return jd, nil
}

func checkResults(ci *verify.CIEvidence) []workitems.CheckResult {
	var out []workitems.CheckResult
	for _, c := range ci.Checks {
		out = append(out, workitems.CheckResult{Name: c.Name, State: c.State, URL: c.URL, Summary: c.Details})
	}
	for _, m := range ci.Missing {
		if !slices.ContainsFunc(out, func(c workitems.CheckResult) bool { return c.Name == m }) {
			out = append(out, workitems.CheckResult{Name: m, State: workitems.CheckPending, Summary: "no result yet"})
		}
	}
	return out
}

func firstOf(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

func (j *Judge) log() *slog.Logger {
	if j.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return j.Logger
}
