package forge

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"outerloop/workitems"
)

// SharedLimits is where the processes of one deployment keep each forge's "not before T", so
// that a rate limit one worker met holds the calls of every worker, scheduler and API server of
// that forge (forge/sharedlimit keeps it in Redis). Forge is the key in forges:.
type SharedLimits interface {
	NotBefore(ctx context.Context, forge string) (time.Time, error)
	Hold(ctx context.Context, forge string, until time.Time) error
}

// rateGate is one forge's memory of its rate limit, shared by every call through its HTTP
// client (pull requests, checks, reviews, repository listings): once the forge said "not
// before T" — Retry-After on a 429 or 403, or GitHub's X-RateLimit-Remaining: 0 with
// X-RateLimit-Reset — every later request waits until T instead of spending another refusal.
// A wait longer than maxWait (Config.MaxRateWait) is not waited: the request fails at once
// with a *rateLimitedError, which the clients classify as ErrRateLimited with its reset.
type rateGate struct {
	base    http.RoundTripper
	clock   workitems.Clock
	maxWait time.Duration
	forge   string
	shared  SharedLimits // nil: this process's memory only
	logger  *slog.Logger // nil: discards

	mu    sync.Mutex
	until time.Time // no request before this; zero when none
}

// rateLimitedError is a request the gate refused to send: the limit resets at Until.
type rateLimitedError struct{ Until time.Time }

func (e *rateLimitedError) Error() string {
	return "rate limited until " + e.Until.UTC().Format(time.RFC3339) + " (not sent)"
}

func (e *rateLimitedError) Unwrap() error { return ErrRateLimited }

func (g *rateGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.wait(req); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	resp, err := g.base.RoundTrip(req)
	if err == nil {
		g.observe(resp)
	}
	return resp, err
}

// wait holds req until the gate opens, bounded by maxWait and req's context. A limit another
// process met (shared) counts as this one's: one Redis read per forge call, beside an HTTP
// round trip. The shared memory unreadable (Redis away) is no reason to refuse a call: the
// forge's own answer still closes the gate.
func (g *rateGate) wait(req *http.Request) error {
	g.mu.Lock()
	until := g.until
	g.mu.Unlock()
	if g.shared != nil && !until.After(g.clock.Now()) {
		if t, err := g.shared.NotBefore(req.Context(), g.forge); err != nil {
			g.log().Warn("forge: shared rate limit not read; this process's own is used", "forge", g.forge, "err", err)
		} else if t.After(until) {
			until = t
			g.mu.Lock()
			if t.After(g.until) {
				g.until = t
			}
			g.mu.Unlock()
		}
	}
	d := until.Sub(g.clock.Now())
	if d <= 0 {
		return nil
	}
	if d > g.maxWait {
		return &rateLimitedError{Until: until}
	}
	return sleep(req.Context(), g.clock, d)
}

// observe reads a response's rate-limit headers and closes the gate until they say, here and
// for every process sharing the forge.
func (g *rateGate) observe(resp *http.Response) {
	now := g.clock.Now()
	var until time.Time
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusForbidden {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			until = now.Add(d)
		}
	}
	// Remaining 0 on any answer, a success included: the next request would be refused.
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if r := time.Unix(s, 0); r.After(until) {
				until = r
			}
		}
	}
	if !until.After(now) {
		return
	}
	g.mu.Lock()
	if until.After(g.until) {
		g.until = until
	}
	g.mu.Unlock()
	if g.shared != nil {
		// The request's context may end with its response read; the hold must still land.
		parent := context.Background()
		if resp.Request != nil {
			parent = context.WithoutCancel(resp.Request.Context())
		}
		ctx, cancel := context.WithTimeout(parent, 5*time.Second)
		defer cancel()
		if err := g.shared.Hold(ctx, g.forge, until); err != nil {
			g.log().Warn("forge: rate limit not shared; other processes learn it from their own answers", "forge", g.forge, "until", until, "err", err)
		}
	}
}

func (g *rateGate) log() *slog.Logger {
	if g.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.logger
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date (relative to now).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
