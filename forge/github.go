package forge

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v89/github"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// gitHub is the Forge of kind github.
type gitHub struct {
	cfg     Config
	client  *github.Client
	graphql string // the GraphQL endpoint (graphQLURL)
	self    selfCache
}

func newGitHub(cfg Config) (*gitHub, error) {
	base := cmp.Or(cfg.BaseURL, config.DefaultGitHubAPI)
	// Used as given (GitHub Enterprise: https://HOST/api/v3), unlike WithEnterpriseURLs, which
	// appends /api/v3/ itself.
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/")
	if err != nil || u.Host == "" {
		return nil, &Error{Forge: cfg.Name, Op: "configure", Class: workitems.ClassInvalidInput,
			Err: errors.New("base_url " + strconv.Quote(base) + " is not an absolute URL")}
	}
	s := u.String()
	c, err := github.NewClient(github.WithHTTPClient(authClient(cfg, "Bearer")), github.WithURLs(&s, &s),
		github.WithUserAgent("outerloop"))
	if err != nil {
		return nil, &Error{Forge: cfg.Name, Op: "configure", Class: workitems.ClassInvalidInput, Err: err}
	}
	return &gitHub{cfg: cfg, client: c, graphql: graphQLURL(u)}, nil
}

func (g *gitHub) Name() string              { return g.cfg.Name }
func (g *gitHub) Kind() workitems.ForgeKind { return workitems.ForgeGitHub }

func (g *gitHub) GitAuth(remoteURL string) (GitAuth, error) { return gitAuth(g.cfg, remoteURL) }

// do runs one request, waiting out a rate limit (primary or secondary) when it resets within
// MaxRateWait, and classifies its error.
func (g *gitHub) do(ctx context.Context, op, repo string, call func() (*github.Response, error)) error {
	for tries := 0; ; tries++ {
		resp, err := call()
		if err == nil {
			return nil
		}
		e := g.classify(ctx, op, repo, resp, err)
		if !errors.Is(e, ErrRateLimited) {
			return e
		}
		wait := max(e.RetryAt.Sub(g.cfg.Clock.Now()), time.Second)
		if tries >= 3 || wait > g.cfg.MaxRateWait {
			return e
		}
		g.cfg.Logger.WarnContext(ctx, "forge: rate limited, waiting", slog.String("forge", g.cfg.Name),
			slog.String("op", op), slog.Duration("wait", wait))
		if err := sleep(ctx, g.cfg.Clock, wait); err != nil {
			return &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassUnknown, Err: err}
		}
	}
}

// classify turns a go-github error into an *Error.
func (g *gitHub) classify(ctx context.Context, op, repo string, resp *github.Response, err error) *Error {
	e := &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Err: err}
	if resp != nil && resp.Response != nil {
		e.StatusCode = resp.StatusCode
	}
	var (
		gql  *graphQLError
		gate *rateLimitedError
		rl   *github.RateLimitError
		ab   *github.AbuseRateLimitError
		er   *github.ErrorResponse
		acc  *github.AcceptedError
	)
	switch {
	case errors.Is(err, ErrMissingToken):
		e.Class, e.StatusCode = workitems.ClassInvalidInput, 0
		var mt *missingTokenError
		if errors.As(err, &mt) {
			e.Err = mt
		}
	case errors.As(err, &gate):
		// Not sent: an earlier answer's limit has not reset yet.
		e.Class, e.Err, e.RetryAt, e.StatusCode = workitems.ClassTransient, ErrRateLimited, gate.Until, 0
	case errors.As(err, &gql):
		gql.classify(e, g.cfg.Clock.Now())
	case errors.As(err, &rl):
		e.Class, e.Err, e.RetryAt, e.Message = workitems.ClassTransient, ErrRateLimited, rl.Rate.Reset.Time, clip(rl.Message, 300)
	case errors.As(err, &ab):
		e.Class, e.Err, e.Message = workitems.ClassTransient, ErrRateLimited, clip(ab.Message, 300)
		e.RetryAt = g.cfg.Clock.Now().Add(cmp.Or(ab.GetRetryAfter(), time.Minute))
	case errors.As(err, &acc):
		// 202: GitHub is still computing the answer (statistics, mergeability).
		e.Class, e.Message = workitems.ClassTransient, "accepted, not ready yet"
	case errors.As(err, &er):
		e.Class, e.Message = classForStatus(e.StatusCode), clip(errorMessage(er), 300)
		e.Err = cmp.Or(sentinelForStatus(e.StatusCode), error(errors.New(http.StatusText(e.StatusCode))))
		if e.StatusCode == http.StatusTooManyRequests {
			// A 429 without GitHub's rate-limit headers: honour Retry-After when given.
			now := g.cfg.Clock.Now()
			e.Err, e.RetryAt = ErrRateLimited, now.Add(retryAfter(er.Response, now, time.Minute))
		}
	case ctx.Err() != nil:
		e.Class, e.Err = workitems.ClassUnknown, ctx.Err()
	default:
		e.Class = transportError(err)
	}
	return e
}

