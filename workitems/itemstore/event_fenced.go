package itemstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// emitFenced appends one event to the item's log and the deployment's log only while the
// writer's epoch is the newest, so a worker whose lease was taken over records nothing more.
//
//	KEYS[1] epoch key, KEYS[2] the item's event stream, KEYS[3] the deployment's event stream
//	ARGV[1] epoch, ARGV[2] event JSON, ARGV[3] the item stream's MAXLEN, ARGV[4] the
//	deployment stream's MAXLEN (both approximate)
//
// Returns 1 when appended, 0 when the epoch is stale (nothing written).
var emitFenced = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'e', ARGV[2])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'e', ARGV[2])
return 1
`)

// EmitFenced is Emit under the fence: the event is appended only while f's epoch is the newest
// on its attempt, else nothing is written and the error wraps ErrLeaseLost. The worker's step
// events go through it; the one lease_lost event a fenced-out worker's heartbeat writes when it
// notices goes through Emit.
func (s *Store) EmitFenced(ctx context.Context, f *Fence, e workitems.Event) error {
	if e.At.IsZero() {
		e.At = s.Now().UTC()
	}
	e.Item = f.Item
	b, _ := json.Marshal(e) // Event has only marshalable fields
	n, err := emitFenced.Run(ctx, s.rdb, []string{s.k.epoch(f.Item, f.Attempt), s.k.events(e.Item), s.k.allEvents()},
		strconv.FormatInt(f.Epoch, 10), b, s.maxEvents, 10*s.maxEvents).Int()
	if err != nil {
		return fmt.Errorf("workitems: event for %s: %w", e.Item, err)
	}
	if n == 0 {
		return fmt.Errorf("workitems: event for %s attempt %d: epoch %d is not the newest: %w", f.Item, f.Attempt, f.Epoch, workitems.ErrLeaseLost)
	}
	return nil
}
