package forge

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Forge is one configured forge (an entry of forges:). Repositories are named "owner/name".
// Every method is safe for concurrent use; every error is an *Error.
//
// Forge is the union every forge kind implements (a Set holds Forges); no consumer needs all of
// it: each declares the few methods it calls (publish.Forge for delivery, verify.CIForge for CI,
// waits.ReviewForge and waits.CommandForge for pull requests, reviews and commands). A kind
// that serves only some of them embeds Unsupported for the rest.
type Forge interface {
	// Name is the forge's key in forges:.
	Name() string
	// Kind is the API it speaks.
	Kind() workitems.ForgeKind

	// Repository returns the repository's default branch and clone URL.
	Repository(ctx context.Context, repo string) (*Repository, error)

	// PullRequestsFor finds the pull requests whose head is branch (in repo itself, not a fork):
	// the open one, and the most recently closed one.
	PullRequestsFor(ctx context.Context, repo, branch string) (BranchPullRequests, error)
	// CreatePullRequest opens a pull request. One already open for the same head and base is
	// ErrPullRequestExists.
	CreatePullRequest(ctx context.Context, repo string, pr NewPullRequest) (*PullRequest, error)
	// EditPullRequest changes the title and/or body (nil fields stay).
	EditPullRequest(ctx context.Context, repo string, number int, edit PullRequestEdit) (*PullRequest, error)
	// ClosePullRequest closes an open pull request without merging it and returns it as the
	// forge answers after (State closed). One closed already is returned as it is; a merged one
	// is ErrNotOpen.
	ClosePullRequest(ctx context.Context, repo string, number int) (*PullRequest, error)
	// MarkReady makes a draft pull request ready for review and returns it as the forge answers
	// after (Draft false); one that is no draft is returned unchanged. A draft that is not open
	// is ErrNotOpen.
	MarkReady(ctx context.Context, repo string, number int) (*PullRequest, error)
	// AddLabels adds labels to a pull request, creating those the repository lacks.
	AddLabels(ctx context.Context, repo string, number int, labels []string) error
	// Comment posts a comment on a pull request.
	Comment(ctx context.Context, repo string, number int, body string) error
	// Merge merges a pull request whose head is still m.ExpectedHeadSHA and returns the merge
	// commit's SHA. It fails with ErrHeadMoved when the head moved and ErrNotMergeable when the
	// forge refuses (conflicts, failing required checks, a draft, a disallowed method).
	Merge(ctx context.Context, repo string, number int, m MergeRequest) (string, error)

	// PullRequest returns one pull request by number; a missing one is ErrNotFound.
	PullRequest(ctx context.Context, repo string, number int) (*PullRequest, error)
	// Reviews returns the pull request's submitted reviews, oldest first, each with its inline
	// comments; pending reviews and review requests are left out. What is kept is bounded
	// (MaxReviews, MaxReviewComments, MaxReviewBody): the newest are kept.
	Reviews(ctx context.Context, repo string, number int) ([]Review, error)
	// Permission returns what user may do in repo. The repository's owner is PermAdmin; a user
	// the forge does not know is PermNone, not an error.
	Permission(ctx context.Context, repo, user string) (Permission, error)
	// Self returns the login of the account whose token the forge uses, cached per token (a
	// rotated token is asked about again). Without a token it is ErrMissingToken.
	Self(ctx context.Context) (string, error)

	// Checks returns the CI results for a commit: the latest per name, each for sha.
	Checks(ctx context.Context, repo, sha string) ([]Check, error)
	// RerunChecks asks the forge to re-run the named checks of sha and returns those it could
	// re-request (GitHub check runs; commit statuses cannot be re-requested).
	RerunChecks(ctx context.Context, repo, sha string, names []string) ([]string, error)

	// GitAuth returns what git needs to authenticate to remoteURL (an http(s) URL on this
	// forge's server, without credentials) with the forge's token, read now.
	GitAuth(remoteURL string) (GitAuth, error)
}

