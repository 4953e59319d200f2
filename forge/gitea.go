package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	gsdk "code.gitea.io/sdk/gitea"

	"outerloop/workitems"
)

// gitea is the Forge of kind gitea (Gitea, Forgejo, Codeberg).
type gitea struct {
	cfg  Config
	base string
	http *http.Client
	self selfCache
}

func newGitea(cfg Config) (*gitea, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &Error{Forge: cfg.Name, Op: "configure", Class: workitems.ClassInvalidInput,
			Err: errors.New("base_url " + redactURL(cfg.BaseURL) + " is not an http(s) URL")}
	}
	return &gitea{cfg: cfg, base: strings.TrimSuffix(cfg.BaseURL, "/"), http: authClient(cfg, "token")}, nil
}

func (g *gitea) Name() string              { return g.cfg.Name }
func (g *gitea) Kind() workitems.ForgeKind { return workitems.ForgeGitea }

func (g *gitea) GitAuth(remoteURL string) (GitAuth, error) { return gitAuth(g.cfg, remoteURL) }

// client is an SDK client bound to ctx: the SDK takes its context per client, not per call,
// so each operation gets its own (cheap: no version probe, the token is in the transport).
func (g *gitea) client(ctx context.Context) *gsdk.Client {
	c, _ := gsdk.NewClient(g.base, gsdk.SetHTTPClient(g.http), gsdk.SetContext(ctx), gsdk.SetGiteaVersion(""),
		gsdk.SetUserAgent("outerloop"))
	return c
}

func (g *gitea) split(op, repo string) (string, string, error) {
	owner, name, err := workitems.ParseRepoSlug(repo)
	if err != nil {
		return "", "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvalidInput, Err: err}
	}
	return owner, name, nil
}

// fail classifies an SDK error (nil stays nil).
func (g *gitea) fail(ctx context.Context, op, repo string, resp *gsdk.Response, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Err: err}
	var mt *missingTokenError
	var gate *rateLimitedError
	switch {
	case errors.As(err, &mt):
		e.Class, e.Err = workitems.ClassInvalidInput, mt
	case errors.As(err, &gate):
		// Not sent: an earlier answer's limit has not reset yet.
		e.Class, e.Err, e.RetryAt = workitems.ClassTransient, ErrRateLimited, gate.Until
	case resp != nil && resp.Response != nil && resp.StatusCode >= 400:
		e.StatusCode, e.Class, e.Message = resp.StatusCode, classForStatus(resp.StatusCode), clip(err.Error(), 300)
		e.Err = cmp.Or(sentinelForStatus(resp.StatusCode), error(errors.New(http.StatusText(resp.StatusCode))))
		if resp.StatusCode == http.StatusTooManyRequests {
			now := g.cfg.Clock.Now()
			e.Err, e.RetryAt = ErrRateLimited, now.Add(retryAfter(resp.Response, now, 0))
		}
	case ctx.Err() != nil:
		e.Class, e.Err = workitems.ClassUnknown, ctx.Err()
	default:
		e.Class = transportError(err)
	}
	return e
}

// status is an error for a call whose SDK method reports only the status code.
func (g *gitea) status(op, repo string, resp *gsdk.Response, sentinel error) error {
	e := &Error{Forge: g.cfg.Name, Op: op, Repo: repo, StatusCode: resp.StatusCode, Class: classForStatus(resp.StatusCode)}
	e.Err = cmp.Or(sentinel, sentinelForStatus(resp.StatusCode), error(errors.New(http.StatusText(resp.StatusCode))))
	return e
}

func (g *gitea) Repository(ctx context.Context, repo string) (*Repository, error) {
	const op = "get repository"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	r, resp, err := g.client(ctx).GetRepo(owner, name)
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, err
	}
	return &Repository{Repo: repo, DefaultBranch: r.DefaultBranch, CloneURL: r.CloneURL, HTMLURL: r.HTMLURL}, nil
}

