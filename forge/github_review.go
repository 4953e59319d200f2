package forge

import (
	"context"
	"errors"

	"github.com/google/go-github/v89/github"

	"outerloop/workitems"
)

// GitHub's page size and how far its listings are read.
const (
	ghPerPage = 100
	// ghMaxReviewPages bounds the review pages read when GitHub gives no last page to skip to.
	ghMaxReviewPages = 30
	// ghMaxCommentPages bounds the comment pages scanned for the kept reviews' comments.
	ghMaxCommentPages = 10
)

func (g *gitHub) PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "get pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	p, err := g.getPull(ctx, op, repo, owner, name, number)
	if err != nil {
		return nil, err
	}
	out := g.pull(p)
	if out.State == workitems.PRClosed {
		// Who closed it is the issue's closed_by: the pull request's own object does not say.
		var is *github.Issue
		if err := g.do(ctx, op, repo, func() (resp *github.Response, err error) {
			is, resp, err = g.client.Issues.Get(ctx, owner, name, number)
			return resp, err
		}); err != nil {
			return nil, err
		}
		out.ClosedBy = is.GetClosedBy().GetLogin()
	}
	return out, nil
}

// Reviews reads GET /pulls/{n}/reviews (oldest first; after the first page it skips to the
// last pages, which hold the newest MaxReviews), then GET /pulls/{n}/comments newest first,
// keeping the comments whose pull_request_review_id is a kept review until
// MaxReviewComments.
func (g *gitHub) Reviews(ctx context.Context, repo string, number int) ([]Review, error) {
	const op = "list reviews"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	var w reviewWindow
	opts := &github.ListOptions{PerPage: ghPerPage}
	for read := 1; ; read++ {
		var page []*github.PullRequestReview
		var resp *github.Response
		if err := g.do(ctx, op, repo, func() (r *github.Response, err error) {
			page, resp, err = g.client.PullRequests.ListReviews(ctx, owner, name, number, opts)
			return resp, err
		}); err != nil {
			return nil, err
		}
		for _, r := range page {
			if rv, ok := gitHubReview(r); ok {
				w.add(rv)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		if read >= ghMaxReviewPages {
			return nil, tooManyReviews(g.cfg.Name, op, repo)
		}
		next := resp.NextPage
		// Only the newest MaxReviews are kept: go straight to the pages that hold them.
		if tail := resp.LastPage - (MaxReviews+ghPerPage-1)/ghPerPage; tail > next {
			next = tail
		}
		opts.Page = next
	}
	reviews := w.reviews()
	if len(reviews) == 0 {
		return reviews, nil
	}
	byID := make(map[int64]int, len(reviews))
	for i, r := range reviews {
		byID[r.ID] = i
	}
	const cop = "list review comments"
	copts := &github.PullRequestListCommentsOptions{Sort: "created", Direction: "desc",
		ListOptions: github.ListOptions{PerPage: ghPerPage}}
	kept := 0
	for read := 1; read <= ghMaxCommentPages && kept < MaxReviewComments; read++ {
		var page []*github.PullRequestComment
		var resp *github.Response
		if err := g.do(ctx, cop, repo, func() (r *github.Response, err error) {
			page, resp, err = g.client.PullRequests.ListComments(ctx, owner, name, number, copts)
			return resp, err
		}); err != nil {
			return nil, err
		}
		for _, c := range page {
			i, ok := byID[c.GetPullRequestReviewID()]
			if !ok || kept >= MaxReviewComments {
				continue
			}
			reviews[i].Comments = append(reviews[i].Comments, ReviewComment{ID: c.GetID(), User: c.GetUser().GetLogin(),
				Path: c.GetPath(), Line: gitHubCommentLine(c),
				Body: clipBody(c.GetBody()), URL: c.GetHTMLURL()})
			kept++
		}
		if resp.NextPage == 0 {
			break
		}
		copts.Page = resp.NextPage
	}
	for i := range reviews {
		sortComments(reviews[i].Comments)
	}
	return reviews, nil
}

// gitHubCommentLine is the comment's line: line, or original_line when the line is gone from
// the current diff (an outdated comment).
func gitHubCommentLine(c *github.PullRequestComment) int {
	if c.Line != nil {
		return c.GetLine()
	}
	return c.GetOriginalLine()
}

// gitHubReview maps a review; ok is false for a pending one.
func gitHubReview(r *github.PullRequestReview) (Review, bool) {
	st, ok := gitHubReviewState(r.GetState())
	if !ok {
		return Review{}, false
	}
	return Review{ID: r.GetID(), User: r.GetUser().GetLogin(), State: st, Body: clipBody(r.GetBody()),
		CommitSHA: r.GetCommitID(), SubmittedAt: r.GetSubmittedAt().Time, URL: r.GetHTMLURL()}, true
}

func (g *gitHub) Permission(ctx context.Context, repo, user string) (Permission, error) {
	const op = "get permission"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return "", err
	}
	if err := checkLogin(g.cfg.Name, op, repo, user); err != nil {
		return "", err
	}
	var lvl *github.RepositoryPermissionLevel
	err = g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		lvl, resp, err = g.client.Repositories.GetPermissionLevel(ctx, owner, name, user)
		return resp, err
	})
	if errors.Is(err, ErrNotFound) {
		// 404 is GitHub's answer for a user it does not know, and for a repository it does
		// not show this token: only the first is "none".
		if _, rerr := g.Repository(ctx, repo); rerr != nil {
			return "", rerr
		}
		return PermNone, nil
	}
	if err != nil {
		return "", err
	}
	return forgePermission(lvl.GetPermission()), nil
}

func (g *gitHub) Self(ctx context.Context) (string, error) {
	const op = "get own user"
	return g.self.get(g.cfg, func() (string, error) {
		var u *github.User
		if err := g.do(ctx, op, "", func() (resp *github.Response, err error) {
			u, resp, err = g.client.Users.Get(ctx, "")
			return resp, err
		}); err != nil {
			return "", err
		}
		return u.GetLogin(), nil
	})
}