// Repository is what delivery needs to know about a repository.
type Repository struct {
	Repo          string `json:"repo"` // owner/name
	DefaultBranch string `json:"default_branch"`
	// CloneURL is the http(s) URL git pushes to and fetches from; it never carries credentials.
	CloneURL string `json:"clone_url"`
	HTMLURL  string `json:"html_url,omitempty"`
}

// PullRequest is a pull request as delivery sees it.
type PullRequest struct {
	Number  int               `json:"number"`
	URL     string            `json:"url"` // the page a person opens
	State   workitems.PRState `json:"state"`
	Draft   bool              `json:"draft,omitempty"`
	Title   string            `json:"title"`
	Body    string            `json:"body,omitempty"`
	Base    string            `json:"base"`     // branch
	Head    string            `json:"head"`     // branch
	HeadSHA string            `json:"head_sha"` // the commit the head branch pointed at
	// MergeCommitSHA is the merge commit once merged.
	MergeCommitSHA string    `json:"merge_commit_sha,omitempty"`
	Labels         []string  `json:"labels,omitempty"`
	ClosedAt       time.Time `json:"closed_at,omitzero"`
	// MergedBy is the account that merged it (merged only); ClosedBy the one that closed it
	// unmerged (closed only, and read by PullRequest alone: listings leave it empty). "" when
	// the forge did not say. Whether such an end may end an item is checked against the
	// account's permission (waits).
	MergedBy string `json:"merged_by,omitempty"`
	ClosedBy string `json:"closed_by,omitempty"`
}

// Merged reports whether the pull request was merged.
func (p *PullRequest) Merged() bool { return p.State == workitems.PRMerged }

// BranchPullRequests are the pull requests of one head branch.
type BranchPullRequests struct {
	Open *PullRequest // nil when none is open
	// LastClosed is the most recently closed one (merged or not); nil when none was closed.
	LastClosed *PullRequest
}

// NewPullRequest is what CreatePullRequest opens.
type NewPullRequest struct {
	Title string
	Body  string
	Base  string // the branch it merges into
	Head  string // the branch with the change, in the same repository
	Draft bool
}

// PullRequestEdit changes a pull request; nil fields stay as they are.
type PullRequestEdit struct {
	Title *string
	Body  *string
}

// MergeRequest says how to merge.
type MergeRequest struct {
	Method workitems.MergeMethod
	// ExpectedHeadSHA is the head commit that was checked; the merge is refused with
	// ErrHeadMoved when the head is anything else. Required.
	ExpectedHeadSHA string
	// Title and Message are the merge (or squash) commit's; "" leaves the forge's default.
	Title, Message string
}

// Check is one check's latest result for a commit.
type Check struct {
	Name    string               `json:"name"`
	State   workitems.CheckState `json:"state"`
	SHA     string               `json:"sha"`
	URL     string               `json:"url,omitempty"`
	Summary string               `json:"summary,omitempty"` // one line, at most 200 characters
}

// Config builds a Forge.
type Config struct {
	Name string // the key in forges:
	config.ForgeConfig
	// Getenv reads the token variable at each use (default os.Getenv).
	Getenv func(string) string
	// HTTPClient carries API requests (default: a plain client).
	HTTPClient *http.Client
	// RequestTimeout bounds each API request whose context has no deadline (default 30 s).
	RequestTimeout time.Duration
	Clock          workitems.Clock // default the system clock
	Logger         *slog.Logger    // default discards
	// MaxRateWait is the longest a call waits for a rate limit to reset before returning
	// ErrRateLimited (default 2 minutes).
	MaxRateWait time.Duration
	// SharedLimits, when set, shares the rate limits this process meets with every process of
	// the deployment, and theirs with it (nil: each process learns from its own answers).
	SharedLimits SharedLimits
	// Retry bounds the short waits for a forge that is still catching up (Gitea indexing a
	// pushed branch or checking mergeability): Tries attempts, the first wait RetryBase,
	// doubling (defaults 6 and 250ms: about 8 s in all).
	Tries     int
	RetryBase time.Duration

	// Kinds are the forge kinds New can build, by the kind forges: names (nil: BuiltinKinds).
	// A program adds a kind by adding its Constructor to BuiltinKinds() and passing the map
	// here (to NewSet in the base Config).
	Kinds Kinds

	// listPageSize is ListRepos's page size (default: each forge's largest); tests page small.
	listPageSize int
}

