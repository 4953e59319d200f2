package worker

import (
	"context"
	"errors"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// record keeps what a charged write left and reports its delta. Writes may finish out of order
// (a checkpoint and the running charge), so the total only rises.
func (c *charge) record(obs Observer, w itemstore.Charged) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.charged = c.charged.AtLeast(w.Total)
	c.count(obs, w.Delta)
}

// chargeRunning charges the meter's reading without a checkpoint (itemstore.ChargeRunning): the
// wall time of a long step is charged while it runs, so an execution interrupted in the middle
// of it keeps that time charged, and the daily cost sees spend no checkpoint has carried yet.
func (c *fencedCheckpointer) chargeRunning(ctx context.Context) error {
	if c.charge == nil || c.meter == nil {
		return nil
	}
	w, err := c.store.ChargeRunning(ctx, c.fence, itemstore.Charge{Template: c.charge.template, Spend: c.meter.Spent()})
	if err != nil {
		return err
	}
	c.charge.record(c.obs, w)
	return nil
}

// chargeWhileRunning charges the running attempt every interval on the handler's clock until
// the returned stop is called; stop charges once more (an interrupted execution's last seconds)
// and waits for the goroutine.
func (h *Handler) chargeWhileRunning(ctx context.Context, cp *fencedCheckpointer, every time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-h.o.Clock.After(every):
			}
			if err := cp.chargeRunning(ctx); err != nil && !errors.Is(err, workitems.ErrLeaseLost) && ctx.Err() == nil {
				cp.logger().Warn("running spend not charged; the next charge or checkpoint catches up", "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		// The loop stopped (exit, yield, cancel): charge what it ran since the last write. A
		// fenced-out execution charges nothing.
		if err := cp.chargeRunning(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, workitems.ErrLeaseLost) {
			cp.logger().Warn("final running spend not charged", "err", err)
		}
	}
}

// resumedSpend is what a resumed execution's meter starts from: the checkpoint's spend, with the
// wall time an interrupted execution ran past its last checkpoint (charged while it ran). The
// counts stay the checkpoint's: the loop repeats from there what it had not checkpointed, and
// counts it again, while the charged record keeps what the interrupted run spent, so the
// template's daily cost never counts it twice.
func resumedSpend(env *envelope, charged workitems.Spend) workitems.Spend {
	var s workitems.Spend
	if env != nil {
		s = env.Spend
	}
	s.WallTime = max(s.WallTime, charged.WallTime)
	return s
}
