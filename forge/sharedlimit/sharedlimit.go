// Package sharedlimit keeps each forge's rate limit ("no call before T") in Redis, so that a
// limit met by one process of a deployment holds the forge calls of all of them
// (forge.SharedLimits). A limit is one key per forge that expires when the limit resets: a
// lapsed limit costs nothing to clean up, and a later "not before" never shortens an earlier
// one.
package sharedlimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// Limits is the deployment's forge rate limits under a key prefix.
type Limits struct {
	rdb    redis.UniversalClient
	prefix string
	clock  workitems.Clock
}

// New returns the limits kept under prefix (the deployment's, e.g. "outerloop:"); clock (nil:
// the system's) is the one the forge clients read, so a limit lives until their reset.
func New(rdb redis.UniversalClient, prefix string, clock workitems.Clock) *Limits {
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &Limits{rdb: rdb, prefix: prefix, clock: clock}
}

// key is a forge's limit: its reset in Unix milliseconds.
func (l *Limits) key(forge string) string { return l.prefix + "forge:ratelimit:" + forge }

// NotBefore returns when the forge may be called again; the zero time when it may now.
func (l *Limits) NotBefore(ctx context.Context, forge string) (time.Time, error) {
	v, err := l.rdb.Get(ctx, l.key(forge)).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("sharedlimit: forge %s: read: %w", forge, err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("sharedlimit: forge %s: value %q is not a time: %w", forge, v, err)
	}
	return time.UnixMilli(ms), nil
}

// holdScript raises a forge's limit to ARGV[1] (Unix ms), never lowering it, and lets the key
// expire ARGV[2] ms from now, at the reset.
var holdScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) <= cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// Hold records that the forge may not be called before until.
func (l *Limits) Hold(ctx context.Context, forge string, until time.Time) error {
	ttl := until.Sub(l.clock.Now()).Milliseconds()
	if ttl <= 0 {
		return nil // already reset
	}
	if err := holdScript.Run(ctx, l.rdb, []string{l.key(forge)}, until.UnixMilli(), ttl).Err(); err != nil {
		return fmt.Errorf("sharedlimit: forge %s: hold until %s: %w", forge, until.UTC().Format(time.RFC3339), err)
	}
	return nil
}
