package sharedlimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"outerloop/forge"
	"outerloop/forge/sharedlimit"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestAHoldIsRaisedNeverLoweredAndReadBack(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	clock := fakeclock.New(time.Now().Truncate(time.Millisecond))
	l := sharedlimit.New(env.Client, env.Prefix, clock)
	ctx := context.Background()
	if at, err := l.NotBefore(ctx, "hub"); err != nil || !at.IsZero() {
		t.Fatalf("no limit yet: %v %v", at, err)
	}
	late, early := clock.Now().Add(time.Hour), clock.Now().Add(time.Minute)
	for _, until := range []time.Time{late, early, clock.Now().Add(-time.Second)} {
		if err := l.Hold(ctx, "hub", until); err != nil {
			t.Fatal(err)
		}
	}
	if at, err := l.NotBefore(ctx, "hub"); err != nil || !at.Equal(late) {
		t.Fatalf("not before %v %v, want the latest hold %v", at, err, late)
	}
	if at, _ := l.NotBefore(ctx, "tea"); !at.IsZero() {
		t.Fatalf("another forge's limit %v, want none", at)
	}
	// The key lives until the reset, not longer.
	if ttl := env.Client.PTTL(ctx, env.Prefix+"forge:ratelimit:hub").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("ttl %v, want about an hour", ttl)
	}
}

// Two processes of one deployment (two forge clients, nothing shared but Redis): the limit the
// first meets holds the second's calls, which are refused without reaching the forge.
func TestARateLimitOneProcessMetHoldsAnothersCalls(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	clock := fakeclock.New(time.Now().Truncate(time.Second))
	reset := clock.Now().Add(time.Hour)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// GitHub's documented answer once the primary rate limit is spent.
		calls.Add(1)
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`))
	}))
	t.Cleanup(srv.Close)
	process := func(shared forge.SharedLimits) forge.Forge {
		f, err := forge.New(forge.Config{Name: "hub", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub, BaseURL: srv.URL + "/", TokenEnv: "GH"},
			Getenv: func(string) string { return "t0ken" }, Clock: clock, SharedLimits: shared,
			HTTPClient: &http.Client{Transport: srv.Client().Transport}})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ctx := context.Background()
	first := process(sharedlimit.New(env.Client, env.Prefix, clock))
	if _, err := first.Repository(ctx, "acme/a"); !errors.Is(err, forge.ErrRateLimited) {
		t.Fatalf("first process: %v, want rate limited", err)
	}
	sent := calls.Load()
	second := process(sharedlimit.New(env.Client, env.Prefix, clock))
	if _, err := second.Repository(ctx, "acme/b"); !errors.Is(err, forge.ErrRateLimited) {
		t.Fatalf("second process: %v, want rate limited", err)
	}
	if calls.Load() != sent {
		t.Fatalf("the second process sent %d calls after the first met the limit, want 0", calls.Load()-sent)
	}
	// Without the shared memory a process learns only from its own refusal.
	alone := process(nil)
	_, _ = alone.Repository(ctx, "acme/c")
	if calls.Load() == sent {
		t.Fatal("a process without shared limits must have called the forge (the test would prove nothing)")
	}
}
