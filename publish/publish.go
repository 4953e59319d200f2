package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Options configures a Publisher.
type Options struct {
	Forges forge.Set
	// Branches is the ledger of what outerloop pushed to each branch and who holds it (default:
	// one in this process's memory; a deployment shares RedisBranches).
	Branches Branches
	// Observer counts what outerloop did to pull requests and branches (default: nothing).
	Observer Observer
	Clock    workitems.Clock // default the system clock
	Logger   *slog.Logger
}

// Observer counts the pull request actions (workitems.AllPullRequestActions) by template
// (metrics.Metrics implements it).
type Observer interface {
	PullRequestAction(template string, action workitems.DeliveryStep)
}

type noObserver struct{}

func (noObserver) PullRequestAction(string, workitems.DeliveryStep) {}

// Publisher is the forge-backed delivery.Publisher.
type Publisher struct {
	o Options
}

var _ delivery.Publisher = (*Publisher)(nil)

// New returns a Publisher.
func New(o Options) *Publisher {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Branches == nil {
		o.Branches = NewMemoryBranches()
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	return &Publisher{o: o}
}

// markerRE finds the hidden marker a pull request's body carries: the change's tree and the item.
var markerRE = regexp.MustCompile(`<!-- outerloop: item=(\S+) tree=([0-9a-f]{40,64}) -->`)

func marker(item, tree string) string {
	return fmt.Sprintf("<!-- outerloop: item=%s tree=%s -->", item, tree)
}

// MarkedTree returns the item and tree a pull request body's marker names ("" when the pull
// request is not outerloop's).
func MarkedTree(body string) (item, tree string) {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// target is where one publication goes.
type target struct {
	f      Forge
	repo   *forge.Repository
	slug   string
	base   string
	branch string
	auth   forge.GitAuth
}

// forge looks up the named forge as delivery sees it: only the methods of Forge.
func (p *Publisher) forge(name string) (Forge, error) { return p.o.Forges.Get(name) }

func (p *Publisher) target(ctx context.Context, t *config.Template, item string) (*target, error) {
	d := t.Deliver
	f, err := p.forge(d.Forge)
	if err != nil {
		return nil, fmt.Errorf("publish: deliver.forge: %w", err)
	}
	repo, err := f.Repository(ctx, d.Repo)
	if err != nil {
		return nil, err
	}
	auth, err := f.GitAuth(repo.CloneURL)
	if err != nil {
		return nil, err
	}
	base := d.Base
	if base == "" {
		base = repo.DefaultBranch
	}
	return &target{f: f, repo: repo, slug: d.Repo, base: base, branch: d.BranchFor(t.Name, item), auth: auth}, nil
}

func (tg *target) push(sha string) forge.PushRequest {
	return forge.PushRequest{Forge: tg.f.Name(), URL: tg.repo.CloneURL, SHA: sha, Auth: tg.auth}
}

// Publish pushes the commit, opens or updates the pull request, waits for CI on the pushed
// commit and decides (see the package doc).
func (p *Publisher) Publish(ctx context.Context, pub delivery.Publication) (delivery.Published, error) {
	t, it, del := pub.Template, pub.Item, pub.Delivery
	ev := emitter{pub: pub}
	tg, err := p.target(ctx, t, it.ID)
	if err != nil {
		return delivery.Published{}, err
	}
	// Where the branch and the pull request are: forge events act on the item only there.
	del.Forge, del.Repo, del.Branch = tg.f.Name(), tg.slug, tg.branch

	var prs forge.BranchPullRequests
	if t.Deliver.Mode == workitems.DeliverPullRequest {
		if prs, err = tg.f.PullRequestsFor(ctx, tg.slug, tg.branch); err != nil {
			return delivery.Published{}, err
		}
		if res, done := p.dedupe(ctx, pub, tg, prs, del, ev); done {
			return res, nil
		}
	}

	// The base: re-make the commit on where the base branch is now, or retry from there.
	req := tg.push("")
	req.Dir, req.Branch = repoDir(pub), tg.base
	baseHead, err := forge.RemoteBranch(ctx, req)
	if err != nil {
		return delivery.Published{}, err
	}
	if baseHead == "" {
		return delivery.Published{}, workitems.Classify(workitems.ClassInvalidInput,
			fmt.Errorf("publish: base branch %q does not exist on %s", tg.base, tg.slug))
	}
	commit := del.Commit
	if baseHead != del.Base {
		remade, conflict, err := remake(ctx, repoDir(pub), tg, baseHead, del.Base, commit)
		if err != nil {
			return delivery.Published{}, err
		}
		if conflict != "" {
			ev.emit(ctx, workitems.StepBaseMoved, fmt.Sprintf("the base %s moved to %s and the change conflicts with it: retried from the new base", tg.base, shorten.SHA(baseHead)),
				map[string]string{"base": baseHead, "conflict": conflict})
			del.Outcome = workitems.DeliveryFailed
			del.Error = fmt.Sprintf("the base %s moved from %s to %s and the change conflicts: %s", tg.base, shorten.SHA(del.Base), shorten.SHA(baseHead), conflict)
			del.ErrorClass = workitems.ClassConflict
			return delivery.Published{Delivery: del}, nil
		}
		ev.emit(ctx, workitems.StepBaseMoved, fmt.Sprintf("the base %s moved to %s: the change is re-made on it as %s", tg.base, shorten.SHA(baseHead), shorten.SHA(remade)),
			map[string]string{"base": baseHead, "commit": remade})
		commit, del.Base = remade, baseHead
		if same, err := sameTree(ctx, repoDir(pub), tg, commit, baseHead); err != nil {
			return delivery.Published{}, err
		} else if same {
			// The base already has the change: nothing to push, and an open pull request of
			// the branch is no longer needed.
			w, err := p.withdraw(ctx, pub.Template, pub.Item, tg, prs, repoDir(pub), baseHead, ev, "the base "+tg.base+" already has this change")
			if err != nil {
				return delivery.Published{}, err
			}
			if w.Outcome == "" {
				w = del
				w.Outcome = workitems.DeliveryUnchanged
				w.SameAs = &workitems.DeliveryRef{Commit: baseHead}
			}
			return delivery.Published{Delivery: w}, nil
		}
	}

	if prs.Open != nil {
		if res, held, err := p.rebasePolicy(ctx, pub, tg, prs.Open, baseHead, commit, del, ev); err != nil || held {
			return res, err
		}
	}

	// The branch as it is now, and whose its commits are.
	req = tg.push(commit)
	req.Dir, req.Branch = repoDir(pub), tg.branch
	if req.Expected, err = forge.RemoteBranch(ctx, req); err != nil {
		return delivery.Published{}, err
	}
	bs, err := p.readBranch(ctx, t, repoDir(pub), tg, req.Expected, baseHead)
	if err != nil {
		return delivery.Published{}, err
	}
	if bs.hold != nil && t.Deliver.Mode == workitems.DeliverPullRequest && prs.Open == nil {
		// No pull request is open for the branch: the people's commits are kept by the one that
		// was merged or closed (its head ref), and the branch is outerloop's again.
		if _, err := p.o.Branches.HandBack(ctx, bs.key, bs.head); err != nil {
			return delivery.Published{}, err
		}
		bs.hold = nil
	}
	if bs.hold != nil {
		if t.Deliver.ForeignCommits() != workitems.ForeignBuildOn && !reviewRound(pub.Item) {
			return p.held(ctx, pub, tg, prs, bs, del, ev, "")
		}
		built, conflict, err := buildOn(ctx, repoDir(pub), tg, bs.rec, bs.head, commit)
		if err != nil {
			return delivery.Published{}, err
		}
		if conflict != "" {
			return p.held(ctx, pub, tg, prs, bs, del, ev, "the change conflicts with their commits in "+conflict)
		}
		if _, err := p.o.Branches.Hold(ctx, bs.key, *bs.hold); err != nil {
			return delivery.Published{}, err
		}
		del.Held = bs.hold
		if built == "" {
			del.Outcome = workitems.DeliveryUnchanged
			del.SameAs = &workitems.DeliveryRef{Commit: bs.head}
			if prs.Open != nil {
				del.PR, del.SameAs.PR = prRef(prs.Open), prRef(prs.Open)
			}
			ev.emit(ctx, workitems.StepDedupe, fmt.Sprintf("the branch %s already has this change on top of %s's commit %s: nothing pushed",
				tg.branch, bs.hold.User, shorten.SHA(bs.hold.SHA)), map[string]string{"sha": bs.head})
			return delivery.Published{Delivery: del}, nil
		}
		ev.emit(ctx, workitems.StepBuiltOn, fmt.Sprintf("%s pushed %s to %s: the change is a new commit %s on top of it",
			bs.hold.User, shorten.SHA(bs.hold.SHA), tg.branch, shorten.SHA(built)), map[string]string{"user": bs.hold.User, "sha": bs.hold.SHA, "commit": built})
		p.o.Observer.PullRequestAction(t.Name, workitems.StepBuiltOn)
		commit = built
		req.SHA = built
	}

	// Push with a lease on the branch as just read; the ledger knows the commit first.
	if err := p.o.Branches.Pushing(ctx, bs.key, commit); err != nil {
		return delivery.Published{}, err
	}
	if err := forge.Push(ctx, req); err != nil {
		if errors.Is(err, forge.ErrStaleLease) {
			// Someone pushed between our read and our push: read again, later.
			return delivery.Published{}, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: %w", err))
		}
		return delivery.Published{}, err
	}
	del.PushedSHA = commit
	ev.emit(ctx, workitems.StepPushed, "pushed "+shorten.SHA(commit)+" to "+tg.branch, map[string]string{"sha": commit, "branch": tg.branch})
	del.Outcome = workitems.DeliveryPushed

	if t.Deliver.Mode == workitems.DeliverPullRequest {
		if _, err = p.openOrUpdate(ctx, pub, tg, prs, commit, &del, ev); err != nil {
			return delivery.Published{}, err
		}
	}
	return delivery.Published{Delivery: del}, nil
}

// Merge merges the delivery's pull request (deliver.automerge), refused unless its head is still
// the pushed commit, and returns the record with the merge commit. A refusal by the forge is a
// *delivery.MergeRefusedError (the policy escalates it); transient trouble is an error of class
// transient.
func (p *Publisher) Merge(ctx context.Context, m delivery.Merge) (workitems.Delivery, error) {
	del := m.Delivery
	if del.PR == nil || del.PushedSHA == "" {
		return del, workitems.Classify(workitems.ClassInvariantViolation, errors.New("publish: merge of a delivery without a pull request"))
	}
	tg, err := p.target(ctx, m.Template, m.Item.ID)
	if err != nil {
		return del, err
	}
	sha, err := tg.f.Merge(ctx, tg.slug, del.PR.Number, forge.MergeRequest{Method: m.Template.Deliver.MergeMethod, ExpectedHeadSHA: del.PushedSHA})
	if err != nil {
		if workitems.ClassOf(err) == workitems.ClassTransient {
			return del, err
		}
		return del, &delivery.MergeRefusedError{Err: err}
	}
	pr := *del.PR
	pr.State = workitems.PRMerged
	del.MergeCommit, del.Outcome, del.PR = sha, workitems.DeliveryMerged, &pr
	ev := emitter{pub: delivery.Publication{Events: m.Events, Attempt: m.Attempt}}
	ev.emit(ctx, workitems.StepMerged,
		fmt.Sprintf("merged #%d (%s) as %s", pr.Number, m.Template.Deliver.MergeMethod, shorten.SHA(sha)),
		map[string]string{"merge_commit": sha, "pr": pr.URL})
	p.cleanupBranch(ctx, m.Template, tg, BranchKey{Forge: tg.f.Name(), Repo: tg.slug, Branch: tg.branch}, ev)
	return del, nil
}

// dedupe reports whether the open or the last declined pull request already holds this tree.
func (p *Publisher) dedupe(ctx context.Context, pub delivery.Publication, tg *target, prs forge.BranchPullRequests, del workitems.Delivery, ev emitter) (delivery.Published, bool) {
	if open := prs.Open; open != nil {
		item, tree := MarkedTree(open.Body)
		// The item's own earlier attempt is not a duplicate: its CI was red, or it is resumed.
		if tree == del.Tree && item != pub.Item.ID {
			del.Outcome, del.PR = workitems.DeliveryUnchanged, prRef(open)
			del.SameAs = &workitems.DeliveryRef{Item: item, PR: prRef(open)}
			ev.emit(ctx, workitems.StepDedupe, fmt.Sprintf("the open pull request #%d already holds tree %s: nothing pushed", open.Number, shorten.SHA(del.Tree)),
				map[string]string{"pr": open.URL, "tree": del.Tree, "same_as": item})
			return delivery.Published{Delivery: del}, true
		}
		return delivery.Published{}, false
	}
	if last := prs.LastClosed; last != nil && last.State == workitems.PRClosed {
		item, tree := MarkedTree(last.Body)
		if tree == del.Tree {
			del.Outcome, del.PR = workitems.DeliveryDeclined, prRef(last)
			del.SameAs = &workitems.DeliveryRef{Item: item, PR: prRef(last)}
			ev.emit(ctx, workitems.StepDedupe, fmt.Sprintf("pull request #%d with tree %s was closed unmerged: declined, nothing pushed", last.Number, shorten.SHA(del.Tree)),
				map[string]string{"pr": last.URL, "tree": del.Tree, "rule": string(workitems.RuleDeclined)})
			return delivery.Published{Delivery: del}, true
		}
	}
	return delivery.Published{}, false
}

// rebasePolicy applies deliver.rebase (delivery.CheckRebase) to a commit for a branch whose
// pull request is open: it reports held, with the record to return, when nothing is to be
// pushed. A held record is unchanged with SameAs naming the open pull request and its head (the
// policy closes it as already_delivered); PushedSHA stays empty, so automerge never merges a
// head this item's CI did not see.
func (p *Publisher) rebasePolicy(ctx context.Context, pub delivery.Publication, tg *target, open *forge.PullRequest, baseHead, commit string,
	del workitems.Delivery, ev emitter) (delivery.Published, bool, error) {
	if open.HeadSHA == "" {
		return delivery.Published{}, false, nil // nothing to compare with: pushed as before the policy
	}
	item, _ := MarkedTree(open.Body)
	policy := pub.Template.Deliver.RebasePolicy()
	rb, err := delivery.CheckRebase(ctx, delivery.RebaseCheck{Policy: policy, Attempt: pub.Attempt, OwnPR: item == pub.Item.ID,
		Workspace: pub.Workspace, GitDir: pub.GitDir, Base: baseHead, Commit: commit, PRHead: open.HeadSHA,
		FetchURL: tg.repo.CloneURL, FetchBranch: tg.branch, FetchEnv: tg.auth.Env(nil)})
	if err != nil {
		return delivery.Published{}, false, err
	}
	data := map[string]string{"reason": string(rb.Reason), "policy": string(policy), "pr": open.URL, "pr_head": open.HeadSHA}
	if rb.Conflicts != "" {
		data["conflicts"] = rb.Conflicts
	}
	switch rb.Reason {
	case delivery.RebaseRetry:
		return delivery.Published{}, false, nil
	case delivery.RebaseChanged:
		ev.emit(ctx, workitems.StepDedupe, fmt.Sprintf("the open pull request #%d holds a different change: the new one is pushed", open.Number), data)
		return delivery.Published{}, false, nil
	case delivery.RebaseBehind, delivery.RebaseConflicted:
		why := "deliver.rebase is behind"
		if rb.Reason == delivery.RebaseConflicted {
			why = "it conflicts with the base (" + rb.Conflicts + ")"
		}
		ev.emit(ctx, workitems.StepBaseMoved, fmt.Sprintf("the open pull request #%d has the same change on an older base and %s: rebased by pushing %s",
			open.Number, why, shorten.SHA(commit)), data)
		return delivery.Published{}, false, nil
	}
	del.Outcome, del.PR = workitems.DeliveryUnchanged, prRef(open)
	del.SameAs = &workitems.DeliveryRef{Item: item, Commit: open.HeadSHA, PR: prRef(open)}
	msg := fmt.Sprintf("the open pull request #%d already has this change on the base's tip: nothing pushed", open.Number)
	if rb.Reason == delivery.RebaseNotNeeded {
		msg = fmt.Sprintf("the open pull request #%d has this change on an older base and deliver.rebase is %s: nothing pushed (%s stays its head)",
			open.Number, policy, shorten.SHA(open.HeadSHA))
	}
	ev.emit(ctx, workitems.StepDedupe, msg, data)
	return delivery.Published{Delivery: del}, true, nil
}

// openOrUpdate opens the branch's pull request, or updates the open one's title and body.
func (p *Publisher) openOrUpdate(ctx context.Context, pub delivery.Publication, tg *target, prs forge.BranchPullRequests, commit string, del *workitems.Delivery, ev emitter) (*forge.PullRequest, error) {
	t := pub.Template
	title := t.Deliver.Title
	if title == "" {
		title = "outerloop: " + t.Name
	}
	body := prBody(pub, commit)
	var pr *forge.PullRequest
	var err error
	if prs.Open != nil {
		// People's edits stay: the title is left as it is, and of the body only outerloop's
		// own section is rewritten.
		body = mergeBody(prs.Open.Body, body)
		pr, err = tg.f.EditPullRequest(ctx, tg.slug, prs.Open.Number, forge.PullRequestEdit{Body: &body})
		if err != nil {
			return nil, err
		}
		del.Outcome = workitems.DeliveryPRUpdated
		ev.emit(ctx, workitems.StepPRUpdated, fmt.Sprintf("pull request #%d now has %s", pr.Number, shorten.SHA(commit)), map[string]string{"pr": pr.URL, "sha": commit})
	} else {
		pr, err = tg.f.CreatePullRequest(ctx, tg.slug, forge.NewPullRequest{Title: title, Body: body, Base: tg.base, Head: tg.branch, Draft: t.Deliver.OpensDraft()})
		if errors.Is(err, forge.ErrPullRequestExists) {
			// Opened between our look-up and now (another worker): read it and update it.
			return nil, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: %w", err))
		}
		if err != nil {
			return nil, err
		}
		del.Outcome = workitems.DeliveryPROpened
		ev.emit(ctx, workitems.StepPROpened, fmt.Sprintf("opened pull request #%d", pr.Number), map[string]string{"pr": pr.URL, "sha": commit})
	}
	labels := t.Deliver.Labels
	if prs.Open != nil { // only those the open pull request lacks
		labels = slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return slices.Contains(prs.Open.Labels, l) })
	}
	if len(labels) > 0 {
		if err := tg.f.AddLabels(ctx, tg.slug, pr.Number, labels); err != nil {
			return nil, err
		}
	}
	del.PR = prRef(pr)
	return pr, nil
}

