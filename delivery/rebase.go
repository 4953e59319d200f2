package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/workitems"
)

// RebaseReason says why a delivery to a branch whose pull request is open pushed or held
// (deliver.rebase). Re-pushing an unchanged change onto a moved base costs a CI run for
// nothing, so the policy holds it unless the pull request needs it.
type RebaseReason string

// The rebase reasons.
const (
	// RebaseRetry pushes: a retry or a review round (attempt > 1), or the pull request is the
	// item's own, always may.
	RebaseRetry RebaseReason = "retry"
	// RebaseChanged pushes: the change differs from the open pull request's.
	RebaseChanged RebaseReason = "changed"
	// RebaseBehind pushes: the same change, the base moved and deliver.rebase is behind.
	RebaseBehind RebaseReason = "behind"
	// RebaseConflicted pushes: the same change, and the open pull request conflicts with the
	// moved base.
	RebaseConflicted RebaseReason = "conflicted"
	// RebaseUpToDate holds: the open pull request has the same change on the base's tip.
	RebaseUpToDate RebaseReason = "unchanged_up_to_date"
	// RebaseNotNeeded holds: the same change, the base moved, and deliver.rebase does not ask
	// for a new commit (conflicted without a conflict, or never).
	RebaseNotNeeded RebaseReason = "rebase_not_needed"
)

// AllRebaseReasons lists the rebase reasons.
func AllRebaseReasons() []RebaseReason {
	return []RebaseReason{RebaseRetry, RebaseChanged, RebaseBehind, RebaseConflicted, RebaseUpToDate, RebaseNotNeeded}
}

// Push reports whether the reason pushes the new commit.
func (r RebaseReason) Push() bool {
	return r != RebaseUpToDate && r != RebaseNotNeeded
}

// RebaseCheck is a commit about to be pushed to a branch whose pull request is open.
type RebaseCheck struct {
	Policy  workitems.RebasePolicy // "" is the default, conflicted
	Attempt int
	// OwnPR: the open pull request was opened by this item (an earlier attempt's, or a resumed
	// one's): always updated.
	OwnPR     bool
	Workspace string // a git repository holding Base and Commit
	GitDir    string // its git directory when kept apart (Request.GitDir)
	Base      string // the base branch's tip; Commit is one commit on it
	Commit    string
	PRHead    string // the open pull request's head commit
	// FetchURL and FetchBranch are where PRHead is fetched from when the workspace lacks it;
	// FetchEnv carries the forge's credentials (forge.GitAuth.Env) and never reaches a log.
	FetchURL    string
	FetchBranch string
	FetchEnv    []string
}

// Rebase is the rebase policy's verdict.
type Rebase struct {
	Reason RebaseReason
	// BaseMoved: the open pull request's head is not on the base's tip.
	BaseMoved bool
	// Conflicts names the paths the open pull request conflicts on with the base (checked only
	// when the policy needs it).
	Conflicts string
}

// CheckRebase applies deliver.rebase to a first attempt about to push to a branch whose pull
// request (another item's: an earlier tick's) is open. A different change is always pushed;
// the same change is pushed only when the pull request needs it: behind pushes whenever the
// base moved, conflicted only when the pull request conflicts with the base, never not at all.
// An error is transient (the fetch) or a local git failure.
func CheckRebase(ctx context.Context, c RebaseCheck) (Rebase, error) {
	if c.Attempt > 1 || c.OwnPR {
		return Rebase{Reason: RebaseRetry}, nil
	}
	if c.Workspace == "" || c.Base == "" || c.Commit == "" || c.PRHead == "" {
		return Rebase{}, workitems.Classify(workitems.ClassInvariantViolation, errors.New("delivery: rebase check without workspace, base, commit or pull request head"))
	}
	g := git{dir: c.Workspace, gitDir: c.GitDir}
	if err := havePRHead(ctx, g, c); err != nil {
		return Rebase{}, err
	}
	prBase, err := g.run(ctx, nil, "merge-base", c.Base, c.PRHead)
	if err != nil {
		return Rebase{}, err
	}
	same, err := sameChange(ctx, g, prBase, c.PRHead, c.Base, c.Commit)
	if err != nil {
		return Rebase{}, err
	}
	if !same {
		return Rebase{Reason: RebaseChanged}, nil
	}
	// The pull request is on the base's tip when the tip is its merge base with it.
	v := Rebase{BaseMoved: prBase != c.Base}
	if !v.BaseMoved {
		v.Reason = RebaseUpToDate
		return v, nil
	}
	policy := c.Policy
	if policy == "" {
		policy = workitems.RebaseConflicted
	}
	switch policy {
	case workitems.RebaseBehind:
		v.Reason = RebaseBehind
	case workitems.RebaseNever:
		v.Reason = RebaseNotNeeded
	case workitems.RebaseConflicted:
		if v.Conflicts, err = mergeConflicts(ctx, g, c.Base, c.PRHead); err != nil {
			return Rebase{}, err
		}
		v.Reason = RebaseNotNeeded
		if v.Conflicts != "" {
			v.Reason = RebaseConflicted
		}
	default:
		return Rebase{}, workitems.Classify(workitems.ClassInvalidInput, fmt.Errorf("delivery: deliver.rebase %q is not one of %s",
			policy, workitems.JoinKinds(workitems.AllRebasePolicies())))
	}
	return v, nil
}