func (g *gitea) pull(p *gsdk.PullRequest) *PullRequest {
	out := &PullRequest{Number: int(p.Index), URL: p.HTMLURL, State: workitems.PROpen, Draft: p.Draft, Title: p.Title, Body: p.Body}
	if p.Base != nil {
		out.Base = p.Base.Ref
	}
	if p.Head != nil {
		out.Head, out.HeadSHA = p.Head.Ref, p.Head.Sha
	}
	if p.Closed != nil {
		out.ClosedAt = *p.Closed
	}
	switch {
	case p.HasMerged:
		out.State = workitems.PRMerged
		if p.MergedCommitID != nil {
			out.MergeCommitSHA = *p.MergedCommitID
		}
		if p.MergedBy != nil {
			out.MergedBy = p.MergedBy.UserName
		}
	case p.State == gsdk.StateClosed:
		out.State = workitems.PRClosed
	}
	for _, l := range p.Labels {
		out.Labels = append(out.Labels, l.Name)
	}
	return out
}

// maxPages bounds how far pull request listings are read (50 per page).
const maxPages = 10

func (g *gitea) PullRequestsFor(ctx context.Context, repo, branch string) (BranchPullRequests, error) {
	const op = "find pull requests"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return BranchPullRequests{}, err
	}
	c := g.client(ctx)
	// Gitea's list has no head filter: read open ones, then closed ones most recently closed
	// first, and stop at the first match of each.
	find := func(state gsdk.StateType, sort string) (*PullRequest, error) {
		for page := 1; page <= maxPages; page++ {
			prs, resp, err := c.ListRepoPullRequests(owner, name, gsdk.ListPullRequestsOptions{State: state, Sort: sort,
				ListOptions: gsdk.ListOptions{Page: page, PageSize: 50}})
			if err := g.fail(ctx, op, repo, resp, err); err != nil {
				return nil, err
			}
			for _, p := range prs {
				if p.Head != nil && p.Base != nil && p.Head.Ref == branch && p.Head.RepoID == p.Base.RepoID {
					return g.pull(p), nil
				}
			}
			if len(prs) < 50 {
				break
			}
		}
		return nil, nil
	}
	var out BranchPullRequests
	if out.Open, err = find(gsdk.StateOpen, ""); err != nil {
		return BranchPullRequests{}, err
	}
	if out.LastClosed, err = find(gsdk.StateClosed, "recentclose"); err != nil {
		return BranchPullRequests{}, err
	}
	return out, nil
}

// wipPrefix marks a draft pull request on Gitea (its default WORK_IN_PROGRESS_PREFIXES).
const wipPrefix = "WIP: "

// wipPrefixes are Gitea's default WORK_IN_PROGRESS_PREFIXES: a title starting with one of
// them, in any ASCII case, is a draft.
var wipPrefixes = []string{"WIP:", "[WIP]"}

// cutWIP removes the WIP prefixes title starts with (each with the spaces after it: "WIP:
// [WIP] x" is a draft twice over) and reports whether there was one.
func cutWIP(title string) (string, bool) {
	rest := title
	for again := true; again; {
		again = false
		for _, p := range wipPrefixes {
			if len(rest) >= len(p) && strings.EqualFold(rest[:len(p)], p) {
				rest, again = strings.TrimLeft(rest[len(p):], " "), true
			}
		}
	}
	return rest, rest != title
}

func (g *gitea) CreatePullRequest(ctx context.Context, repo string, np NewPullRequest) (*PullRequest, error) {
	const op = "create pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	title := np.Title
	if np.Draft && !strings.HasPrefix(title, wipPrefix) {
		title = wipPrefix + title
	}
	var p *gsdk.PullRequest
	err = retrying(ctx, g.cfg, func() error {
		var resp *gsdk.Response
		var err error
		p, resp, err = g.client(ctx).CreatePullRequest(owner, name, gsdk.CreatePullRequestOption{Head: np.Head,
			Base: np.Base, Title: title, Body: np.Body})
		return g.fail(ctx, op, repo, resp, err)
	}, func(err error) bool {
		// Gitea indexes a pushed branch asynchronously: right after the push the head can be
		// "not found" for a moment.
		return errors.Is(err, ErrNotFound)
	})
	var e *Error
	if errors.As(err, &e) && e.StatusCode == http.StatusConflict {
		e.Err = ErrPullRequestExists
	}
	if err != nil {
		return nil, err
	}
	return g.pull(p), nil
}

