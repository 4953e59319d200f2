package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// Heartbeat keeps one execution's attempt lease alive: every third of TTL, on Clock, it renews
// the lease and looks for a person's cancel. When renewal finds a newer epoch (another execution
// took the attempt over) it records one lease_lost event and cancels the attempt with
// workitems.ErrLeaseLost; on a cancel request it cancels with errCancelled. It is the handler's
// background component with a Start/Stop pair; Stop waits for its goroutine.
type Heartbeat struct {
	Store  *itemstore.Store
	Clock  workitems.Clock
	TTL    time.Duration
	Fence  *itemstore.Fence
	Log    *slog.Logger
	Cancel context.CancelCauseFunc // cancels the attempt's context with the cause

	done chan struct{}
	wg   sync.WaitGroup
}

// Start begins renewing until Stop, ctx ends, the lease is lost or the item is cancelled.
func (hb *Heartbeat) Start(ctx context.Context) {
	hb.done = make(chan struct{})
	hb.wg.Add(1)
	go func() {
		defer hb.wg.Done()
		hb.run(ctx)
	}()
}

// Stop ends the heartbeat and waits for it.
func (hb *Heartbeat) Stop() {
	close(hb.done)
	hb.wg.Wait()
}

func (hb *Heartbeat) run(ctx context.Context) {
	for {
		select {
		case <-hb.done:
			return
		case <-ctx.Done():
			return
		case <-hb.Clock.After(hb.TTL / 3):
		}
		if err := hb.Store.RenewLease(ctx, hb.Fence, hb.TTL); errors.Is(err, workitems.ErrLeaseLost) {
			hb.Log.Warn("lease taken over by another worker; stopping", "epoch", hb.Fence.Epoch)
			// Not fenced: it is the record that this execution noticed and stopped.
			_ = hb.Store.Emit(context.WithoutCancel(ctx), workitems.Event{Item: hb.Fence.Item, Attempt: hb.Fence.Attempt,
				Type: workitems.EventLeaseLost, Message: "a newer lease exists; this worker stopped", Actor: hb.Fence.Holder})
			hb.Cancel(workitems.ErrLeaseLost)
			return
		}
		if it, err := hb.Store.Get(ctx, hb.Fence.Item); err == nil && (it.CancelReq || it.State == workitems.StateCancelled) {
			hb.Cancel(errCancelled)
			return
		}
	}
}
