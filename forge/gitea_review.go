package forge

import (
	"context"
	"errors"
	"time"

	gsdk "code.gitea.io/sdk/gitea"
)

// giteaMaxReviewPages bounds the review pages read (50 entries each, review requests
// included). Gitea's review listing has no last page to skip to: it is read from the start.
const giteaMaxReviewPages = 100

func (g *gitea) PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "get pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	c := g.client(ctx)
	p, resp, err := c.GetPullRequest(owner, name, int64(number))
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, err
	}
	out := g.pull(p)
	if out.State == PRClosed {
		if out.ClosedBy, err = g.closedBy(ctx, c, repo, owner, name, number, out.ClosedAt); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// closedBy is who closed an issue or pull request last: the poster of the newest "close" entry
// of its timeline (GET /issues/{index}/timeline, from a minute before closedAt; Gitea's pull
// request object does not say). "" when the timeline has none.
func (g *gitea) closedBy(ctx context.Context, c *gsdk.Client, repo, owner, name string, number int, closedAt time.Time) (string, error) {
	const op = "read the pull request's timeline"
	opt := gsdk.ListIssueCommentOptions{ListOptions: gsdk.ListOptions{PageSize: 50}}
	if !closedAt.IsZero() {
		opt.Since = closedAt.Add(-time.Minute)
	}
	by := ""
	for page := 1; page <= maxPages; page++ {
		opt.Page = page
		entries, resp, err := c.ListIssueTimeline(owner, name, int64(number), opt)
		if err := g.fail(ctx, op, repo, resp, err); err != nil {
			return "", err
		}
		for _, e := range entries {
			if e.Type == "close" && e.Poster != nil {
				by = e.Poster.UserName
			}
		}
		if len(entries) < opt.PageSize {
			break
		}
	}
	return by, nil
}

// Reviews reads GET /pulls/{index}/reviews (oldest first; review requests and pending reviews
// are left out, a dismissed review is ReviewDismissed whatever its verdict was), then, for the
// kept reviews newest first, GET /pulls/{index}/reviews/{id}/comments of those that have any,
// until MaxReviewComments are kept.
func (g *gitea) Reviews(ctx context.Context, repo string, number int) ([]Review, error) {
	const op = "list reviews"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	c := g.client(ctx)
	var w reviewWindow
	withComments := map[int64]bool{}
	for page := 1; ; page++ {
		if page > giteaMaxReviewPages {
			return nil, tooManyReviews(g.cfg.Name, op, repo)
		}
		rs, resp, err := c.ListPullReviews(owner, name, int64(number), gsdk.ListPullReviewsOptions{
			ListOptions: gsdk.ListOptions{Page: page, PageSize: 50}})
		if err := g.fail(ctx, op, repo, resp, err); err != nil {
			return nil, err
		}
		for _, r := range rs {
			if rv, ok := giteaReview(r); ok {
				w.add(rv)
				if r.CodeCommentsCount > 0 {
					withComments[r.ID] = true
				}
			}
		}
		if len(rs) < 50 {
			break
		}
	}
	reviews := w.reviews()
	const cop = "list review comments"
	kept := 0
	for i := len(reviews) - 1; i >= 0 && kept < MaxReviewComments; i-- {
		if !withComments[reviews[i].ID] {
			continue
		}
		cs, resp, err := c.ListPullReviewComments(owner, name, int64(number), reviews[i].ID)
		if err := g.fail(ctx, cop, repo, resp, err); err != nil {
			return nil, err
		}
		var out []ReviewComment
		for _, rc := range cs {
			out = append(out, giteaComment(rc))
		}
		sortComments(out)
		out = out[:min(len(out), MaxReviewComments-kept)]
		kept += len(out)
		reviews[i].Comments = out
	}
	return reviews, nil
}

// giteaReview maps a review; ok is false for a pending review, a review request, or one with
// no reviewer (a team's review request).
func giteaReview(r *gsdk.PullReview) (Review, bool) {
	st, ok := giteaReviewState(string(r.State), r.Dismissed)
	if !ok || r.Reviewer == nil {
		return Review{}, false
	}
	return Review{ID: r.ID, User: r.Reviewer.UserName, State: st, Body: clipBody(r.Body), CommitSHA: r.CommitID,
		SubmittedAt: r.Submitted, URL: r.HTMLURL}, true
}

// giteaComment maps a review comment: position is its line on the new side, original_position
// on the old side (a comment on a removed line).
func giteaComment(c *gsdk.PullReviewComment) ReviewComment {
	out := ReviewComment{ID: c.ID, Path: c.Path, Line: int(c.LineNum), Body: clipBody(c.Body), URL: c.HTMLURL}
	if out.Line == 0 {
		out.Line = int(c.OldLineNum)
	}
	if c.Reviewer != nil {
		out.User = c.Reviewer.UserName
	}
	return out
}

func (g *gitea) Permission(ctx context.Context, repo, user string) (Permission, error) {
	const op = "get permission"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return "", err
	}
	if err := checkLogin(g.cfg.Name, op, repo, user); err != nil {
		return "", err
	}
	p, resp, err := g.client(ctx).CollaboratorPermission(owner, name, user)
	err = g.fail(ctx, op, repo, resp, err)
	if errors.Is(err, ErrNotFound) {
		// 404 is Gitea's answer for a user it does not know, and for a repository it does not
		// show this token: only the first is "none".
		if _, rerr := g.Repository(ctx, repo); rerr != nil {
			return "", rerr
		}
		return PermNone, nil
	}
	if err != nil {
		return "", err
	}
	if p == nil {
		return PermNone, nil
	}
	// The repository's owner is "owner": admin.
	return forgePermission(string(p.Permission)), nil
}

func (g *gitea) Self(ctx context.Context) (string, error) {
	const op = "get own user"
	return g.self.get(g.cfg, func() (string, error) {
		u, resp, err := g.client(ctx).GetMyUserInfo()
		if err := g.fail(ctx, op, "", resp, err); err != nil {
			return "", err
		}
		return u.UserName, nil
	})
}
