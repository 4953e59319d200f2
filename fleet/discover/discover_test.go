package discover_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/fleet/discover"
	"outerloop/forge"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// fakeLister answers ListRepos with repos (or err) and counts the calls.
type fakeLister struct {
	mu      sync.Mutex
	repos   []forge.ListedRepo
	err     error
	calls   int
	queries []forge.RepoQuery
}

func (f *fakeLister) ListRepos(_ context.Context, q forge.RepoQuery) ([]forge.ListedRepo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.repos), nil
}

func (f *fakeLister) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeLister) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func listed(repo string, mod func(*forge.ListedRepo)) forge.ListedRepo {
	r := forge.ListedRepo{Repo: repo, CloneURL: "https://git.example/" + repo + ".git", DefaultBranch: "main", CanPull: true}
	if mod != nil {
		mod(&r)
	}
	return r
}

// fleetListing is a listing with a repository of every kind, out of order.
func fleetListing() []forge.ListedRepo {
	return []forge.ListedRepo{
		listed("acme/zeta", nil),
		listed("acme/Alpha", nil),
		listed("acme/old", func(r *forge.ListedRepo) { r.Archived = true }),
		listed("acme/blank", func(r *forge.ListedRepo) { r.Empty = true }),
		listed("acme/secret", func(r *forge.ListedRepo) { r.CanPull = false }),
		listed("acme/Legacy", nil),
		listed("acme/beta", nil),
		listed("acme/beta", nil), // listed twice across pages
	}
}

var t0 = time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)

func newDiscoverer(t *testing.T, mod func(*discover.Config)) (*discover.Discoverer, *fakeclock.Clock, *redistest.Env) {
	t.Helper()
	env := redistest.New(t)
	clock := fakeclock.New(t0)
	cfg := discover.Config{Redis: env.Client, Prefix: env.Prefix, Clock: clock}
	if mod != nil {
		mod(&cfg)
	}
	return discover.New(cfg), clock, env
}

func names(rs []discover.Repo) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Repo)
	}
	return out
}

func TestDiscoverFiltersCountsAndSorts(t *testing.T) {
	t.Parallel()
	d, _, _ := newDiscoverer(t, nil)
	l := &fakeLister{repos: fleetListing()}
	rf := config.ReposFrom{Forge: "gh", Owner: "acme", Topic: "fleet", Exclude: []string{"ACME/legacy"}}
	res, err := d.Discover(context.Background(), rf, l)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(res.Repos), []string{"acme/Alpha", "acme/beta", "acme/zeta"}; !slices.Equal(got, want) {
		t.Fatalf("repos %v, want %v", got, want)
	}
	if res.Repos[0].CloneURL != "https://git.example/acme/Alpha.git" || res.Repos[0].DefaultBranch != "main" {
		t.Fatalf("repo %+v", res.Repos[0])
	}
	want := map[discover.SkipReason][]string{discover.SkipExcluded: {"acme/Legacy"}, discover.SkipArchived: {"acme/old"},
		discover.SkipUnreadable: {"acme/secret"}, discover.SkipEmpty: {"acme/blank"}}
	for _, why := range discover.AllSkipReasons() {
		if res.Skipped[why] != 1 || !slices.Equal(res.SkippedRepos[why], want[why]) {
			t.Errorf("%s: %d %v, want 1 %v", why, res.Skipped[why], res.SkippedRepos[why], want[why])
		}
	}
	if res.Cached || res.Stale || !res.ListedAt.Equal(t0) {
		t.Fatalf("cached %v, stale %v, listed at %s", res.Cached, res.Stale, res.ListedAt)
	}
	if q := l.queries[0]; q != (forge.RepoQuery{Owner: "acme", Topic: "fleet"}) {
		t.Fatalf("query %+v", q)
	}

	// archived: true keeps archived repositories; the filters apply to the cached listing.
	rf.Archived, rf.Exclude = true, nil
	res, err = d.Discover(context.Background(), rf, l)
	if err != nil || !res.Cached || l.Calls() != 1 {
		t.Fatalf("cached %v after %d calls, %v", res.Cached, l.Calls(), err)
	}
	if got, want := names(res.Repos), []string{"acme/Alpha", "acme/beta", "acme/Legacy", "acme/old", "acme/zeta"}; !slices.Equal(got, want) {
		t.Fatalf("repos %v, want %v", got, want)
	}
	if res.Skipped[discover.SkipArchived] != 0 || res.Skipped[discover.SkipExcluded] != 0 {
		t.Fatalf("skipped %v", res.Skipped)
	}
}

