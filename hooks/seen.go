package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Seen remembers the delivery ids already processed, per forge.
type Seen interface {
	// Mark records id and reports whether it is new (false: a duplicate).
	Mark(ctx context.Context, forge, id string) (bool, error)
	// Unmark forgets id, so that the forge's redelivery is processed (the sink failed).
	Unmark(ctx context.Context, forge, id string) error
}

// DefaultSeenTTL is how long a delivery id is remembered: longer than any forge redelivers
// (GitHub lets a delivery be redelivered for 3 days).
const DefaultSeenTTL = 7 * 24 * time.Hour

// RedisSeen is a Seen in Redis: one key per delivery, set with SET NX and a TTL.
type RedisSeen struct {
	rdb  redis.Cmdable
	keys keys
	ttl  time.Duration
}

// NewRedisSeen keeps delivery ids under prefix (the deployment's, e.g. "ol:") for ttl
// (DefaultSeenTTL when 0).
func NewRedisSeen(rdb redis.Cmdable, prefix string, ttl time.Duration) *RedisSeen {
	if ttl <= 0 {
		ttl = DefaultSeenTTL
	}
	return &RedisSeen{rdb: rdb, keys: keys{p: prefix}, ttl: ttl}
}

// Mark sets the delivery's key if it is absent.
func (s *RedisSeen) Mark(ctx context.Context, forge, id string) (bool, error) {
	return s.rdb.SetNX(ctx, s.keys.seen(forge, id), 1, s.ttl).Result()
}

// Unmark deletes the delivery's key.
func (s *RedisSeen) Unmark(ctx context.Context, forge, id string) error {
	return s.rdb.Del(ctx, s.keys.seen(forge, id)).Err()
}

// keys builds every Redis key of the package, under the caller's prefix.
type keys struct{ p string }

// seen is a delivery's key (string, TTL). Forge keys are config names (lower-case letters,
// digits, '.', '_', '-'); delivery ids are hashed to a fixed length, whatever the forge sends.
func (k keys) seen(forge, id string) string {
	h := sha256.Sum256([]byte(id))
	return k.p + "hooks:seen:" + forge + ":" + hex.EncodeToString(h[:16])
}
