package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// keys builds the scheduler's own Redis keys, under the store's prefix.
type keys struct{ p string }

// handled is a hash: template → unix ms up to which the template's ticks have been handled by
// some scheduler replica (run, skipped, or dropped as missed).
func (k keys) handled() string { return k.p + "sched:handled" }

// paused is a hash per paused template (see pause.go): actor, reason, at (unix ms), skipped
// (ticks skipped while paused), last_skipped (unix ms of the newest). No key: not paused.
func (k keys) paused(template string) string { return k.p + "sched:paused:" + template }

// controls is a list per template, newest first and capped, of the people's template controls
// (ControlRecord JSON): pause, resume, run now, re-run.
func (k keys) controls(template string) string { return k.p + "sched:controls:" + template }

// triggered counts the items a template's triggers made in the clock hour starting at hour
// (string, TTL triggeredTTL): max_per_hour (trigger_cap.go).
func (k keys) triggered(template string, hour time.Time) string {
	return k.p + "sched:triggered:" + template + ":" + hour.UTC().Format("2006010215")
}

// firings is a hash per template: trigger source → the last firing (Firing JSON), for the
// console's templates page (firings.go).
func (k keys) firings(template string) string { return k.p + "sched:firings:" + template }

// claimHandled moves a template's "handled up to" mark forward to ARGV[2] when it is behind.
//
//	KEYS[1] the handled hash
//	ARGV[1] template, ARGV[2] unix ms
//
// Returns {0, 0} when the template had no mark (a new deployment), {1, prev} when the mark moved
// from prev, {2, cur} when it is already at or past ARGV[2] (another replica got there first).
var claimHandled = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(cur) >= tonumber(ARGV[2]) then return {2, tonumber(cur)} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if cur then return {1, tonumber(cur)} end
return {0, 0}
`)

// claimStatus is what claimHandled found.
type claimStatus int

const (
	claimFirst  claimStatus = iota // no mark: nothing before now should have run
	claimMoved                     // the ticks in (prev, now] are this replica's to judge
	claimBehind                    // another replica handled up to now already
)

// claim marks a template's ticks up to now as handled and returns the interval this call
// claimed: the ticks after prev (status claimMoved) are this replica's to judge as missed or not.
// Exactly one of any number of concurrent callers claims each instant.
func (s *Scheduler) claim(ctx context.Context, template string, now time.Time) (time.Time, claimStatus, error) {
	res, err := claimHandled.Run(ctx, s.q.store.Redis(), []string{s.k.handled()}, template, now.UnixMilli()).Int64Slice()
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("scheduler: template %q: marking ticks handled: %w", template, err)
	}
	return time.UnixMilli(res[1]), claimStatus(res[0]), nil
}
