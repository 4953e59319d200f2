package itemstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// A running attempt's spend is charged between checkpoints too: a step that runs for minutes
// writes no checkpoint, and an execution interrupted in the middle of it (SIGTERM, a crash)
// would otherwise lose the wall time it ran — the resumed execution starts its meter from the
// last checkpoint. ChargeRunning raises the attempt's charged record to the meter's reading
// without touching the checkpoint; a resumed execution starts its meter from the larger of the
// checkpoint's spend and the charged record (workitems.Spend.AtLeast), so the interrupted time
// stays charged to the attempt and, at its exit, to the item.

// chargeRunning raises an attempt's charged record to the spend given, field by field, and adds
// what the cost rose by to the template's daily cost, only while the writer's epoch is the
// newest (the same rise-only rule as the checkpoint's charge).
//
//	KEYS[1] epoch key, KEYS[2] charged hash, KEYS[3] the template's daily cost key (today, UTC)
//	ARGV[1] epoch, ARGV[2..9] the spend so far (spendFields order), ARGV[10] daily cost TTL (s)
//
// Returns {1, the charged fields after, before}, or {-1} when the epoch is stale.
var chargeRunning = redis.NewScript(chargeLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
local after, before = charge(KEYS[2], KEYS[3], ARGV, 1, ARGV[10])
return {1, after, before}
`)

// ChargeRunning charges c.Spend — a running attempt's spend so far — to the attempt's charged
// record and the template's daily cost under the fence, without writing a checkpoint (see the
// note at the top). It returns the charged spend after the write and what this write charged; under
// a stale fence it charges nothing and returns ErrLeaseLost.
func (s *Store) ChargeRunning(ctx context.Context, f *Fence, c Charge) (Charged, error) {
	if c.Template == "" {
		return Charged{}, fmt.Errorf("workitems: charge %s attempt %d: no template to charge", f.Item, f.Attempt)
	}
	args := append([]any{f.Epoch}, spendArgs(c.Spend)...)
	args = append(args, int64(dailyCostTTL.Seconds()))
	res, err := chargeRunning.Run(ctx, s.rdb, []string{s.k.epoch(f.Item, f.Attempt), s.k.charged(f.Item, f.Attempt),
		s.k.dailyCost(c.Template, s.Now().UTC().Format(time.DateOnly))}, args...).Slice()
	if err != nil {
		return Charged{}, fmt.Errorf("workitems: charge %s attempt %d: %w", f.Item, f.Attempt, err)
	}
	if n, _ := res[0].(int64); n < 0 || len(res) < 3 {
		return Charged{}, fmt.Errorf("workitems: charge %s attempt %d epoch %d: %w", f.Item, f.Attempt, f.Epoch, workitems.ErrLeaseLost)
	}
	after, before := parseSpend(replyStrings(res[1])), parseSpend(replyStrings(res[2]))
	return Charged{Total: after, Delta: workitems.Remainder(after, before)}, nil
}