func (g *gitea) EditPullRequest(ctx context.Context, repo string, number int, edit PullRequestEdit) (*PullRequest, error) {
	const op = "edit pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	c := g.client(ctx)
	opt := gsdk.EditPullRequestOption{Body: edit.Body}
	if edit.Title != nil {
		cur, resp, err := c.GetPullRequest(owner, name, int64(number))
		if err := g.fail(ctx, op, repo, resp, err); err != nil {
			return nil, err
		}
		// A draft is its title's prefix here: a new title keeps a draft a draft (and a pull
		// request marked ready stays ready: Gitea no longer reads it as a draft).
		opt.Title = *edit.Title
		if _, wip := cutWIP(opt.Title); cur.Draft && !wip {
			opt.Title = wipPrefix + opt.Title
		}
	}
	p, resp, err := c.EditPullRequest(owner, name, int64(number), opt)
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, err
	}
	return g.pull(p), nil
}

// readPull reads one pull request for op, with the client and names the change that follows uses.
func (g *gitea) readPull(ctx context.Context, op, repo string, number int) (*gsdk.Client, string, string, *gsdk.PullRequest, error) {
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, "", "", nil, err
	}
	c := g.client(ctx)
	cur, resp, err := c.GetPullRequest(owner, name, int64(number))
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, "", "", nil, err
	}
	return c, owner, name, cur, nil
}

func (g *gitea) ClosePullRequest(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "close pull request"
	c, owner, name, cur, err := g.readPull(ctx, op, repo, number)
	if err != nil {
		return nil, err
	}
	switch pr := g.pull(cur); pr.State {
	case workitems.PRClosed:
		return pr, nil
	case workitems.PRMerged:
		return nil, notOpen(g.cfg.Name, op, repo, pr)
	}
	closed := gsdk.StateClosed
	p, resp, err := c.EditPullRequest(owner, name, int64(number), gsdk.EditPullRequestOption{State: &closed})
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		// Merged since it was read: Gitea refuses to change a merged one's state (412).
		var e *Error
		if errors.As(err, &e) && e.StatusCode == http.StatusPreconditionFailed {
			e.Class, e.Err = workitems.ClassInvalidInput, ErrNotOpen
		}
		return nil, err
	}
	return g.pull(p), nil
}

// MarkReady removes the title's WIP prefixes: Gitea has no draft flag, a draft is its title.
func (g *gitea) MarkReady(ctx context.Context, repo string, number int) (*PullRequest, error) {
	const op = "mark pull request ready"
	c, owner, name, cur, err := g.readPull(ctx, op, repo, number)
	if err != nil {
		return nil, err
	}
	pr := g.pull(cur)
	switch {
	case !pr.Draft:
		return pr, nil
	case pr.State != workitems.PROpen:
		return nil, notOpen(g.cfg.Name, op, repo, pr)
	}
	title, cut := cutWIP(cur.Title)
	if !cut || strings.TrimSpace(title) == "" {
		// A prefix of this Gitea's own configuration, or a title that is nothing but the prefix
		// (Gitea keeps the old title when given an empty one).
		return nil, &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvalidInput,
			Err: fmt.Errorf("draft title %q: no known WIP prefix (%s) to remove, or nothing after it", cur.Title,
				strings.Join(wipPrefixes, ", "))}
	}
	p, resp, err := c.EditPullRequest(owner, name, int64(number), gsdk.EditPullRequestOption{Title: title})
	if err := g.fail(ctx, op, repo, resp, err); err != nil {
		return nil, err
	}
	if out := g.pull(p); !out.Draft {
		return out, nil
	}
	return nil, &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvalidInput,
		Err: fmt.Errorf("gitea still reads %q as a draft (a WIP prefix of its own configuration)", p.Title)}
}

// labelColor is the colour of labels outerloop creates.
const labelColor = "#c5def5"