// Constructor builds the client of one forge of a kind. cfg has its defaults applied (Name,
// Getenv, HTTPClient, Clock, Logger, …); the token is not read here but at each use.
type Constructor func(cfg Config) (Forge, error)

// Kinds maps each forge kind to its Constructor: the extension point for a forge kind.
type Kinds map[workitems.ForgeKind]Constructor

// BuiltinKinds returns the kinds outerloop ships (workitems.AllForgeKinds: the kinds config
// validation accepts), in a new map each call, so adding to it changes nobody else's.
func BuiltinKinds() Kinds {
	return Kinds{
		workitems.ForgeGitHub: func(cfg Config) (Forge, error) {
			g, err := newGitHub(cfg)
			if err != nil {
				return nil, err // not a nil *gitHub in a non-nil Forge
			}
			return g, nil
		},
		workitems.ForgeGitea: func(cfg Config) (Forge, error) {
			g, err := newGitea(cfg)
			if err != nil {
				return nil, err
			}
			return g, nil
		},
	}
}

// Names lists the kinds of k, sorted.
func (k Kinds) Names() []workitems.ForgeKind {
	return slices.Sorted(maps.Keys(k))
}

func (c *Config) withDefaults() {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	c.RequestTimeout = cmp.Or(c.RequestTimeout, 30*time.Second)
	if c.Clock == nil {
		c.Clock = workitems.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.MaxRateWait = cmp.Or(c.MaxRateWait, 2*time.Minute)
	c.Tries = cmp.Or(c.Tries, 6)
	c.RetryBase = cmp.Or(c.RetryBase, 250*time.Millisecond)
	c.Name = cmp.Or(c.Name, string(c.Kind))
	if c.Kinds == nil {
		c.Kinds = BuiltinKinds()
	}
}

// New builds the client for one forge with its kind's Constructor (cfg.Kinds, default the
// built-ins). The token is not needed yet: it is read at each use.
func New(cfg Config) (Forge, error) {
	cfg.withDefaults()
	if mk := cfg.Kinds[cfg.Kind]; mk != nil {
		return mk(cfg)
	}
	return nil, &Error{Forge: cfg.Name, Op: "configure", Class: workitems.ClassInvalidInput,
		Err: fmt.Errorf("kind %q is not one of %v", cfg.Kind, cfg.Kinds.Names())}
}

// Set is the deployment's forges by key.
type Set map[string]Forge

// NewSet builds a client for every entry of forges:; base is applied to each (its Name and
// ForgeConfig are replaced; its Kinds say which kinds it can build).
func NewSet(forges map[string]config.ForgeConfig, base Config) (Set, error) {
	s := Set{}
	for name, fc := range forges {
		c := base
		c.Name, c.ForgeConfig = name, fc
		f, err := New(c)
		if err != nil {
			return nil, err
		}
		s[name] = f
	}
	return s, nil
}

// Get returns the named forge, or an invalid_input *Error naming the known ones.
func (s Set) Get(name string) (Forge, error) {
	if f, ok := s[name]; ok {
		return f, nil
	}
	return nil, &Error{Forge: name, Op: "look up", Class: workitems.ClassInvalidInput, Err: ErrUnknownForge}
}

// ForgeKinds lists the kinds of k, sorted (config.ForgeRegistry: the kinds config
// validation accepts).
func (k Kinds) ForgeKinds() []workitems.ForgeKind { return k.Names() }
