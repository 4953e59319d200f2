package console

import (
	"context"

	"outerloop/workitems"
)

// withRunningSpend returns it with the spend its running attempt has been charged so far added
// to the item's (which counts an attempt only at its exit), so that the item page's wall time
// advances while a long step runs. A read error leaves the item's own spend.
func (c *Console) withRunningSpend(ctx context.Context, it *workitems.Item) *workitems.Item {
	if it.State != workitems.StateRunning {
		return it
	}
	sp, err := c.store.ChargedSpend(ctx, it.ID, it.Attempt)
	if err != nil {
		return it
	}
	cp := *it
	cp.Spend = cp.Spend.Add(sp)
	return &cp
}
