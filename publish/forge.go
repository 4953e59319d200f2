package publish

import (
	"context"

	"outerloop/forge"
)

// Forge is what delivery needs of a forge: the repository and git credentials to push with,
// the branch's pull requests to open, update, label and comment on, and the merge. Every forge
// of a forge.Set is one; a new forge kind used for delivery implements these methods.
type Forge interface {
	// Name is the forge's key in forges: (for errors and push requests).
	Name() string
	Repository(ctx context.Context, repo string) (*forge.Repository, error)
	// GitAuth authenticates git to the repository's CloneURL; it never puts the token in the URL.
	GitAuth(remoteURL string) (forge.GitAuth, error)
	PullRequestsFor(ctx context.Context, repo, branch string) (forge.BranchPullRequests, error)
	CreatePullRequest(ctx context.Context, repo string, pr forge.NewPullRequest) (*forge.PullRequest, error)
	EditPullRequest(ctx context.Context, repo string, number int, edit forge.PullRequestEdit) (*forge.PullRequest, error)
	AddLabels(ctx context.Context, repo string, number int, labels []string) error
	Comment(ctx context.Context, repo string, number int, body string) error
	Merge(ctx context.Context, repo string, number int, m forge.MergeRequest) (string, error)
	// ClosePullRequest closes an obsolete pull request; MarkReady makes a draft ready.
	ClosePullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error)
	MarkReady(ctx context.Context, repo string, number int) (*forge.PullRequest, error)
}