func errorMessage(er *github.ErrorResponse) string {
	parts := []string{er.Message}
	for _, d := range er.Errors {
		parts = append(parts, cmp.Or(d.Message, strings.TrimSpace(d.Field+" "+d.Code)))
	}
	return strings.Join(parts, "; ")
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), or def.
func retryAfter(r *http.Response, now time.Time, def time.Duration) time.Duration {
	if r != nil {
		if d, ok := parseRetryAfter(r.Header.Get("Retry-After"), now); ok {
			return d
		}
	}
	return def
}

func (g *gitHub) split(op, repo string) (string, string, error) {
	owner, name, err := workitems.ParseRepoSlug(repo)
	if err != nil {
		return "", "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvalidInput, Err: err}
	}
	return owner, name, nil
}

func (g *gitHub) Repository(ctx context.Context, repo string) (*Repository, error) {
	const op = "get repository"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	var r *github.Repository
	if err := g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		r, resp, err = g.client.Repositories.Get(ctx, owner, name)
		return resp, err
	}); err != nil {
		return nil, err
	}
	return &Repository{Repo: repo, DefaultBranch: r.GetDefaultBranch(), CloneURL: r.GetCloneURL(), HTMLURL: r.GetHTMLURL()}, nil
}

func (g *gitHub) pull(p *github.PullRequest) *PullRequest {
	out := &PullRequest{Number: p.GetNumber(), URL: p.GetHTMLURL(), State: workitems.PROpen, Draft: p.GetDraft(),
		Title: p.GetTitle(), Body: p.GetBody(), Base: p.GetBase().GetRef(), Head: p.GetHead().GetRef(),
		HeadSHA: p.GetHead().GetSHA(), ClosedAt: p.GetClosedAt().Time}
	switch {
	case p.MergedAt != nil || p.GetMerged():
		// merge_commit_sha of an open pull request is GitHub's test merge: only kept once merged.
		out.State, out.MergeCommitSHA, out.MergedBy = workitems.PRMerged, p.GetMergeCommitSHA(), p.GetMergedBy().GetLogin()
	case p.GetState() == "closed":
		out.State = workitems.PRClosed
	}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

func (g *gitHub) PullRequestsFor(ctx context.Context, repo, branch string) (BranchPullRequests, error) {
	const op = "find pull requests"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return BranchPullRequests{}, err
	}
	var out BranchPullRequests
	opts := &github.PullRequestListOptions{State: "all", Head: owner + ":" + branch, Sort: "created", Direction: "desc",
		ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < 10; page++ {
		var prs []*github.PullRequest
		var resp *github.Response
		if err := g.do(ctx, op, repo, func() (r *github.Response, err error) {
			prs, resp, err = g.client.PullRequests.List(ctx, owner, name, opts)
			return resp, err
		}); err != nil {
			return BranchPullRequests{}, err
		}
		for _, p := range prs {
			// The head filter is the server's; check it, and keep to this repository's branch.
			if p.GetHead().GetRef() != branch || !strings.EqualFold(p.GetHead().GetRepo().GetFullName(), repo) {
				continue
			}
			pr := g.pull(p)
			if pr.State == workitems.PROpen {
				if out.Open == nil {
					out.Open = pr
				}
			} else if out.LastClosed == nil || pr.ClosedAt.After(out.LastClosed.ClosedAt) {
				out.LastClosed = pr
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

func (g *gitHub) CreatePullRequest(ctx context.Context, repo string, np NewPullRequest) (*PullRequest, error) {
	const op = "create pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	var p *github.PullRequest
	err = g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		p, resp, err = g.client.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{Title: &np.Title,
			Body: &np.Body, Base: &np.Base, Head: &np.Head, Draft: &np.Draft})
		return resp, err
	})
	if err != nil {
		var e *Error
		// GitHub answers 422 "A pull request already exists for owner:branch."
		if errors.As(err, &e) && e.StatusCode == http.StatusUnprocessableEntity && g.isExisting(ctx, repo, np.Head) {
			e.Class, e.Err = workitems.ClassConflict, ErrPullRequestExists
		}
		return nil, err
	}
	return g.pull(p), nil
}

// isExisting reports whether an open pull request has head branch (to tell "exists already"
// from other 422s without reading the message).
func (g *gitHub) isExisting(ctx context.Context, repo, branch string) bool {
	b, err := g.PullRequestsFor(ctx, repo, branch)
	return err == nil && b.Open != nil
}

func (g *gitHub) EditPullRequest(ctx context.Context, repo string, number int, edit PullRequestEdit) (*PullRequest, error) {
	const op = "edit pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	var p *github.PullRequest
	if err := g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		p, resp, err = g.client.PullRequests.Edit(ctx, owner, name, number, &github.PullRequest{Title: edit.Title, Body: edit.Body})
		return resp, err
	}); err != nil {
		return nil, err
	}
	return g.pull(p), nil
}

