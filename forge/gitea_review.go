package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	gsdk "code.gitea.io/sdk/gitea"

	"outerloop/workitems"
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
	p, resp, err := g.client(ctx).GetPullRequest(owner, name, int64(number))
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, err
	}
	out := g.pull(p)
	if out.State == workitems.PRClosed {
		if out.ClosedBy, err = g.closedBy(ctx, repo, owner, name, number, out.ClosedAt); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// closedBy is who closed an issue or pull request last: the account of the newest "close"
// entry of its timeline (GET /issues/{index}/timeline, from a minute before closedAt; Gitea's
// pull request object does not say). "" when the timeline has none, or this Gitea has no
// timeline or answers one that cannot be read. The SDK's TimelineComment cannot read a
// timeline that holds a label change (Gitea 1.27 sends "label" as an object), so the entries
// are decoded here, only what is used.
func (g *gitea) closedBy(ctx context.Context, repo, owner, name string, number int, closedAt time.Time) (string, error) {
	const op = "read the pull request's timeline"
	const limit = 50
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if !closedAt.IsZero() {
		q.Set("since", closedAt.Add(-time.Minute).UTC().Format(time.RFC3339))
	}
	by := ""
	for page := 1; page <= maxPages; page++ {
		q.Set("page", strconv.Itoa(page))
		u := fmt.Sprintf("%s/api/v1/repos/%s/%s/issues/%d/timeline?%s", g.base, url.PathEscape(owner), url.PathEscape(name), number, q.Encode())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return "", g.fail(ctx, op, repo, nil, err)
		}
		resp, err := g.http.Do(req)
		if err != nil {
			return "", g.fail(ctx, op, repo, nil, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode >= 400 {
			err = errors.New(clip(string(body), 300))
		}
		if err := g.fail(ctx, op, repo, &gsdk.Response{Response: resp}, err); err != nil {
			if errors.Is(err, ErrNotFound) {
				return "", nil // a Gitea without the timeline: it does not say
			}
			return "", err
		}
		var entries []struct {
			Type string `json:"type"`
			User *struct {
				Login string `json:"login"`
			} `json:"user"`
		}
		if err := json.Unmarshal(body, &entries); err != nil {
			return "", nil // not a timeline this code reads: it does not say
		}
		for _, e := range entries {
			if e.Type == "close" && e.User != nil {
				by = e.User.Login
			}
		}
		if len(entries) < limit {
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
