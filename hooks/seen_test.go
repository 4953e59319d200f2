package hooks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/hooks"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
)

// testRedis is the shared Redis ($REDIS_URL or 127.0.0.1:6379) with a prefix of this test's
// own, whose keys are deleted at cleanup (never a FLUSH: the server is shared). Without a Redis
// the test is skipped (failed in CI).
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	c := redis.NewClient(redistest.Options(t))
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		msg := "hooks: no Redis answers at " + redistest.URL() + " (set REDIS_URL or start redis-server): " + err.Error()
		if isCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "oltest:hooks:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
		defer cancel()
		redistest.DeleteMatching(ctx, c, prefix+"*")
		_ = c.Close()
	})
	return c, prefix
}

func TestRedisSeenMarksADeliveryOnceUntilUnmarked(t *testing.T) {
	t.Parallel()
	c, prefix := testRedis(t)
	s := hooks.NewRedisSeen(c, prefix, 0)
	ctx := context.Background()
	mark := func(forge, id string, want bool) {
		t.Helper()
		got, err := s.Mark(ctx, forge, id)
		if err != nil || got != want {
			t.Fatalf("Mark(%s, %s) = %v, %v; want %v", forge, id, got, err, want)
		}
	}
	mark("tea", "b6b4d3c0-0000-4000-8000-000000000001", true)
	mark("tea", "b6b4d3c0-0000-4000-8000-000000000001", false)
	mark("gh", "b6b4d3c0-0000-4000-8000-000000000001", true) // another forge's id space
	if err := s.Unmark(ctx, "tea", "b6b4d3c0-0000-4000-8000-000000000001"); err != nil {
		t.Fatal(err)
	}
	mark("tea", "b6b4d3c0-0000-4000-8000-000000000001", true)

	keys := keysUnder(t, c, prefix)
	if len(keys) != 2 {
		t.Fatalf("keys %v, want one per forge's delivery", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix+"hooks:seen:") {
			t.Errorf("key %q is not under the caller's prefix", k)
		}
		ttl := c.TTL(ctx, k).Val()
		if ttl <= 7*24*time.Hour-time.Minute || ttl > 7*24*time.Hour {
			t.Errorf("key %q TTL %s, want 7 days", k, ttl)
		}
	}
}

func TestRedisSeenKeepsAnIDForItsTTL(t *testing.T) {
	t.Parallel()
	c, prefix := testRedis(t)
	s := hooks.NewRedisSeen(c, prefix, time.Hour)
	ctx := context.Background()
	long := strings.Repeat("x", 10_000) // any id the forge sends makes a short key
	if ok, err := s.Mark(ctx, "gh", long); err != nil || !ok {
		t.Fatalf("Mark = %v, %v", ok, err)
	}
	keys := keysUnder(t, c, prefix)
	if len(keys) != 1 || len(keys[0]) > len(prefix)+80 {
		t.Fatalf("keys %v", keys)
	}
	if ttl := c.TTL(ctx, keys[0]).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL %s, want an hour", ttl)
	}
}

// keysUnder lists the keys under prefix (SCAN: the server is shared).
func keysUnder(t *testing.T, c *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, prefix+"*", 100).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