// getPull reads one pull request (GET /pulls/{n}).
func (g *gitHub) getPull(ctx context.Context, op, repo, owner, name string, number int) (*github.PullRequest, error) {
	var p *github.PullRequest
	err := g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		p, resp, err = g.client.PullRequests.Get(ctx, owner, name, number)
		return resp, err
	})
	return p, err
}

func (g *gitHub) ClosePullRequest(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "close pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	cur, err := g.getPull(ctx, op, repo, owner, name, number)
	if err != nil {
		return nil, err
	}
	switch pr := g.pull(cur); pr.State {
	case workitems.PRClosed:
		return pr, nil
	case workitems.PRMerged:
		return nil, notOpen(g.cfg.Name, op, repo, pr)
	}
	var p *github.PullRequest
	err = g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		p, resp, err = g.client.PullRequests.Edit(ctx, owner, name, number, &github.PullRequest{State: github.Ptr("closed")})
		return resp, err
	})
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusUnprocessableEntity {
		// Merged since it was read: GitHub refuses to change a merged one's state.
		if now, rerr := g.getPull(ctx, op, repo, owner, name, number); rerr == nil && g.pull(now).Merged() {
			e.Class, e.Err = workitems.ClassInvalidInput, ErrNotOpen
		}
	}
	if err != nil {
		return nil, err
	}
	return g.pull(p), nil
}

func (g *gitHub) AddLabels(ctx context.Context, repo string, number int, labels []string) error {
	const op = "add labels"
	owner, name, err := g.split(op, repo)
	if err != nil || len(labels) == 0 {
		return err
	}
	// GitHub creates labels the repository lacks.
	return g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		_, resp, err = g.client.Issues.AddLabelsToIssue(ctx, owner, name, number, labels)
		return resp, err
	})
}

func (g *gitHub) Comment(ctx context.Context, repo string, number int, body string) error {
	const op = "comment"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return err
	}
	return g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		_, resp, err = g.client.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: &body})
		return resp, err
	})
}

func (g *gitHub) Merge(ctx context.Context, repo string, number int, m MergeRequest) (string, error) {
	const op = "merge pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return "", err
	}
	if err := checkMerge(g.cfg.Name, repo, m); err != nil {
		return "", err
	}
	var res *github.PullRequestMergeResult
	err = g.do(ctx, op, repo, func() (resp *github.Response, err error) {
		res, resp, err = g.client.PullRequests.Merge(ctx, owner, name, number, m.Message,
			&github.PullRequestOptions{CommitTitle: m.Title, SHA: m.ExpectedHeadSHA, MergeMethod: string(m.Method)})
		return resp, err
	})
	var e *Error
	if errors.As(err, &e) {
		switch e.StatusCode {
		case http.StatusMethodNotAllowed: // "Pull Request is not mergeable"
			e.Err = ErrNotMergeable
		case http.StatusConflict: // "Head branch was modified. Review and try the merge again."
			e.Err = ErrHeadMoved
		}
		return "", err
	}
	if !res.GetMerged() || res.GetSHA() == "" {
		return "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassConflict, Err: ErrNotMergeable,
			Message: clip(res.GetMessage(), 300)}
	}
	return res.GetSHA(), nil
}

// checkMerge refuses a merge request that could merge something unchecked.
func checkMerge(forge, repo string, m MergeRequest) error {
	bad := func(msg string) error {
		return &Error{Forge: forge, Op: "merge pull request", Repo: repo, Class: workitems.ClassInvalidInput, Err: errors.New(msg)}
	}
	if m.ExpectedHeadSHA == "" {
		return bad("no expected head SHA: refusing to merge a head nobody checked")
	}
	for _, mm := range workitems.AllMergeMethods() {
		if m.Method == mm {
			return nil
		}
	}
	return bad("merge method " + strconv.Quote(string(m.Method)) + " is not merge, squash or rebase")
}