func (g *gitea) AddLabels(ctx context.Context, repo string, number int, labels []string) error {
	const op = "add labels"
	owner, name, err := g.split(op, repo)
	if err != nil || len(labels) == 0 {
		return err
	}
	c := g.client(ctx)
	ids := map[string]int64{}
	list := func() error {
		for page := 1; page <= maxPages; page++ {
			ls, resp, err := c.ListRepoLabels(owner, name, gsdk.ListLabelsOptions{ListOptions: gsdk.ListOptions{Page: page, PageSize: 50}})
			if err := g.fail(ctx, op, repo, resp, err); err != nil {
				return err
			}
			for _, l := range ls {
				ids[l.Name] = l.ID
			}
			if len(ls) < 50 {
				return nil
			}
		}
		return nil
	}
	if err := list(); err != nil {
		return err
	}
	var want []int64
	for _, l := range labels {
		id, ok := ids[l]
		if !ok {
			created, resp, err := c.CreateLabel(owner, name, gsdk.CreateLabelOption{Name: l, Color: labelColor,
				Description: "added by outerloop"})
			if err := g.fail(ctx, op, repo, resp, err); err != nil {
				// Another worker may have created it meanwhile.
				if lerr := list(); lerr != nil || ids[l] == 0 {
					return err
				}
				id = ids[l]
			} else {
				id = created.ID
			}
		}
		want = append(want, id)
	}
	_, resp, err := c.AddIssueLabels(owner, name, int64(number), gsdk.IssueLabelsOption{Labels: want})
	return g.fail(ctx, op, repo, resp, err)
}

func (g *gitea) Comment(ctx context.Context, repo string, number int, body string) error {
	const op = "comment"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return err
	}
	_, resp, err := g.client(ctx).CreateIssueComment(owner, name, int64(number), gsdk.CreateIssueCommentOption{Body: body})
	return g.fail(ctx, op, repo, resp, err)
}

// giteaStyles maps merge methods to Gitea's merge styles.
var giteaStyles = map[workitems.MergeMethod]gsdk.MergeStyle{
	workitems.MergeMerge: gsdk.MergeStyleMerge, workitems.MergeSquash: gsdk.MergeStyleSquash,
	workitems.MergeRebase: gsdk.MergeStyleRebase,
}

