package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A branch outerloop pushes to is people's too: a reviewer may push a fix to it. Before any push
// publish compares the branch with the ledger (Branches): the commits on it that are neither on
// the base nor pushed by outerloop are someone else's, and from then on the branch is held —
// outerloop never rewrites it. deliver.on_foreign_commits says what happens next: stop (nothing
// is pushed, the pull request is told once) or build_on (the change becomes a new commit on top
// of theirs). A review round always builds on: the reviewer's own fix is part of what they
// asked for. The hold ends when a person hands the branch back (`/outerloop rebase`: the hooks'
// sink records it in the ledger) or deletes it.

// foreignCommit is one commit on the branch outerloop did not push.
type foreignCommit struct {
	sha, author, committerEmail string
}

// branchState is the branch as publish found it just before pushing.
type branchState struct {
	key  BranchKey
	head string // "" when the branch does not exist
	rec  BranchRecord
	hold *workitems.BranchHold // nil: the branch is outerloop's to push to
}

// readBranch reads the branch, the ledger and, when the head is not outerloop's, the commits
// that are someone else's.
func (p *Publisher) readBranch(ctx context.Context, t *config.Template, dir string, tg *target, head, baseHead string) (*branchState, error) {
	bs := &branchState{key: BranchKey{Forge: tg.f.Name(), Repo: tg.slug, Branch: tg.branch}, head: head}
	rec, err := p.o.Branches.Branch(ctx, bs.key)
	if err != nil {
		return nil, err
	}
	bs.rec = rec
	if head == "" {
		if len(rec.Pushed) > 0 || rec.Hold != nil {
			// The branch was deleted: whoever held it let it go.
			if _, err := p.o.Branches.Forget(ctx, bs.key); err != nil {
				return nil, err
			}
		}
		bs.rec = BranchRecord{}
		return bs, nil
	}
	bs.hold = rec.Hold
	if rec.Ours(head) {
		return bs, nil
	}
	if dir == "" {
		// No repository to read the branch's commits in: a head outerloop did not push is
		// someone else's (the safe side: nothing is rewritten or closed).
		if rec.Hold == nil {
			bs.hold = &workitems.BranchHold{User: "someone else", SHA: head, Commits: 1, Since: p.o.Clock.Now().UTC()}
		}
		return bs, nil
	}
	commits, err := p.foreignCommits(ctx, dir, tg, head, baseHead, rec)
	if err != nil {
		return nil, err
	}
	if len(commits) == 0 {
		return bs, nil // the branch was reset to the base or to an older push of ours: nothing of theirs
	}
	if len(rec.Pushed) == 0 && rec.Hold == nil && allOuterloops(t, commits) {
		// A branch from before the ledger: its commits are outerloop's own (its committer).
		return bs, nil
	}
	newest := commits[0]
	h := workitems.BranchHold{User: personName(newest.author), SHA: newest.sha, Commits: len(commits), Since: p.o.Clock.Now().UTC()}
	if rec.Hold != nil && rec.Hold.SHA == h.SHA {
		return bs, nil
	}
	if rec.Hold != nil {
		h.Since = rec.Hold.Since
	}
	bs.hold = &h
	return bs, nil
}

// allOuterloops reports whether every commit was committed by the template's delivery author.
func allOuterloops(t *config.Template, commits []foreignCommit) bool {
	author, err := workitems.ParseAuthor(t.Deliver.Author)
	if err != nil {
		return false
	}
	for _, c := range commits {
		if !strings.EqualFold(c.committerEmail, author.Email) {
			return false
		}
	}
	return true
}

