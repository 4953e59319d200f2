package api

import (
	"sync"
	"time"

	"outerloop/workitems"
)

// LoginLimits bound failed logins (a wrong token in the console's form or a bearer header)
// over a sliding window: PerIP from one client address, Global from all together. Past either,
// attempts are refused with 429 and Retry-After without the token being checked, until the
// oldest failure leaves the window. The state is this process's memory: each serve process
// counts its own, and a restart forgets it.
type LoginLimits struct {
	PerIP  int
	Global int
	Window time.Duration
}

// DefaultLoginLimits: 5 failures a minute per address, 50 a minute in total.
var DefaultLoginLimits = LoginLimits{PerIP: 5, Global: 50, Window: time.Minute}

// loginLimiter keeps the failure times in the window, per address and overall. Only failures
// add entries and the global limit caps them, so the map holds at most Global addresses.
type loginLimiter struct {
	l     LoginLimits
	clock workitems.Clock

	mu     sync.Mutex
	perIP  map[string][]time.Time
	global []time.Time
}

func newLoginLimiter(l LoginLimits, clock workitems.Clock) *loginLimiter {
	d := DefaultLoginLimits
	if l.PerIP <= 0 {
		l.PerIP = d.PerIP
	}
	if l.Global <= 0 {
		l.Global = d.Global
	}
	if l.Window <= 0 {
		l.Window = d.Window
	}
	return &loginLimiter{l: l, clock: clock, perIP: map[string][]time.Time{}}
}

// prune drops failures older than the window (called with mu held).
func (l *loginLimiter) prune(now time.Time) {
	cut := now.Add(-l.l.Window)
	keep := func(ts []time.Time) []time.Time {
		i := 0
		for i < len(ts) && !ts[i].After(cut) {
			i++
		}
		return ts[i:]
	}
	l.global = keep(l.global)
	for ip, ts := range l.perIP {
		if ts = keep(ts); len(ts) == 0 {
			delete(l.perIP, ip)
		} else {
			l.perIP[ip] = ts
		}
	}
}

// check refuses an attempt from ip while it or everyone is at the limit.
func (l *loginLimiter) check(ip string) *RateLimitedError {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.prune(now)
	if ts := l.perIP[ip]; len(ts) >= l.l.PerIP {
		return &RateLimitedError{RetryAfter: ts[len(ts)-l.l.PerIP].Add(l.l.Window).Sub(now)}
	}
	if len(l.global) >= l.l.Global {
		return &RateLimitedError{RetryAfter: l.global[len(l.global)-l.l.Global].Add(l.l.Window).Sub(now), Global: true}
	}
	return nil
}

// fail records a failed attempt from ip.
func (l *loginLimiter) fail(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.perIP[ip] = append(l.perIP[ip], now)
	l.global = append(l.global, now)
}
