package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v75/github"
)

// GitHubConfig says how to reach GitHub.
type GitHubConfig struct {
	// BaseURL is the REST API root (GitHub Enterprise: https://host/api/v3, or a test server);
	// "" is api.github.com.
	BaseURL string
	// TokenEnv names the environment variable holding the token (default GITHUB_TOKEN). The token
	// is read once at construction and never logged.
	TokenEnv string
	// Getenv reads the environment (default os.Getenv; tests pass their own).
	Getenv     func(string) string
	HTTPClient *http.Client
	// MaxRateWait is the longest the source waits for a rate limit to reset before giving up
	// (default 2 minutes).
	MaxRateWait time.Duration
}

// GitHubSource reads check runs and commit statuses for a commit.
type GitHubSource struct {
	client      *github.Client
	logger      *slog.Logger
	now         func() time.Time
	sleep       func(ctx context.Context, d time.Duration) error
	maxRateWait time.Duration

	mu     sync.Mutex
	runIDs map[string]int64 // repo@sha/name → id of the latest check run, for re-runs
}

// GitHubOption configures a GitHubSource.
type GitHubOption func(*GitHubSource)

// GitHubClock injects the clock and the sleeper used when waiting out rate limits.
func GitHubClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) GitHubOption {
	return func(g *GitHubSource) { g.now, g.sleep = now, sleep }
}

// GitHubLogger sets the logger.
func GitHubLogger(l *slog.Logger) GitHubOption { return func(g *GitHubSource) { g.logger = l } }

// NewGitHubSource builds a source from cfg.
func NewGitHubSource(cfg GitHubConfig, opts ...GitHubOption) (*GitHubSource, error) {
	c := github.NewClient(cfg.HTTPClient)
	if cfg.BaseURL != "" {
		// Used as given (GitHub Enterprise: https://host/api/v3), unlike WithEnterpriseURLs,
		// which appends /api/v3/ itself.
		u, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/") + "/")
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("verify: github base url %q: want an absolute URL", cfg.BaseURL)
		}
		c.BaseURL = u
	}
	g := &GitHubSource{logger: slog.New(slog.DiscardHandler), now: time.Now, sleep: sleepCtx,
		maxRateWait: cmp.Or(cfg.MaxRateWait, 2*time.Minute), runIDs: map[string]int64{}}
	for _, o := range opts {
		o(g)
	}
	env := cmp.Or(cfg.TokenEnv, "GITHUB_TOKEN")
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if tok := getenv(env); tok != "" {
		c = c.WithAuthToken(tok)
	} else {
		g.logger.Warn("verify: no GitHub token, using unauthenticated requests", slog.String("env", env))
	}
	g.client = c
	return g, nil
}

func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("verify: github repo %q: want owner/name", repo)
	}
	return owner, name, nil
}

// Checks returns the latest check run per name and the latest commit status per context for
// sha. Runs for other SHAs are discarded.
func (g *GitHubSource) Checks(ctx context.Context, repo, sha string) ([]CICheck, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	latest := map[string]*github.CheckRun{}
	opts := &github.ListCheckRunsOptions{Filter: github.Ptr("all"), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		var res *github.ListCheckRunsResults
		var resp *github.Response
		err := g.call(ctx, func() error {
			var err error
			res, resp, err = g.client.Checks.ListCheckRunsForRef(ctx, owner, name, sha, opts)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("verify: github check runs of %s@%s: %w", repo, shortSHA(sha), err)
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
			break
		}
		opts.Page = resp.NextPage
	}
	var out []CICheck
	g.mu.Lock()
	for n, r := range latest {
		g.runIDs[repo+"@"+sha+"/"+n] = r.GetID()
		out = append(out, CICheck{Name: n, State: checkRunState(r.GetStatus(), r.GetConclusion()), SHA: sha,
			URL: cmp.Or(r.GetHTMLURL(), r.GetDetailsURL()), Details: clip(r.GetOutput().GetTitle(), 200)})
	}
	g.mu.Unlock()

	statuses := map[string]*github.RepoStatus{}
	lo := &github.ListOptions{PerPage: 100}
	for {
		var page []*github.RepoStatus
		var resp *github.Response
		err := g.call(ctx, func() error {
			var err error
			page, resp, err = g.client.Repositories.ListStatuses(ctx, owner, name, sha, lo)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("verify: github statuses of %s@%s: %w", repo, shortSHA(sha), err)
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
		if _, dup := latest[c]; dup {
			continue // a check run and a status of one name: the check run is richer
		}
		out = append(out, CICheck{Name: c, State: statusState(s.GetState()), SHA: sha, URL: s.GetTargetURL(),
			Details: clip(s.GetDescription(), 200)})
	}
	return out, nil
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

// checkRunState normalises a check run's status and conclusion.
func checkRunState(status, conclusion string) CIState {
	if status != "completed" {
		switch status {
		case "queued", "in_progress", "waiting", "requested", "pending":
			return CIPending
		}
		return CIUnknown
	}
	switch conclusion {
	case "success":
		return CISuccess
	case "failure", "timed_out":
		return CIFailure
	case "neutral", "skipped":
		return CINeutral
	case "cancelled":
		return CICancelled
	case "action_required":
		return CIActionRequired
	case "stale":
		return CIStale
	case "startup_failure":
		return CIInfraError
	}
	return CIUnknown
}

// statusState normalises a commit status state ("error" is the CI system's own failure).
func statusState(s string) CIState {
	switch s {
	case "success":
		return CISuccess
	case "failure":
		return CIFailure
	case "error":
		return CIInfraError
	case "pending":
		return CIPending
	}
	return CIUnknown
}

// ErrRateLimited means GitHub's rate limit would not reset within MaxRateWait.
var ErrRateLimited = errors.New("github rate limit")

// call runs one request, waiting out a rate limit (primary or secondary) when the wait is short.
func (g *GitHubSource) call(ctx context.Context, do func() error) error {
	for tries := 0; ; tries++ {
		err := do()
		if err == nil {
			return nil
		}
		var wait time.Duration
		var rl *github.RateLimitError
		var ab *github.AbuseRateLimitError
		switch {
		case errors.As(err, &rl):
			wait = rl.Rate.Reset.Sub(g.now())
		case errors.As(err, &ab):
			wait = time.Minute
			if ab.RetryAfter != nil {
				wait = *ab.RetryAfter
			}
		default:
			return err
		}
		wait = max(wait, time.Second)
		if tries >= 3 || wait > g.maxRateWait {
			return fmt.Errorf("%w: reset in %s: %v", ErrRateLimited, wait.Round(time.Second), err)
		}
		g.logger.WarnContext(ctx, "verify: github rate limit, waiting", slog.Duration("wait", wait))
		if err := g.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Rerun asks GitHub to re-run the named check runs of sha (those seen by the last Checks call).
func (g *GitHubSource) Rerun(ctx context.Context, repo, sha string, names []string) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		g.mu.Lock()
		id, ok := g.runIDs[repo+"@"+sha+"/"+n]
		g.mu.Unlock()
		if !ok {
			continue // a commit status: nothing to re-request
		}
		if err := g.call(ctx, func() error {
			_, err := g.client.Checks.ReRequestCheckRun(ctx, owner, name, id)
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("verify: re-run %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}