// foreignCommits fetches the branch's head and lists, newest first, its commits that are on
// neither the base nor any commit outerloop pushed (of those this repository has: one it lacks
// is no ancestor of the fetched head).
func (p *Publisher) foreignCommits(ctx context.Context, dir string, tg *target, head, baseHead string, rec BranchRecord) ([]foreignCommit, error) {
	g := newGitRun(dir, tg)
	if _, code, err := g.run(ctx, nil, "fetch", "--quiet", "--no-tags", tg.repo.CloneURL, "refs/heads/"+tg.branch); err != nil || code != 0 {
		if err == nil {
			err = fmt.Errorf("publish: git fetch of the branch %s failed", tg.branch)
		}
		return nil, workitems.Classify(workitems.ClassTransient, err)
	}
	var not []string
	if baseHead != "" {
		not = append(not, baseHead)
	}
	if len(rec.Pushed) > 0 {
		out, _, err := g.run(ctx, strings.NewReader(strings.Join(rec.Pushed, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objecttype)")
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(out, "\n") {
			if sha, typ, ok := strings.Cut(l, " "); ok && typ == "commit" {
				not = append(not, sha)
			}
		}
	}
	args := append([]string{"log", "--format=%H%x00%an%x00%ce", head, "--not"}, not...)
	out, code, err := g.run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("publish: git log of the branch %s exited %d", tg.branch, code)
	}
	var cs []foreignCommit
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "\x00")
		if len(f) == 3 {
			cs = append(cs, foreignCommit{sha: f[0], author: f[1], committerEmail: f[2]})
		}
	}
	return cs, nil
}

// reviewRound reports whether the attempt being published was started by a review that asked
// for changes: it builds on what people pushed to answer the same review.
func reviewRound(it *workitems.Item) bool {
	if len(it.Decisions) == 0 {
		return false
	}
	d := it.Decisions[len(it.Decisions)-1]
	return d.Outcome == workitems.OutcomeRetry && d.Rule == workitems.RuleChangesRequested
}