// checkRuns lists the latest check run per name for sha.
func (g *gitHub) checkRuns(ctx context.Context, repo, owner, name, sha string) (map[string]*github.CheckRun, error) {
	latest := map[string]*github.CheckRun{}
	opts := &github.ListCheckRunsOptions{Filter: github.Ptr("all"), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		var res *github.ListCheckRunsResults
		var resp *github.Response
		if err := g.do(ctx, "list check runs", repo, func() (r *github.Response, err error) {
			res, resp, err = g.client.Checks.ListCheckRunsForRef(ctx, owner, name, sha, opts)
			return resp, err
		}); err != nil {
			return nil, err
		}
		for _, r := range res.CheckRuns {
			if r.GetHeadSHA() != sha {
				continue // evidence for another commit
			}
			if old, ok := latest[r.GetName()]; !ok || newerRun(r, old) {
				latest[r.GetName()] = r
			}
		}
		if resp.NextPage == 0 {
			return latest, nil
		}
		opts.Page = resp.NextPage
	}
}

func (g *gitHub) Checks(ctx context.Context, repo, sha string) ([]Check, error) {
	owner, name, err := g.split("list checks", repo)
	if err != nil {
		return nil, err
	}
	runs, err := g.checkRuns(ctx, repo, owner, name, sha)
	if err != nil {
		return nil, err
	}
	var out []Check
	for n, r := range runs {
		out = append(out, Check{Name: n, State: CheckRunState(r.GetStatus(), r.GetConclusion()), SHA: sha,
			URL:     cmp.Or(r.GetHTMLURL(), r.GetDetailsURL()),
			Summary: clip(cmp.Or(r.GetOutput().GetTitle(), r.GetOutput().GetSummary()), 200)})
	}
	statuses := map[string]*github.RepoStatus{}
	lo := &github.ListOptions{PerPage: 100}
	for {
		var page []*github.RepoStatus
		var resp *github.Response
		if err := g.do(ctx, "list commit statuses", repo, func() (r *github.Response, err error) {
			page, resp, err = g.client.Repositories.ListStatuses(ctx, owner, name, sha, lo)
			return resp, err
		}); err != nil {
			return nil, err
		}
		for _, s := range page {
			if old, ok := statuses[s.GetContext()]; !ok || newerStatus(s, old) {
				statuses[s.GetContext()] = s
			}
		}
		if resp.NextPage == 0 {
			break
		}
		lo.Page = resp.NextPage
	}
	for c, s := range statuses {
		if _, dup := runs[c]; dup {
			continue // a check run and a status of one name: the check run is richer
		}
		out = append(out, Check{Name: c, State: GitHubStatusState(s.GetState()), SHA: sha, URL: s.GetTargetURL(),
			Summary: clip(s.GetDescription(), 200)})
	}
	sortChecks(out)
	return out, nil
}

func (g *gitHub) RerunChecks(ctx context.Context, repo, sha string, names []string) ([]string, error) {
	const op = "re-run check"
	owner, name, err := g.split(op, repo)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	runs, err := g.checkRuns(ctx, repo, owner, name, sha)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, n := range names {
		r, ok := runs[n]
		if !ok {
			continue // a commit status: nothing to re-request
		}
		if err := g.do(ctx, op, repo, func() (*github.Response, error) {
			return g.client.Checks.ReRequestCheckRun(ctx, owner, name, r.GetID())
		}); err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, n)
	}
	return done, errors.Join(errs...)
}

func newerRun(a, b *github.CheckRun) bool {
	ta, tb := a.GetStartedAt().Time, b.GetStartedAt().Time
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.GetID() > b.GetID()
}

func newerStatus(a, b *github.RepoStatus) bool {
	ta, tb := a.GetCreatedAt().Time, b.GetCreatedAt().Time
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.GetID() > b.GetID()
}

// CheckRunState normalises a GitHub check run's (or a Gitea Actions job's) status and
// conclusion, as read from the API or a webhook.
func CheckRunState(status, conclusion string) workitems.CheckState {
	if status != "completed" {
		switch status {
		case "queued", "in_progress", "waiting", "requested", "pending":
			return workitems.CheckPending
		}
		return workitems.CheckUnknown
	}
	switch conclusion {
	case "success":
		return workitems.CheckSuccess
	case "failure", "timed_out":
		return workitems.CheckFailure
	case "neutral", "skipped":
		return workitems.CheckNeutral
	case "cancelled":
		return workitems.CheckCancelled
	case "action_required":
		return workitems.CheckActionRequired
	case "stale":
		return workitems.CheckStale
	case "startup_failure":
		return workitems.CheckInfraError
	}
	return workitems.CheckUnknown
}

// GitHubStatusState normalises a GitHub commit status ("error" is the CI system's own failure).
func GitHubStatusState(s string) workitems.CheckState {
	switch s {
	case "success":
		return workitems.CheckSuccess
	case "failure":
		return workitems.CheckFailure
	case "error":
		return workitems.CheckInfraError
	case "pending":
		return workitems.CheckPending
	}
	return workitems.CheckUnknown
}