// Followup labels and comments the pull request of an escalated item; a retry needs nothing
// (its next attempt pushes to the same branch).
func (p *Publisher) Followup(ctx context.Context, f delivery.Followup) error {
	if f.Decision.Outcome != workitems.OutcomeEscalate || f.Delivery.PR == nil || f.Delivery.PR.State != workitems.PROpen {
		return nil
	}
	tg, err := p.target(ctx, f.Template, f.Item.ID)
	if err != nil {
		return err
	}
	if err := tg.f.AddLabels(ctx, tg.slug, f.Delivery.PR.Number, []string{workitems.LabelNeedsHuman}); err != nil {
		return err
	}
	if f.Decision.Rule == workitems.RuleHeldByPersonEscalate {
		return nil // the pull request was told who holds it, and how to hand it back, once
	}
	return tg.f.Comment(ctx, tg.slug, f.Delivery.PR.Number, fmt.Sprintf("outerloop escalated this change (%s); a person must decide:\n\n- %s",
		f.Decision.Rule, strings.Join(f.Decision.Reasons, "\n- ")))
}

func prBody(pub delivery.Publication, commit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Made by outerloop for item `%s` (template `%s`, attempt %d), commit %s.\n\n", pub.Item.ID, pub.Template.Name, pub.Attempt, commit)
	if s := pub.Decision.Summary; s != "" {
		b.WriteString("Local evidence: " + s + "\n\n")
	}
	fmt.Fprintf(&b, "%d files changed, +%d −%d.\n\n", pub.Delivery.FileCount, pub.Delivery.Added, pub.Delivery.Deleted)
	if len(pub.NetworkRefused) > 0 {
		// A change made without a host it wanted may be incomplete: say which (docs/sandbox-network.md).
		fmt.Fprintf(&b, "The sandbox refused %d connection(s) of this attempt's commands: %s.\n\n",
			len(pub.NetworkRefused), strings.Join(pub.NetworkRefused, ", "))
	}
	b.WriteString(marker(pub.Item.ID, pub.Delivery.Tree))
	return section(b.String())
}