// buildOn makes the change (commit, a child of its base) a new commit on top of head, the
// branch a person committed to, never rewriting it: a merge of head and the change, whose base
// is outerloop's own previous change on the branch (so the new change replaces it and
// people's commits stay), or, when none of outerloop's commits is in the branch's history, the
// change's own base. The new commit's second parent is the change itself: the next build finds
// outerloop's change there, apart from what people added. It returns the conflicting paths
// instead when the change does not apply, and "" when head already has it.
func buildOn(ctx context.Context, dir string, tg *target, rec BranchRecord, head, commit string) (string, string, error) {
	g := newGitRun(dir, tg)
	theirs := commit
	for i, pushed := range rec.Pushed {
		if i == 8 {
			break // older pushes of ours are not worth a process each
		}
		if _, code, _ := g.run(ctx, nil, "merge-base", "--is-ancestor", pushed, head); code != 0 {
			continue
		}
		// outerloop's change as it made it: a plain push is; a build's is its second parent.
		own := pushed
		if second, code, _ := g.run(ctx, nil, "rev-parse", "--verify", "--quiet", pushed+"^2"); code == 0 && second != "" {
			own = second
		}
		// The merge base git finds is where the two sides meet: a commit with the change's
		// tree on outerloop's previous change makes that change the base.
		tree, _, err := g.run(ctx, nil, "rev-parse", commit+"^{tree}")
		if err != nil {
			return "", "", err
		}
		if theirs, err = g.commitTree(ctx, commit, tree, own); err != nil {
			return "", "", err
		}
		break
	}
	out, code, err := g.run(ctx, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", head, theirs)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(out, "\n")
	if code == 1 {
		return "", strings.Join(lines[1:], ", "), nil
	}
	headTree, _, err := g.run(ctx, nil, "rev-parse", head+"^{tree}")
	if err != nil {
		return "", "", err
	}
	if lines[0] == headTree {
		return "", "", nil
	}
	made, err := g.commitTree(ctx, commit, lines[0], head, commit)
	return made, "", err
}

// heldResult is the record of a publication that pushed nothing because people hold the branch.
func (p *Publisher) held(ctx context.Context, pub delivery.Publication, tg *target, prs forge.BranchPullRequests, bs *branchState,
	del workitems.Delivery, ev emitter, why string) (delivery.Published, error) {
	first, err := p.o.Branches.Hold(ctx, bs.key, *bs.hold)
	if err != nil {
		return delivery.Published{}, err
	}
	del.Outcome, del.Held, del.Error = workitems.DeliveryHeld, bs.hold, why
	if prs.Open != nil {
		del.PR = prRef(prs.Open)
	}
	msg := "held: " + bs.hold.String() + " to " + tg.branch + ": outerloop pushed nothing"
	if why != "" {
		msg += " (" + why + ")"
	}
	ev.emit(ctx, workitems.StepHeld, msg, map[string]string{"user": bs.hold.User, "sha": bs.hold.SHA, "branch": tg.branch})
	p.o.Observer.PullRequestAction(pub.Template.Name, workitems.StepHeld)
	if first && prs.Open != nil {
		body := fmt.Sprintf("outerloop stopped updating this pull request: %s pushed %s, and outerloop never rewrites a commit it did not push.\n\n"+
			"To hand the branch back, comment `/outerloop rebase` (outerloop makes its change again on the base and replaces the branch, "+
			"these commits included) or delete the branch `%s`. To have outerloop's later changes added on top of people's commits instead, "+
			"set `deliver.on_foreign_commits: build_on` in template `%s`.", bs.hold.User, shorten.SHA(bs.hold.SHA), tg.branch, pub.Template.Name)
		if why != "" {
			body = fmt.Sprintf("outerloop could not add its change on top of %s's commit %s: %s. It pushed nothing.\n\n"+
				"To hand the branch back, comment `/outerloop rebase` or delete the branch `%s`.", bs.hold.User, shorten.SHA(bs.hold.SHA), why, tg.branch)
		}
		if err := tg.f.Comment(ctx, tg.slug, prs.Open.Number, body); err != nil {
			p.o.Logger.WarnContext(ctx, "publish: telling the pull request it is held", "pr", prs.Open.URL, "err", err)
		}
	}
	return delivery.Published{Delivery: del}, nil
}

// gitRun runs git in the worker's repository of a publication, with the forge's credentials in
// git's environment (never in a URL) and nothing of the system's git config.
type gitRun struct {
	g proc.Git
}

func newGitRun(dir string, tg *target) gitRun {
	return gitRun{g: proc.Git{Dir: dir, Env: tg.auth.Env(append(proc.BaseEnv(), "GIT_CONFIG_NOSYSTEM=1")), Redact: tg.auth.Redact}}
}

// run returns git's trimmed output and its exit status when that is 0 or 1 (a question git
// answered: not an ancestor, a conflict); anything else is an error.
func (g gitRun) run(ctx context.Context, stdin *strings.Reader, args ...string) (string, int, error) {
	var out []byte
	var err error
	if stdin != nil {
		out, err = g.g.Run(ctx, stdin, args...)
	} else {
		out, err = g.g.Run(ctx, nil, args...)
	}
	code := 0
	var ge *proc.GitError
	if errors.As(err, &ge) {
		code = ge.ExitCode
	}
	if err != nil && code == 0 {
		return "", 0, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: git %s: %w", args[0], unwrapGit(err)))
	}
	if code != 0 && code != 1 {
		return "", code, fmt.Errorf("publish: git %s exited %d: %s", args[0], code, shorten.OneLine(ge.Output, 300))
	}
	return strings.TrimSpace(string(out)), code, nil
}

// commitTree makes a commit of tree on the parents with like's message and author.
func (g gitRun) commitTree(ctx context.Context, like, tree string, parents ...string) (string, error) {
	msg, _, err := g.run(ctx, nil, "log", "-1", "--format=%B", like)
	if err != nil {
		return "", err
	}
	author, _, err := g.run(ctx, nil, "log", "-1", "--format=%an%n%ae", like)
	if err != nil {
		return "", err
	}
	name, email, _ := strings.Cut(author, "\n")
	made, err := proc.Git{Dir: g.g.Dir, Env: append(proc.BaseEnv(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email)}.Run(ctx, strings.NewReader(msg+"\n"), append([]string{"commit-tree", tree}, parentArgs(parents)...)...)
	if err != nil {
		return "", fmt.Errorf("publish: git commit-tree: %w", unwrapGit(err))
	}
	return strings.TrimSpace(string(made)), nil
}

func parentArgs(parents []string) []string {
	var out []string
	for _, p := range parents {
		out = append(out, "-p", p)
	}
	return out
}

// personName is a commit's author name as outerloop repeats it (events, the item, a comment on
// the pull request): anyone can write it, so it is one short line without the characters that
// would make it markup, a mention or a command there.
func personName(author string) string {
	n := strings.Map(func(r rune) rune {
		switch r {
		case '`', '@', '<', '>', '[', ']', '*', '_', '/', '\\', '|', '#', '!':
			return -1
		}
		return r
	}, shorten.OneLine(author, 80))
	if n = strings.TrimSpace(n); n == "" {
		return "someone"
	}
	return n
}
