package waits

import (
	"context"

	"outerloop/forge"
)

// ReviewForge is what the judge reads of a forge: the pull request's state (and who merged or
// closed it) and, with deliver.review, its reviews, outerloop's own account (whose reviews
// never count) and each reviewer's or closer's permission on the repository (only write access
// counts). Every forge of a forge.Set is one; a new forge kind whose pull requests wait
// implements these.
type ReviewForge interface {
	PullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error)
	Reviews(ctx context.Context, repo string, number int) ([]forge.Review, error)
	Self(ctx context.Context) (string, error)
	Permission(ctx context.Context, repo, user string) (forge.Permission, error)
}

// CommandForge is what the sink reads of a forge for a webhook event: the pull request an
// event or a /outerloop command is about, and whether the commenter may command.
type CommandForge interface {
	PullRequest(ctx context.Context, repo string, number int) (*forge.PullRequest, error)
	Permission(ctx context.Context, repo, user string) (forge.Permission, error)
}

// permissionReader is what deciding whether an account may change an item reads of a forge.
type permissionReader interface {
	Permission(ctx context.Context, repo, user string) (forge.Permission, error)
}

// forge looks up the named forge as the judge sees it: only the methods of ReviewForge.
func (j *Judge) forge(name string) (ReviewForge, error) { return j.Forges.Get(name) }