func (g *gitea) Merge(ctx context.Context, repo string, number int, m MergeRequest) (string, error) {
	const op = "merge pull request"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return "", err
	}
	if err := checkMerge(g.cfg.Name, repo, m); err != nil {
		return "", err
	}
	c := g.client(ctx)
	get := func() (*gsdk.PullRequest, error) {
		p, resp, err := c.GetPullRequest(owner, name, int64(number))
		return p, g.fail(ctx, op, repo, resp, err)
	}
	headMoved := func(p *gsdk.PullRequest) error {
		if p.Head == nil {
			return &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvariantViolation,
				Err: errors.New("pull request has no head")}
		}
		if got := p.Head.Sha; got != m.ExpectedHeadSHA {
			return &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassConflict, Err: ErrHeadMoved,
				Message: "head is " + shortSHA(got) + ", expected " + shortSHA(m.ExpectedHeadSHA)}
		}
		return nil
	}
	// Gitea moves a pull request's head and checks its mergeability asynchronously after a
	// push to it or to its base (answering 405 "try again later" meanwhile): wait, briefly,
	// until the head is the expected commit and Gitea says mergeable, and try again on a 405.
	// Whether the head moved is the branch's to say (its ref moves with the push itself).
	errChecking := errors.New("gitea is still checking mergeability")
	errCatchingUp := errors.New("gitea has not moved the pull request to the pushed head yet")
	var refused *Error // the last 405
	err = retrying(ctx, g.cfg, func() error {
		p, err := get()
		if err != nil {
			return err
		}
		if p.HasMerged || p.State == gsdk.StateClosed {
			return &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassConflict, Err: ErrNotMergeable,
				Message: "pull request is " + string(p.State)}
		}
		if moved := headMoved(p); moved != nil {
			b, resp, err := c.GetRepoBranch(owner, name, p.Head.Ref)
			if err := g.fail(ctx, op, repo, resp, err); err != nil {
				return err
			}
			if b.Commit != nil && b.Commit.ID == m.ExpectedHeadSHA {
				return errCatchingUp
			}
			return moved
		}
		if !p.Mergeable {
			return errChecking
		}
		ok, resp, err := c.MergePullRequest(owner, name, int64(number), gsdk.MergePullRequestOption{Style: giteaStyles[m.Method],
			HeadCommitId: m.ExpectedHeadSHA, Title: m.Title, Message: m.Message})
		if err := g.fail(ctx, op, repo, resp, err); err != nil {
			return err
		}
		if ok {
			return nil
		}
		switch resp.StatusCode {
		case http.StatusMethodNotAllowed:
			refused = g.status(op, repo, resp, ErrNotMergeable).(*Error)
			return errChecking
		case http.StatusConflict:
			// Conflicts, or the head moved between our check and the merge.
			if p, err := get(); err == nil {
				if err := headMoved(p); err != nil {
					return err
				}
			}
			return g.status(op, repo, resp, ErrNotMergeable)
		}
		return g.status(op, repo, resp, nil)
	}, func(err error) bool { return errors.Is(err, errChecking) || errors.Is(err, errCatchingUp) })
	switch {
	case errors.Is(err, errChecking) && refused != nil:
		return "", refused
	case errors.Is(err, errChecking):
		return "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassConflict, Err: ErrNotMergeable,
			Message: "Gitea does not report it mergeable (conflicts, or still checking)"}
	case errors.Is(err, errCatchingUp):
		return "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassTransient, Err: err}
	case err != nil:
		return "", err
	}
	p, err := get()
	if err != nil {
		return "", err
	}
	if p.MergedCommitID == nil || *p.MergedCommitID == "" {
		return "", &Error{Forge: g.cfg.Name, Op: op, Repo: repo, Class: workitems.ClassInvariantViolation,
			Err: errors.New("merged, but Gitea reports no merge commit")}
	}
	return *p.MergedCommitID, nil
}

func (g *gitea) Checks(ctx context.Context, repo, sha string) ([]Check, error) {
	const op = "list commit statuses"
	owner, name, err := g.split(op, repo)
	if err != nil {
		return nil, err
	}
	c := g.client(ctx)
	latest := map[string]*gsdk.Status{}
	for page := 1; page <= maxPages; page++ {
		ss, resp, err := c.ListStatuses(owner, name, sha, gsdk.ListStatusesOption{ListOptions: gsdk.ListOptions{Page: page, PageSize: 50}})
		if err := g.fail(ctx, op, repo, resp, err); err != nil {
			return nil, err
		}
		for _, s := range ss {
			if old, ok := latest[s.Context]; !ok || s.ID > old.ID {
				latest[s.Context] = s
			}
		}
		if len(ss) < 50 {
			break
		}
	}
	out := make([]Check, 0, len(latest))
	for n, s := range latest {
		out = append(out, Check{Name: n, State: GiteaStatusState(string(s.State)), SHA: sha, URL: s.TargetURL, Summary: CheckSummary(s.Description)})
	}
	sortChecks(out)
	return out, nil
}

// RerunChecks re-requests nothing: Gitea's CI results are commit statuses.
func (g *gitea) RerunChecks(context.Context, string, string, []string) ([]string, error) {
	return nil, nil
}

// GiteaStatusState normalises a Gitea commit status, as read from the API or a webhook.
// "warning" is a failure, as in Gitea's own combined status; "skipped" passes.
func GiteaStatusState(s string) workitems.CheckState {
	switch gsdk.StatusState(s) {
	case gsdk.StatusSuccess:
		return workitems.CheckSuccess
	case gsdk.StatusFailure, gsdk.StatusWarning:
		return workitems.CheckFailure
	case gsdk.StatusError:
		return workitems.CheckInfraError
	case gsdk.StatusPending:
		return workitems.CheckPending
	case "skipped":
		return workitems.CheckNeutral
	}
	return workitems.CheckUnknown
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "(none)"
	}
	return s
}
