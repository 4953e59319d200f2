package fleet

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// PRKey names a pull request of a fleet item: its repository and number.
func PRKey(repo string, number int) string { return repo + "#" + strconv.Itoa(number) }

// TransitionHook returns the store hook that keeps the gate true in the MULTI of every
// transition of a fleet item (it.Repo set): leaving running and verifying frees the slot and
// the reservation, a pull request opened counts (open, and in the hour), one merged or closed
// stops counting, an ended item leaves the line, and the failure streak counts ends.
func (g *Gate) TransitionHook() itemstore.TransitionHook {
	return func(ctx context.Context, p redis.Pipeliner, it *workitems.Item, from workitems.State, _ []workitems.Event) {
		if it.Repo == "" || it.State == from {
			return
		}
		t := it.Template
		wasRunning := from == workitems.StateRunning || from == workitems.StateVerifying
		running := it.State == workitems.StateRunning || it.State == workitems.StateVerifying
		if !running {
			p.SRem(ctx, g.k.running(t), it.ID)
			p.SRem(ctx, g.k.reserved(t), it.ID)
		}
		if d := it.Delivery; d != nil && d.PR != nil && d.PR.Number > 0 {
			key := PRKey(it.Repo, d.PR.Number)
			if d.PR.State == workitems.PROpen {
				p.HSet(ctx, g.k.prs(t), key, it.ID)
			} else {
				p.HDel(ctx, g.k.prs(t), key)
			}
			// Counted once: by the transition that leaves the attempt which opened it.
			if wasRunning && !running && d.Outcome == workitems.DeliveryPROpened {
				p.ZAddNX(ctx, g.k.opened(t), redis.Z{Score: float64(g.clock.Now().UnixMilli()), Member: key})
			}
		}
		switch it.State {
		case workitems.StateClosed:
			p.Set(ctx, g.k.streak(t), 0, 0)
		case workitems.StateFailed, workitems.StateEscalated:
			p.Incr(ctx, g.k.streak(t))
		}
		if it.State != workitems.StateQueued {
			// Only a queued item waits in line (an escalated one, say, waits for a person).
			p.ZRem(ctx, g.k.held(t), it.ID)
			p.SRem(ctx, g.k.hasPR(t), it.ID)
		}
	}
}