func TestDiscoverSharesOneListingAcrossCallsAndReplicasUntilTheTTL(t *testing.T) {
	t.Parallel()
	d, clock, env := newDiscoverer(t, func(c *discover.Config) { c.TTL = 5 * time.Minute })
	replica := discover.New(discover.Config{Redis: env.Client, Prefix: env.Prefix, Clock: clock, TTL: 5 * time.Minute})
	l := &fakeLister{repos: fleetListing()}
	rf := config.ReposFrom{Forge: "gh", Owner: "acme"}
	ctx := context.Background()
	first, err := d.Discover(ctx, rf, l)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(5*time.Minute - time.Second)
	for _, x := range []*discover.Discoverer{d, replica} {
		res, err := x.Discover(ctx, config.ReposFrom{Forge: "gh", Owner: "ACME"}, l) // owner case folds
		if err != nil || !res.Cached || !slices.Equal(names(res.Repos), names(first.Repos)) || !res.ListedAt.Equal(t0) {
			t.Fatalf("%+v, %v", res, err)
		}
	}
	if l.Calls() != 1 {
		t.Fatalf("%d listings within the TTL, want 1", l.Calls())
	}
	// Another topic or forge is another listing.
	if _, err := d.Discover(ctx, config.ReposFrom{Forge: "gh", Owner: "acme", Topic: "go"}, l); err != nil || l.Calls() != 2 {
		t.Fatalf("%d calls, %v", l.Calls(), err)
	}
	if _, err := d.Discover(ctx, config.ReposFrom{Forge: "tea", Owner: "acme"}, l); err != nil || l.Calls() != 3 {
		t.Fatalf("%d calls, %v", l.Calls(), err)
	}
	// Past the TTL the forge is asked again.
	clock.Advance(time.Second)
	res, err := replica.Discover(ctx, rf, l)
	if err != nil || res.Cached || l.Calls() != 4 || !res.ListedAt.Equal(clock.Now()) {
		t.Fatalf("after the TTL: cached %v, %d calls, %v", res.Cached, l.Calls(), err)
	}
	// The key lives under the prefix, for the stale TTL.
	key := d.Key("gh", "acme", "")
	if ttl := env.Client.TTL(ctx, key).Val(); ttl <= 23*time.Hour || ttl > 24*time.Hour {
		t.Fatalf("key %s TTL %s, want about a day", key, ttl)
	}
	if key[:len(env.Prefix)] != env.Prefix {
		t.Fatalf("key %s outside the prefix %s", key, env.Prefix)
	}
}

func TestDiscoverServesTheStaleListingWhenListingFails(t *testing.T) {
	t.Parallel()
	d, clock, _ := newDiscoverer(t, nil)
	l := &fakeLister{repos: fleetListing()}
	rf := config.ReposFrom{Forge: "gh", Owner: "acme"}
	ctx := context.Background()
	if _, err := d.Discover(ctx, rf, l); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Hour)
	outage := &forge.Error{Forge: "gh", Op: "list repositories", Class: workitems.ClassTransient, Err: forge.ErrRateLimited}
	l.fail(outage)
	res, err := d.Discover(ctx, rf, l)
	if !errors.Is(err, forge.ErrRateLimited) || res == nil || !res.Stale || !res.ListedAt.Equal(t0) {
		t.Fatalf("got %+v, %v; want the listing of %s, stale, with the error", res, err, t0)
	}
	if workitems.ClassOf(err) != workitems.ClassTransient {
		t.Fatalf("class %s", workitems.ClassOf(err))
	}
	if got := names(res.Repos); !slices.Equal(got, []string{"acme/Alpha", "acme/beta", "acme/Legacy", "acme/zeta"}) {
		t.Fatalf("stale repos %v", got)
	}
	if l.Calls() != 2 {
		t.Fatalf("%d calls", l.Calls())
	}
	// Back: the new listing replaces the stale one.
	l.fail(nil)
	res, err = d.Discover(ctx, rf, l)
	if err != nil || res.Stale || res.Cached || !res.ListedAt.Equal(clock.Now()) {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestDiscoverWithNothingCachedReturnsTheError(t *testing.T) {
	t.Parallel()
	d, _, _ := newDiscoverer(t, nil)
	boom := errors.New("forge down")
	l := &fakeLister{err: boom}
	res, err := d.Discover(context.Background(), config.ReposFrom{Forge: "gh", Owner: "acme"}, l)
	if res != nil || !errors.Is(err, boom) {
		t.Fatalf("%+v, %v", res, err)
	}
	if _, err := d.Discover(context.Background(), config.ReposFrom{Forge: "gh"}, l); err == nil {
		t.Fatal("no owner accepted")
	}
}

func TestDiscoverWithoutRedisListsEveryTime(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{
		"none": nil,
		// A cache that cannot be reached is no cache: the forge is asked, nothing fails.
		"unreachable": redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if rdb != nil {
				t.Cleanup(func() { _ = rdb.Close() })
			}
			d := discover.New(discover.Config{Redis: rdb, Prefix: "unused:", Clock: fakeclock.New(t0)})
			l := &fakeLister{repos: fleetListing()}
			for i := range 2 {
				res, err := d.Discover(context.Background(), config.ReposFrom{Forge: "gh", Owner: "acme"}, l)
				if err != nil || res.Cached || len(res.Repos) != 4 {
					t.Fatalf("call %d: %+v, %v", i, res, err)
				}
			}
			if l.Calls() != 2 {
				t.Fatalf("%d calls", l.Calls())
			}
		})
	}
}

func TestSkipReasonsAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[discover.SkipReason]bool{}
	for _, r := range discover.AllSkipReasons() {
		if seen[r] || r == "" {
			t.Fatalf("reason %q twice or empty", r)
		}
		seen[r] = true
	}
	if len(seen) != 4 {
		t.Fatalf("%d reasons", len(seen))
	}
}