// havePRHead fetches the pull request's branch when its head is not in the workspace (a
// workspace is cloned from the base, not from outerloop's branches).
func havePRHead(ctx context.Context, g git, c RebaseCheck) error {
	if _, err := g.run(ctx, nil, "cat-file", "-e", c.PRHead+"^{commit}"); err == nil {
		return nil
	}
	if c.FetchURL == "" || c.FetchBranch == "" {
		return fmt.Errorf("delivery: pull request head %s is not in the workspace and nowhere to fetch it from", shorten.SHA(c.PRHead))
	}
	fg := git{dir: g.dir, env: c.FetchEnv}
	if _, err := fg.run(ctx, nil, "fetch", "--quiet", "--no-tags", "--end-of-options", c.FetchURL, "refs/heads/"+c.FetchBranch); err != nil {
		return workitems.Classify(workitems.ClassTransient, err)
	}
	// The branch may have moved since its pull request was read: then the head is not fetched.
	if _, err := g.run(ctx, nil, "cat-file", "-e", c.PRHead+"^{commit}"); err != nil {
		return workitems.Classify(workitems.ClassTransient,
			fmt.Errorf("delivery: pull request head %s is no longer on %s: %w", shorten.SHA(c.PRHead), c.FetchBranch, err))
	}
	return nil
}

// sameChange reports whether from1..to1 and from2..to2 are the same change: equal patch ids
// of the diffs without context lines. Patch ids ignore where in a file a hunk sits and no
// context means lines the base changed next to the change do not make it another one (a moved
// base shifts and edits both); verbatim, whitespace counts (a formatting change is a change).
func sameChange(ctx context.Context, g git, from1, to1, from2, to2 string) (bool, error) {
	a, err := patchID(ctx, g, from1, to1)
	if err != nil {
		return false, err
	}
	b, err := patchID(ctx, g, from2, to2)
	if err != nil {
		return false, err
	}
	return a != "" && a == b, nil
}

// patchID is `git diff from to | git patch-id --verbatim`, streamed: a change may be large.
func patchID(ctx context.Context, g git, from, to string) (string, error) {
	// --no-renames and no textconv: the same change must give the same patch whatever the
	// user's git config; binary files differ by their blob ids on the index line.
	args := []string{"diff", "--unified=0", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index", from, to, "--"}
	c := g.cmd(ctx, args...)
	var stderr strings.Builder
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("delivery: git diff: %w", err)
	}
	if err := c.Start(); err != nil {
		return "", fmt.Errorf("delivery: git diff: %w", err)
	}
	out, perr := g.run(ctx, stdout, "patch-id", "--verbatim")
	_ = stdout.Close() // a patch-id that stopped early must not leave diff blocked on a full pipe
	werr := c.Wait()
	if perr != nil {
		return "", perr
	}
	if werr != nil {
		return "", g.fail(ctx, args, werr, stderr.String())
	}
	id, _, _ := strings.Cut(out, " ")
	return id, nil
}

// mergeConflicts returns the paths on which head conflicts with base ("" when it merges
// cleanly): `git merge-tree --write-tree` exits 1 on conflicts and writes nothing to any ref.
func mergeConflicts(ctx context.Context, g git, base, head string) (string, error) {
	args := []string{"merge-tree", "--write-tree", "--name-only", "--no-messages", base, head}
	c := g.cmd(ctx, args...)
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var ee interface{ ExitCode() int }
	if err != nil && errors.As(err, &ee) && ee.ExitCode() == 1 {
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		return strings.Join(lines[1:], ", "), nil
	}
	if err != nil {
		return "", g.fail(ctx, args, err, stderr.String())
	}
	return "", nil
}
