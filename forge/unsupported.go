package forge

import (
	"context"

	"outerloop/workitems"
)

// Unsupported implements every method of Forge but Name and Kind by failing with an *Error
// wrapping ErrUnsupported (invalid_input: the configuration asks a forge for what its kind cannot
// do). A forge kind embeds it and implements only what its consumers call: a kind used only for
// delivery need not read reviews or CI.
type Unsupported struct {
	// ForgeName names the forge in the errors (its key in forges:).
	ForgeName string
}

func (u Unsupported) err(op, repo string) error {
	return &Error{Forge: u.ForgeName, Op: op, Repo: repo, Class: workitems.ClassInvalidInput, Err: ErrUnsupported}
}

// Repository fails with ErrUnsupported.
func (u Unsupported) Repository(_ context.Context, repo string) (*Repository, error) {
	return nil, u.err("read repository", repo)
}

// PullRequestsFor fails with ErrUnsupported.
func (u Unsupported) PullRequestsFor(_ context.Context, repo, _ string) (BranchPullRequests, error) {
	return BranchPullRequests{}, u.err("list pull requests", repo)
}

// CreatePullRequest fails with ErrUnsupported.
func (u Unsupported) CreatePullRequest(_ context.Context, repo string, _ NewPullRequest) (*PullRequest, error) {
	return nil, u.err("create pull request", repo)
}

// EditPullRequest fails with ErrUnsupported.
func (u Unsupported) EditPullRequest(_ context.Context, repo string, _ int, _ PullRequestEdit) (*PullRequest, error) {
	return nil, u.err("edit pull request", repo)
}

// ClosePullRequest fails with ErrUnsupported.
func (u Unsupported) ClosePullRequest(_ context.Context, repo string, _ int) (*PullRequest, error) {
	return nil, u.err("close pull request", repo)
}

// MarkReady fails with ErrUnsupported.
func (u Unsupported) MarkReady(_ context.Context, repo string, _ int) (*PullRequest, error) {
	return nil, u.err("mark pull request ready", repo)
}

// AddLabels fails with ErrUnsupported.
func (u Unsupported) AddLabels(_ context.Context, repo string, _ int, _ []string) error {
	return u.err("add labels", repo)
}

// Comment fails with ErrUnsupported.
func (u Unsupported) Comment(_ context.Context, repo string, _ int, _ string) error {
	return u.err("comment", repo)
}

// Merge fails with ErrUnsupported.
func (u Unsupported) Merge(_ context.Context, repo string, _ int, _ MergeRequest) (string, error) {
	return "", u.err("merge", repo)
}

// PullRequest fails with ErrUnsupported.
func (u Unsupported) PullRequest(_ context.Context, repo string, _ int) (*PullRequest, error) {
	return nil, u.err("read pull request", repo)
}

// Reviews fails with ErrUnsupported.
func (u Unsupported) Reviews(_ context.Context, repo string, _ int) ([]Review, error) {
	return nil, u.err("read reviews", repo)
}

// Permission fails with ErrUnsupported.
func (u Unsupported) Permission(_ context.Context, repo, _ string) (Permission, error) {
	return PermNone, u.err("read permission", repo)
}

// Self fails with ErrUnsupported.
func (u Unsupported) Self(context.Context) (string, error) {
	return "", u.err("read the token's account", "")
}

// Checks fails with ErrUnsupported.
func (u Unsupported) Checks(_ context.Context, repo, _ string) ([]Check, error) {
	return nil, u.err("read checks", repo)
}

// RerunChecks fails with ErrUnsupported.
func (u Unsupported) RerunChecks(_ context.Context, repo, _ string, _ []string) ([]string, error) {
	return nil, u.err("re-run checks", repo)
}

// GitAuth fails with ErrUnsupported.
func (u Unsupported) GitAuth(string) (GitAuth, error) {
	return GitAuth{}, u.err("git auth", "")
}
