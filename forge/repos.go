package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	gsdk "code.gitea.io/sdk/gitea"
	"github.com/google/go-github/v89/github"

	"outerloop/workitems"
)

// RepoLister lists an owner's repositories: what a fleet template's repos_from discovers.
// Both forges implement it; a caller holding a Forge asserts it (f.(forge.RepoLister)).
type RepoLister interface {
	// ListRepos returns every repository of q.Owner (an organisation, else a user) the token
	// can see, all pages, keeping those with q.Topic when one is given. A listing longer than
	// MaxListedRepos fails rather than return part of the fleet.
	ListRepos(ctx context.Context, q RepoQuery) ([]ListedRepo, error)
}

// RepoQuery is what ListRepos lists.
type RepoQuery struct {
	Owner string // organisation or user
	Topic string // "" keeps all; compared case-insensitively (both forges store topics lower case)
}

// ListedRepo is one repository of a listing, with what a fleet filters on.
type ListedRepo struct {
	Repo          string   `json:"repo"`      // owner/name
	CloneURL      string   `json:"clone_url"` // http(s), no credentials
	DefaultBranch string   `json:"default_branch"`
	Archived      bool     `json:"archived,omitempty"`
	Empty         bool     `json:"empty,omitempty"`    // no commits: nothing to work on
	CanPull       bool     `json:"can_pull,omitempty"` // the token may read it
	Topics        []string `json:"topics,omitempty"`
}

// MaxListedRepos bounds a listing, so a wrong owner (a huge public user) cannot make a fleet
// of tens of thousands of repositories.
const MaxListedRepos = 10000

var (
	_ RepoLister = (*gitea)(nil)
	_ RepoLister = (*gitHub)(nil)
)

// hasTopic reports whether topics holds topic ("" matches everything).
func hasTopic(topics []string, topic string) bool {
	return topic == "" || slices.ContainsFunc(topics, func(t string) bool { return strings.EqualFold(t, topic) })
}

// canPull is the token's pull permission; without one in the answer (an anonymous listing), a
// public repository is readable by anyone.
func canPull(pull *bool, private bool) bool {
	if pull != nil {
		return *pull
	}
	return !private
}

func (g *gitea) listError(op string, err error) error {
	return &Error{Forge: g.cfg.Name, Op: op, Class: workitems.ClassInvalidInput, Err: err}
}

// ListRepos reads /orgs/{owner}/repos (a 404 there: /users/{owner}/repos) page by page.
// Topics are filtered here, on each repository's topics field: Gitea's /repos/search with
// topic=true also matches repositories the owner merely contributes to.
func (g *gitea) ListRepos(ctx context.Context, q RepoQuery) ([]ListedRepo, error) {
	op := "list repositories of " + q.Owner // errors name the owner (Error.Repo is for owner/name)
	if q.Owner == "" {
		return nil, g.listError("list repositories", errors.New("no owner"))
	}
	size := g.cfg.listPageSize
	if size <= 0 {
		size = 50 // Gitea's default MAX_RESPONSE_ITEMS: a larger limit is cut to it
	}
	c := g.client(ctx)
	org := true
	var out []ListedRepo
	for page := 1; ; page++ {
		lo := gsdk.ListOptions{Page: page, PageSize: size}
		var rs []*gsdk.Repository
		var resp *gsdk.Response
		var err error
		if org {
			rs, resp, err = c.ListOrgRepos(q.Owner, gsdk.ListOrgReposOptions{ListOptions: lo})
			if page == 1 && resp != nil && resp.Response != nil && resp.StatusCode == http.StatusNotFound {
				org = false // a user, not an organisation
				rs, resp, err = c.ListUserRepos(q.Owner, gsdk.ListReposOptions{ListOptions: lo})
			}
		} else {
			rs, resp, err = c.ListUserRepos(q.Owner, gsdk.ListReposOptions{ListOptions: lo})
		}
		if err := g.fail(ctx, op, "", resp, err); err != nil {
			return nil, err
		}
		for _, r := range rs {
			if !hasTopic(r.Topics, q.Topic) {
				continue
			}
			var pull *bool
			if r.Permissions != nil {
				pull = &r.Permissions.Pull
			}
			out = append(out, ListedRepo{Repo: r.FullName, CloneURL: r.CloneURL, DefaultBranch: r.DefaultBranch,
				Archived: r.Archived, Empty: r.Empty, CanPull: canPull(pull, r.Private), Topics: r.Topics})
		}
		seen := (page-1)*size + len(rs)
		if seen > MaxListedRepos {
			return nil, g.listError(op, fmt.Errorf("more than %d repositories", MaxListedRepos))
		}
		// A short page is the last; so is one that reaches the total Gitea counted.
		total, terr := strconv.Atoi(resp.Header.Get("X-Total-Count"))
		if len(rs) < size || (terr == nil && seen >= total) {
			return out, nil
		}
	}
}

// ListRepos reads /orgs/{owner}/repos (a 404 there: /users/{owner}/repos), following the Link
// header's next page.
func (g *gitHub) ListRepos(ctx context.Context, q RepoQuery) ([]ListedRepo, error) {
	op := "list repositories of " + q.Owner // errors name the owner (Error.Repo is for owner/name)
	if q.Owner == "" {
		return nil, &Error{Forge: g.cfg.Name, Op: "list repositories", Class: workitems.ClassInvalidInput, Err: errors.New("no owner")}
	}
	size := g.cfg.listPageSize
	if size <= 0 {
		size = 100 // GitHub's largest page
	}
	org := true
	var out []ListedRepo
	seen := 0
	lo := github.ListOptions{PerPage: size}
	for {
		var rs []*github.Repository
		var resp *github.Response
		list := func() (r *github.Response, err error) {
			if org {
				rs, r, err = g.client.Repositories.ListByOrg(ctx, q.Owner, &github.RepositoryListByOrgOptions{
					Sort: "full_name", ListOptions: lo})
			} else {
				rs, r, err = g.client.Repositories.ListByUser(ctx, q.Owner, &github.RepositoryListByUserOptions{
					Type: "owner", Sort: "full_name", ListOptions: lo})
			}
			resp = r
			return r, err
		}
		err := g.do(ctx, op, "", list)
		if org && lo.Page == 0 && errors.Is(err, ErrNotFound) {
			org = false // a user, not an organisation
			err = g.do(ctx, op, "", list)
		}
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if !hasTopic(r.Topics, q.Topic) {
				continue
			}
			var pull *bool
			if p := r.GetPermissions(); p != nil {
				pull = p.Pull
			}
			out = append(out, ListedRepo{Repo: r.GetFullName(), CloneURL: r.GetCloneURL(),
				DefaultBranch: r.GetDefaultBranch(), Archived: r.GetArchived(), Empty: r.GetSize() == 0,
				CanPull: canPull(pull, r.GetPrivate()), Topics: r.Topics})
		}
		if seen += len(rs); seen > MaxListedRepos {
			return nil, &Error{Forge: g.cfg.Name, Op: op, Class: workitems.ClassInvalidInput,
				Err: fmt.Errorf("more than %d repositories", MaxListedRepos)}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		lo.Page = resp.NextPage
	}
}
