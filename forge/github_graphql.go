package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v89/github"

	"outerloop/workitems"
)

// graphQLURL is GitHub's GraphQL endpoint beside the REST root rest (which ends in "/"):
// https://api.github.com/graphql, and https://HOST/api/graphql beside GitHub Enterprise
// Server's https://HOST/api/v3/.
func graphQLURL(rest *url.URL) string {
	u := *rest
	if p, ok := strings.CutSuffix(u.Path, "/api/v3/"); ok {
		u.Path = p + "/api/graphql"
	} else {
		u.Path += "graphql"
	}
	u.RawPath = ""
	return u.String()
}

// gqlError is one entry of a GraphQL answer's errors: the spec's message, and the type GitHub
// adds (NOT_FOUND, FORBIDDEN, RATE_LIMITED, …; none on a query that does not validate).
type gqlError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// graphQLError is a GraphQL answer that carries errors: GitHub answers them with 200.
type graphQLError struct {
	errs []gqlError
	resp *http.Response
}

func (e *graphQLError) Error() string {
	msgs := make([]string, 0, len(e.errs))
	for _, x := range e.errs {
		if x.Type != "" {
			x.Message = x.Type + ": " + x.Message
		}
		msgs = append(msgs, x.Message)
	}
	return "graphql: " + strings.Join(msgs, "; ")
}

func (e *graphQLError) has(types ...string) bool {
	for _, x := range e.errs {
		for _, t := range types {
			if x.Type == t {
				return true
			}
		}
	}
	return false
}

// classify sets e's class and sentinel from the errors' types, a rate limit first: it is the
// one that passes by waiting.
func (e *graphQLError) classify(out *Error, now time.Time) {
	out.Message = clip(e.Error(), 300)
	switch {
	case e.has("RATE_LIMITED", "RATE_LIMIT"):
		out.Class, out.Err, out.RetryAt = workitems.ClassTransient, ErrRateLimited, e.retryAt(now)
	case e.has("NOT_FOUND"):
		out.Class, out.Err = workitems.ClassNotFound, ErrNotFound
	case e.has("FORBIDDEN"):
		out.Class, out.Err = workitems.ClassPermission, ErrAuth
	default: // a query or input GitHub refused
		out.Class, out.Err = workitems.ClassInvalidInput, errors.New("graphql request refused")
	}
}

// retryAt is when a GraphQL rate limit resets: Retry-After (a secondary limit), else
// X-RateLimit-Reset (the primary one), else a minute from now.
func (e *graphQLError) retryAt(now time.Time) time.Time {
	if e.resp != nil {
		if d, ok := parseRetryAfter(e.resp.Header.Get("Retry-After"), now); ok {
			return now.Add(d)
		}
		if s, err := strconv.ParseInt(e.resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return time.Unix(s, 0)
		}
	}
	return now.Add(time.Minute)
}

// graphQL posts one GraphQL operation through the REST client (the same token, rate gate,
// timeouts, retries and classification as every REST call) and decodes its data into out.
func (g *gitHub) graphQL(ctx context.Context, op, repo, query string, vars map[string]any, out any) error {
	return g.do(ctx, op, repo, func() (*github.Response, error) {
		req, err := g.client.NewRequest(ctx, http.MethodPost, g.graphql, map[string]any{"query": query, "variables": vars})
		if err != nil {
			return nil, err
		}
		var answer struct {
			Data   json.RawMessage `json:"data"`
			Errors []gqlError      `json:"errors"`
		}
		resp, err := g.client.Do(req, &answer)
		switch {
		case err != nil:
			return resp, err
		case len(answer.Errors) > 0:
			return resp, &graphQLError{errs: answer.Errors, resp: resp.Response}
		case len(answer.Data) == 0:
			return resp, errors.New("graphql: an answer with neither data nor errors")
		}
		if err := json.Unmarshal(answer.Data, out); err != nil {
			return resp, fmt.Errorf("graphql: reading data: %w", err)
		}
		return resp, nil
	})
}

// markReadyMutation makes a draft pull request ready for review: REST cannot.
const markReadyMutation = `mutation($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft } }
}`

// MarkReady sends markPullRequestReadyForReview with the pull request's node_id (GraphQL's id
// of it), then reads the pull request back.
func (g *gitHub) MarkReady(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "mark pull request ready"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	cur, err := g.getPull(ctx, op, repo, owner, name, number)
	if err != nil {
		return nil, err
	}
	pr := g.pull(cur)
	switch {
	case !pr.Draft:
		return pr, nil
	case pr.State != workitems.PROpen:
		return nil, notOpen(g.cfg.Name, op, repo, pr)
	case cur.GetNodeID() == "":
		return nil, &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvariantViolation,
			Err: errors.New("the pull request has no node_id")}
	}
	var data struct {
		Mark *struct {
			PullRequest *struct {
				IsDraft bool `json:"isDraft"`
			} `json:"pullRequest"`
		} `json:"markPullRequestReadyForReview"`
	}
	if err := g.graphQL(ctx, op, repo, markReadyMutation, map[string]any{"id": cur.GetNodeID()}, &data); err != nil {
		return nil, err
	}
	if data.Mark == nil || data.Mark.PullRequest == nil || data.Mark.PullRequest.IsDraft {
		return nil, &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvariantViolation,
			Err: errors.New("the mutation did not answer a pull request that is no draft")}
	}
	p, err := g.getPull(ctx, op, repo, owner, name, number)
	if err != nil {
		return nil, err
	}
	out := g.pull(p)
	out.Draft = false // the mutation's answer, should the REST read lag behind it
	return out, nil
}
