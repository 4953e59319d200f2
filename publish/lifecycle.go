package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// What happens to outerloop's pull requests and branches after the push: an open pull request
// whose change is no longer needed closes itself (Withdraw), a draft becomes ready once its CI is
// green (Ready), and the branch of a merged or closed pull request goes away unless a person
// committed to it or the template keeps it (Cleanup).

// Withdraw closes the open pull request of the template's branch when an item found nothing to
// change (delivery calls it for an unchanged attempt of a pull_request template): with a comment
// saying why, and the branch deleted as after a close; when people hold the branch it only
// comments, once. The record has outcome obsolete (the policy closes the item as obsolete), or
// no outcome when there was no pull request of outerloop's open.
func (p *Publisher) Withdraw(ctx context.Context, w delivery.Withdrawal) (workitems.Delivery, error) {
	t := w.Template
	if t.Deliver.Mode != workitems.DeliverPullRequest {
		return workitems.Delivery{}, nil
	}
	tg, err := p.target(ctx, t, w.Item.ID)
	if err != nil {
		return workitems.Delivery{}, err
	}
	prs, err := tg.f.PullRequestsFor(ctx, tg.slug, tg.branch)
	if err != nil {
		return workitems.Delivery{}, err
	}
	dir := w.GitDir
	if dir == "" {
		dir = w.Workspace
	}
	return p.withdraw(ctx, t, w.Item, tg, prs, dir, "", emitter{pub: delivery.Publication{Events: w.Events, Attempt: w.Attempt}},
		"the attempt found nothing to change")
}

func (p *Publisher) withdraw(ctx context.Context, t *config.Template, it *workitems.Item, tg *target, prs forge.BranchPullRequests, dir, baseHead string,
	ev emitter, why string) (workitems.Delivery, error) {
	open := prs.Open
	if open == nil {
		return workitems.Delivery{}, nil
	}
	if item, _ := MarkedTree(open.Body); item == "" {
		return workitems.Delivery{}, nil // not a pull request outerloop opened: not its to close
	}
	if baseHead == "" {
		req := tg.push("")
		req.Dir, req.Branch = dir, tg.base
		var err error
		if baseHead, err = forge.RemoteBranch(ctx, req); err != nil {
			return workitems.Delivery{}, err
		}
	}
	// The branch as it is, not the pull request's head as the API last indexed it: a person's
	// push the API has not caught up with still holds it.
	req := tg.push("")
	req.Dir, req.Branch = dir, tg.branch
	head, err := forge.RemoteBranch(ctx, req)
	if err != nil {
		return workitems.Delivery{}, err
	}
	if head == "" {
		return workitems.Delivery{}, nil // no branch: nothing of outerloop's to close here
	}
	bs, err := p.readBranch(ctx, t, dir, tg, head, baseHead)
	if err != nil {
		return workitems.Delivery{}, err
	}
	del := workitems.Delivery{Mode: t.Deliver.Mode, Outcome: workitems.DeliveryObsolete, Forge: tg.f.Name(), Repo: tg.slug, Branch: tg.branch,
		PR: prRef(open), Held: bs.hold}
	p.o.Observer.PullRequestAction(t.Name, workitems.StepObsolete)
	if bs.hold != nil {
		if _, err := p.o.Branches.Hold(ctx, bs.key, *bs.hold); err != nil {
			return workitems.Delivery{}, err
		}
		first, err := p.o.Branches.Once(ctx, bs.key, "obsolete")
		if err != nil {
			return workitems.Delivery{}, err
		}
		ev.emit(ctx, workitems.StepObsolete, fmt.Sprintf("%s; pull request #%d stays open: %s", why, open.Number, bs.hold),
			map[string]string{"pr": open.URL, "user": bs.hold.User, "sha": bs.hold.SHA})
		if first {
			if err := tg.f.Comment(ctx, tg.slug, open.Number, fmt.Sprintf("outerloop (template `%s`, item `%s`) found nothing left to change: %s. "+
				"This pull request has commits outerloop did not push (%s), so it stays open for people to merge or close.", t.Name, it.ID, why, bs.hold)); err != nil {
				return workitems.Delivery{}, err
			}
		}
		return del, nil
	}
	if err := tg.f.Comment(ctx, tg.slug, open.Number, fmt.Sprintf("outerloop (template `%s`, item `%s`) closes this pull request as no longer needed: %s.",
		t.Name, it.ID, why)); err != nil {
		return workitems.Delivery{}, err
	}
	closed, err := tg.f.ClosePullRequest(ctx, tg.slug, open.Number)
	if err != nil {
		return workitems.Delivery{}, err
	}
	del.PR = prRef(closed)
	ev.emit(ctx, workitems.StepObsolete, fmt.Sprintf("%s: pull request #%d closed as no longer needed", why, open.Number), map[string]string{"pr": open.URL})
	p.cleanupBranch(ctx, t, tg, bs.key, ev)
	return del, nil
}

