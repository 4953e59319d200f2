// Package discover finds a fleet template's repositories (repos_from:) through its forge: the
// owner's repositories, all pages, with the topic, less those excluded, archived (unless
// archived: true), empty or unreadable, each skip counted by reason, sorted by owner/name.
//
// A listing is cached in Redis per forge, owner and topic, so every scheduler replica and every
// tick within the TTL (10 minutes by default) shares one listing rather than spending the
// forge's rate limit. The filters are applied after the cache, so a changed exclude: or
// archived: takes effect at once. The cached copy is kept longer than the TTL (StaleTTL, a day
// by default): when a new listing fails, the last one is served, marked Stale, together with
// the error, so a forge outage or rate limit does not empty a fleet. With no copy the error is
// returned alone.
//
//	d := discover.New(discover.Config{Redis: rdb, Prefix: prefix, Clock: clock})
//	lister, ok := forges[rf.Forge].(forge.RepoLister)
//	res, err := d.Discover(ctx, *tmpl.ReposFrom, lister)
//	switch {
//	case res == nil:           // no listing at all: skip this tick
//	case err != nil:           // res.Stale: log err, carry on with res.Repos
//	}
package discover

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/forge"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Lister is what discovery needs of a forge (forge.RepoLister).
type Lister interface {
	ListRepos(ctx context.Context, q forge.RepoQuery) ([]forge.ListedRepo, error)
}

// SkipReason says why a listed repository is not part of the fleet.
type SkipReason string

// The skip reasons.
const (
	SkipExcluded   SkipReason = "excluded"   // named in exclude:
	SkipArchived   SkipReason = "archived"   // archived, and archived: is false
	SkipUnreadable SkipReason = "unreadable" // the forge's token may not pull it
	SkipEmpty      SkipReason = "empty"      // no commits: nothing to work on
)

// AllSkipReasons lists the skip reasons, in the order they are checked.
func AllSkipReasons() []SkipReason {
	return []SkipReason{SkipExcluded, SkipArchived, SkipUnreadable, SkipEmpty}
}

// Repo is one repository of the fleet.
type Repo struct {
	Repo          string `json:"repo"`      // owner/name
	CloneURL      string `json:"clone_url"` // what the fleet's items name as their repo
	DefaultBranch string `json:"default_branch,omitempty"`
}

// Result is a fleet's repositories.
type Result struct {
	Repos []Repo // sorted by owner/name
	// Skipped counts the listed repositories left out, by reason; SkippedRepos names them
	// (owner/name, sorted). Reasons with none are absent.
	Skipped      map[SkipReason]int
	SkippedRepos map[SkipReason][]string
	ListedAt     time.Time // when the forge listed them
	Cached       bool      // served from the cache, not listed by this call
	Stale        bool      // the listing failed: this is the last one, older than the TTL
}

// Config builds a Discoverer.
type Config struct {
	// Redis caches listings (nil: every call lists).
	Redis redis.UniversalClient
	// Prefix is the deployment's key prefix; keys are <Prefix>fleet:discover:<hash>.
	Prefix string
	// TTL is how long a listing is served without asking the forge again (default 10 minutes).
	TTL time.Duration
	// StaleTTL is how long a listing is kept to serve when a new one fails (default 24 hours;
	// at least TTL).
	StaleTTL time.Duration
	Clock    workitems.Clock // default the system clock
	Logger   *slog.Logger    // cache failures (default discards)
}

// Discoverer lists fleets' repositories through a shared cache. It is safe for concurrent use.
type Discoverer struct {
	cfg Config
}