func prRef(pr *forge.PullRequest) *workitems.PullRequest {
	return &workitems.PullRequest{Number: pr.Number, URL: pr.URL, State: pr.State, Draft: pr.Draft}
}

// repoDir is the repository the publication's commit is in: the worker's own git directory
// of the workspace when it keeps one (git runs there with no work tree: nothing of the item's
// .git is read while the forge's credentials are in git's environment).
func repoDir(pub delivery.Publication) string {
	if pub.GitDir != "" {
		return pub.GitDir
	}
	return pub.Workspace
}

// remake makes commit (a child of oldBase) a commit on newBase with a three-way merge; it
// returns the conflicting paths instead when the change does not apply.
func remake(ctx context.Context, dir string, tg *target, newBase, oldBase, commit string) (string, string, error) {
	g := newGitRun(dir, tg)
	if _, code, err := g.run(ctx, nil, "fetch", "--quiet", "--no-tags", tg.repo.CloneURL, "refs/heads/"+tg.base); err != nil || code != 0 {
		if err == nil {
			err = fmt.Errorf("publish: git fetch of the base %s failed", shorten.SHA(newBase))
		}
		return "", "", workitems.Classify(workitems.ClassTransient, err)
	}
	if _, code, _ := g.run(ctx, nil, "merge-base", "--is-ancestor", oldBase, newBase); code != 0 {
		return "", "the base branch was rewritten (the old base is not an ancestor)", nil
	}
	out, code, err := g.run(ctx, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", newBase, commit)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(out, "\n")
	if code == 1 {
		return "", strings.Join(lines[1:], ", "), nil
	}
	made, err := g.commitTree(ctx, commit, lines[0], newBase)
	if err != nil {
		return "", "", fmt.Errorf("publish: on the new base: %w", err)
	}
	return made, "", nil
}

type emitter struct{ pub delivery.Publication }

func (e emitter) emit(ctx context.Context, step workitems.DeliveryStep, msg string, data map[string]string) {
	if e.pub.Events == nil {
		return
	}
	if data == nil {
		data = map[string]string{}
	}
	data["step"] = string(step)
	e.pub.Events.Emit(ctx, workitems.Event{Type: workitems.EventDelivery, Attempt: e.pub.Attempt, Message: msg, Data: data})
}

// unwrapGit is the exit status of a failed git command, without what git printed (as these
// messages always were).
func unwrapGit(err error) error {
	var ge *proc.GitError
	if errors.As(err, &ge) {
		return ge.Err
	}
	return err
}