// Ready marks the delivery's draft pull request ready for review (deliver.draft_until: the
// caller has seen the condition hold) and returns the record with it so.
func (p *Publisher) Ready(ctx context.Context, r delivery.Ready) (workitems.Delivery, error) {
	del := r.Delivery
	if del.PR == nil || !del.PR.Draft || del.PR.State != workitems.PROpen {
		return del, nil
	}
	f, err := p.forge(del.Forge)
	if err != nil {
		return del, err
	}
	pr, err := f.MarkReady(ctx, del.Repo, del.PR.Number)
	if err != nil {
		return del, err
	}
	ref := *del.PR
	ref.Draft = pr.Draft
	del.PR = &ref
	emitter{pub: delivery.Publication{Events: r.Events, Attempt: r.Attempt}}.emit(ctx, workitems.StepReady,
		fmt.Sprintf("pull request #%d is ready for review: %s", pr.Number, r.Why), map[string]string{"pr": pr.URL})
	p.o.Observer.PullRequestAction(r.Template.Name, workitems.StepReady)
	return del, nil
}

// Cleanup deletes the branch of the delivery's pull request once it was merged or closed (by
// anyone), unless deliver.keep_branch says keep it or a person committed to it; it is safe to
// call more than once.
func (p *Publisher) Cleanup(ctx context.Context, c delivery.Cleanup) error {
	del := c.Delivery
	if del.Branch == "" || del.PR == nil || del.PR.State == workitems.PROpen || !del.Mode.NeedsForge() {
		return nil
	}
	f, err := p.forge(del.Forge)
	if err != nil {
		return err
	}
	repo, err := f.Repository(ctx, del.Repo)
	if err != nil {
		return err
	}
	auth, err := f.GitAuth(repo.CloneURL)
	if err != nil {
		return err
	}
	tg := &target{f: f, repo: repo, slug: del.Repo, branch: del.Branch, auth: auth}
	p.cleanupBranch(ctx, c.Template, tg, BranchKey{Forge: f.Name(), Repo: del.Repo, Branch: del.Branch},
		emitter{pub: delivery.Publication{Events: c.Events, Attempt: c.Attempt}})
	return nil
}

// cleanupBranch deletes the branch with a lease on a head outerloop pushed; anything else keeps
// it, said once per head. Failures are events, not errors: the pull request's end stands.
func (p *Publisher) cleanupBranch(ctx context.Context, t *config.Template, tg *target, key BranchKey, ev emitter) {
	kept := func(head, why string) {
		if first, err := p.o.Branches.Once(ctx, key, "kept:"+head); err != nil || !first {
			return
		}
		ev.emit(ctx, workitems.StepBranchKept, "the branch "+tg.branch+" is kept: "+why, map[string]string{"branch": tg.branch, "sha": head})
		p.o.Observer.PullRequestAction(t.Name, workitems.StepBranchKept)
	}
	req := tg.push("")
	req.Branch = tg.branch
	head, err := forge.RemoteBranch(ctx, req)
	if err != nil {
		p.o.Logger.WarnContext(ctx, "publish: reading a finished branch", "branch", tg.branch, "err", err)
		return
	}
	if head == "" {
		// Gone already (deleted by a person, the forge, or a cleanup of the same end that is
		// about to say so: the ledger's record is its to drop; the next push forgets it too).
		return
	}
	if t.Deliver.KeepBranch {
		kept(head, "deliver.keep_branch is true")
		return
	}
	rec, err := p.o.Branches.Branch(ctx, key)
	if err != nil {
		p.o.Logger.WarnContext(ctx, "publish: reading the ledger of a finished branch", "branch", tg.branch, "err", err)
		return
	}
	switch {
	case rec.Hold != nil:
		kept(head, "a person committed to it ("+rec.Hold.String()+")")
		return
	case !rec.Ours(head):
		kept(head, "its head "+shorten.SHA(head)+" is a commit outerloop did not push")
		return
	}
	req.Expected = head
	if err := forge.DeleteBranch(ctx, req); err != nil {
		if errors.Is(err, forge.ErrStaleLease) {
			kept(head, "someone pushed to it as it was being deleted")
			return
		}
		p.o.Logger.WarnContext(ctx, "publish: deleting a finished branch", "branch", tg.branch, "err", err)
		ev.emit(ctx, workitems.StepBranchKept, "deleting the branch "+tg.branch+" failed: "+err.Error(), map[string]string{"branch": tg.branch})
		return
	}
	if existed, err := p.o.Branches.Forget(ctx, key); err != nil || !existed {
		return // another cleanup of the same end deleted it and said so
	}
	ev.emit(ctx, workitems.StepBranchDeleted, "the branch "+tg.branch+" was deleted", map[string]string{"branch": tg.branch, "sha": head})
	p.o.Observer.PullRequestAction(t.Name, workitems.StepBranchDeleted)
}

// sameTree reports whether two commits have the same tree.
func sameTree(ctx context.Context, dir string, tg *target, a, b string) (bool, error) {
	g := newGitRun(dir, tg)
	out, _, err := g.run(ctx, nil, "rev-parse", a+"^{tree}", b+"^{tree}")
	if err != nil {
		return false, err
	}
	ta, tb, _ := strings.Cut(out, "\n")
	return ta != "" && ta == tb, nil
}