// New returns a Discoverer.
func New(cfg Config) *Discoverer {
	cfg.TTL = cmp.Or(cfg.TTL, 10*time.Minute)
	cfg.StaleTTL = max(cmp.Or(cfg.StaleTTL, 24*time.Hour), cfg.TTL)
	if cfg.Clock == nil {
		cfg.Clock = workitems.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Discoverer{cfg: cfg}
}

// entry is a cached listing.
type entry struct {
	ListedAt time.Time          `json:"listed_at"`
	Repos    []forge.ListedRepo `json:"repos"`
}

// Key is the cache key of a forge's listing of owner's repositories with topic: one per
// listing, whatever the templates filter out of it.
func (d *Discoverer) Key(forgeName, owner, topic string) string {
	h := sha256.Sum256([]byte(forgeName + "\x00" + strings.ToLower(owner) + "\x00" + strings.ToLower(topic)))
	return d.cfg.Prefix + "fleet:discover:" + hex.EncodeToString(h[:16])
}

// Discover returns rf's repositories as l lists them, from the cache while it is fresh. When
// listing fails and a stale listing is cached, it returns that (Result.Stale) and the error;
// without one, only the error.
func (d *Discoverer) Discover(ctx context.Context, rf config.ReposFrom, l Lister) (*Result, error) {
	if rf.Forge == "" || rf.Owner == "" {
		return nil, fmt.Errorf("discover repositories: repos_from needs a forge and an owner (got %q, %q)", rf.Forge, rf.Owner)
	}
	key := d.Key(rf.Forge, rf.Owner, rf.Topic)
	now := d.cfg.Clock.Now()
	cached := d.load(ctx, key)
	if cached != nil && now.Sub(cached.ListedAt) < d.cfg.TTL {
		res := filter(rf, cached)
		res.Cached = true
		return res, nil
	}
	repos, err := l.ListRepos(ctx, forge.RepoQuery{Owner: rf.Owner, Topic: rf.Topic})
	if err != nil {
		err = fmt.Errorf("discover repositories of %s on %s: %w", rf.Owner, rf.Forge, err)
		if cached == nil {
			return nil, err
		}
		res := filter(rf, cached)
		res.Cached, res.Stale = true, true
		return res, fmt.Errorf("%w (serving the listing of %s)", err, cached.ListedAt.UTC().Format(time.RFC3339))
	}
	e := &entry{ListedAt: now, Repos: repos}
	d.store(ctx, key, e)
	return filter(rf, e), nil
}

// load reads a cached listing; a miss or a cache failure is nil (a failure is logged: the
// forge is asked instead).
func (d *Discoverer) load(ctx context.Context, key string) *entry {
	if d.cfg.Redis == nil {
		return nil
	}
	b, err := d.cfg.Redis.Get(ctx, key).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			d.cfg.Logger.WarnContext(ctx, "fleet discover: reading the cached listing", slog.String("key", key), slog.Any("err", err))
		}
		return nil
	}
	var e entry
	if err := json.Unmarshal(b, &e); err != nil {
		d.cfg.Logger.WarnContext(ctx, "fleet discover: a cached listing does not parse", slog.String("key", key), slog.Any("err", err))
		return nil
	}
	return &e
}

// store caches a listing for StaleTTL: fresh for TTL, then kept to serve when a listing fails.
func (d *Discoverer) store(ctx context.Context, key string, e *entry) {
	if d.cfg.Redis == nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		err = d.cfg.Redis.Set(ctx, key, b, d.cfg.StaleTTL).Err()
	}
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "fleet discover: caching the listing", slog.String("key", key), slog.Any("err", err))
	}
}

// filter applies rf's filters to a listing.
func filter(rf config.ReposFrom, e *entry) *Result {
	res := &Result{ListedAt: e.ListedAt, Skipped: map[SkipReason]int{}, SkippedRepos: map[SkipReason][]string{}}
	excluded := map[string]bool{}
	for _, x := range rf.Exclude {
		excluded[strings.ToLower(x)] = true
	}
	seen := map[string]bool{}
	for _, r := range e.Repos {
		k := strings.ToLower(r.Repo)
		if seen[k] {
			continue // listed twice: a repository created while the pages were read
		}
		seen[k] = true
		var why SkipReason
		switch {
		case excluded[k]:
			why = SkipExcluded
		case r.Archived && !rf.Archived:
			why = SkipArchived
		case !r.CanPull:
			why = SkipUnreadable
		case r.Empty:
			why = SkipEmpty
		}
		if why != "" {
			res.Skipped[why]++
			res.SkippedRepos[why] = append(res.SkippedRepos[why], r.Repo)
			continue
		}
		res.Repos = append(res.Repos, Repo{Repo: r.Repo, CloneURL: r.CloneURL, DefaultBranch: r.DefaultBranch})
	}
	slices.SortFunc(res.Repos, func(a, b Repo) int { return compareRepos(a.Repo, b.Repo) })
	for _, names := range res.SkippedRepos {
		slices.SortFunc(names, compareRepos)
	}
	return res
}

// compareRepos orders owner/name case-insensitively, then exactly (so the order is total).
func compareRepos(a, b string) int {
	return cmp.Or(strings.Compare(strings.ToLower(a), strings.ToLower(b)), strings.Compare(a, b))
}
