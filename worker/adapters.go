package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"

	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"outerloop/workitems"
)

// fencedCheckpointer writes a loop's checkpoints under the attempt's fence. The stored state is
// an envelope holding the meter's spend beside the loop's own state, so that a resumed attempt
// does not get its budget back, and the workspace's snapshot, so that any host can restore the
// tree the loop's state describes (the diff itself is written beside it in the same Lua call).
// With a charge, every checkpoint also charges the spend made since the last one, in the same
// Lua call (daily cost and counters; see itemstore.WriteChargedCheckpoint).
type fencedCheckpointer struct {
	store  *itemstore.Store
	fence  *itemstore.Fence
	meter  *Meter
	obs    Observer
	snap   *snapshotter        // nil: no workspace (nothing to snapshot)
	warn   func(string, error) // a snapshot could not be taken
	charge *charge             // nil: checkpoints charge nothing (NewFencedCheckpointer)
	clock  workitems.Clock     // times checkpoints and paces retries of a failed write (default: the system clock)
	log    *slog.Logger        // a failed write being retried (default: slog.Default)
	steer  *steerSource        // nil: the loop takes no steer input through this checkpointer
	seq    atomic.Int64        // numbers this execution's writes: each write's token (itemstore.CheckpointToken)
}

// charge is where an attempt's spend is charged, and what has been so far.
type charge struct {
	template        string
	loop            workitems.LoopKind
	provider, model string // the config's provider key ("" for none) and the model asked for ("": its configured one)
	item            string
	mu              sync.Mutex      // the loop's checkpoints and the running charge (running_charge.go) both record
	charged         workitems.Spend // what the attempt's checkpoints charged, this execution's and earlier ones'
}

// count reports a charge to the observer: the spend counters and the running attempt's cost.
func (c *charge) count(obs Observer, delta workitems.Spend) {
	obs.AddSpend(c.template, string(c.loop), delta, c.item)
	if c.provider != "" {
		obs.AddModelSpend(c.template, c.provider, c.model, delta, c.item)
	}
	obs.SetRunningCost(c.template, string(c.loop), c.item, c.charged.CostUSD)
}

type envelope struct {
	Spend     workitems.Spend              `json:"spend"`
	Loop      json.RawMessage              `json:"loop,omitempty"`
	Workspace *workitems.WorkspaceSnapshot `json:"workspace,omitempty"`
	At        time.Time                    `json:"at"`
}

// clk is the injected clock, or the system clock when none was given.
func (c *fencedCheckpointer) clk() workitems.Clock {
	if c.clock == nil {
		return workitems.SystemClock{}
	}
	return c.clock
}

// envelope returns the stored envelope (nil when the attempt has no checkpoint).
func (c *fencedCheckpointer) envelope(ctx context.Context) (*envelope, error) {
	raw, _, err := c.store.LoadCheckpoint(ctx, c.fence.Item, c.fence.Attempt)
	if err != nil || raw == nil {
		return nil, err
	}
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("worker: checkpoint of %s attempt %d unreadable: %w", c.fence.Item, c.fence.Attempt, err)
	}
	return &e, nil
}

// Load returns the loop's state and history.
func (c *fencedCheckpointer) Load(ctx context.Context) ([]byte, [][]byte, error) {
	raw, hist, err := c.store.LoadCheckpoint(ctx, c.fence.Item, c.fence.Attempt)
	if err != nil || raw == nil {
		return nil, hist, err
	}
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, nil, fmt.Errorf("worker: checkpoint unreadable: %w", err)
	}
	if len(e.Loop) == 0 || string(e.Loop) == "null" {
		return nil, hist, nil
	}
	return e.Loop, hist, nil
}

// Save writes the loop's state with the current spend and the workspace's snapshot.
func (c *fencedCheckpointer) Save(ctx context.Context, state []byte, history ...[]byte) error {
	e := envelope{Spend: c.meter.Spent(), At: c.clk().Now().UTC()}
	if len(state) > 0 {
		if !json.Valid(state) {
			b, _ := json.Marshal(string(state))
			state = b
		}
		e.Loop = state
	}
	w := itemstore.CheckpointWrite{History: history}
	if c.steer != nil {
		w.SteerTaken = c.steer.untaken()
	}
	if c.snap != nil {
		meta, snap := c.snap.take(ctx)
		e.Workspace, w.Snapshot = &meta, snap
		if meta.Error != "" && c.warn != nil {
			c.warn("workspace snapshot failed; a resume elsewhere starts the attempt over", fmt.Errorf("%s", meta.Error))
		}
	}
	w.State, _ = json.Marshal(e)
	// The write's latency is real elapsed time, whatever clock the attempt runs on.
	real := workitems.SystemClock{}
	start := real.Now()
	if c.charge != nil {
		w.Charge = &itemstore.Charge{Template: c.charge.template, Spend: e.Spend}
	}
	charged, err := c.write(ctx, w)
	c.obs.CheckpointWrite(real.Now().Sub(start))
	if err == nil && e.Workspace != nil {
		c.snap.stored(*e.Workspace)
	}
	if err == nil && c.steer != nil {
		c.steer.taken(w.SteerTaken)
	}
	if err == nil && c.charge != nil {
		c.charge.record(c.obs, charged)
	}
	return err
}

// write writes w, retrying a failed write with backoff for as long as ctx lives: a Redis
// blip pauses the loop instead of ending the attempt. Only a lost lease (the fence refused the
// write: another execution holds the attempt) or the end of ctx (the heartbeat cancels it when
// the lease is taken over; a person's cancel; shutdown) stops it. Rewriting is safe: every try
// carries the write's token, so one Redis already ran writes nothing again.
func (c *fencedCheckpointer) write(ctx context.Context, w itemstore.CheckpointWrite) (itemstore.Charged, error) {
	// One token for every try of this write: a try whose reply was lost after Redis ran it
	// (go-redis's own retry, or ours) is then applied once, so its history is not appended twice.
	w.Token = itemstore.CheckpointToken(c.fence, c.seq.Add(1))
	clock := c.clk()
	for n := 1; ; n++ {
		charged, err := c.store.WriteChargedCheckpoint(ctx, c.fence, w)
		if err == nil || errors.Is(err, workitems.ErrLeaseLost) {
			if err == nil && n > 1 {
				c.logger().Info("checkpoint written after retries", "item", c.fence.Item, "attempt", c.fence.Attempt, "tries", n)
			}
			return charged, err
		}
		if ctx.Err() != nil {
			return charged, fmt.Errorf("worker: checkpoint not written before the attempt stopped: %w (%w): %w", ctx.Err(), context.Cause(ctx), err)
		}
		d := CheckpointRetryDelay(n)
		c.logger().Warn("checkpoint write failed; the loop waits and retries while it holds the lease",
			"item", c.fence.Item, "attempt", c.fence.Attempt, "try", n, "retry_in", d, "err", err)
		select {
		case <-ctx.Done():
		case <-clock.After(d):
		}
	}
}

func (c *fencedCheckpointer) logger() *slog.Logger {
	if c.log == nil {
		return slog.Default()
	}
	return c.log
}

// CheckpointRetryDelay is the pause before try n+1 of a failed checkpoint write:
// 100ms·2^(n-1), at most 5s, with ±10% jitter.
func CheckpointRetryDelay(n int) time.Duration {
	d := 5 * time.Second
	if n < 7 {
		d = min(d, 100*time.Millisecond<<(n-1))
	}
	return time.Duration(float64(d) * (0.9 + 0.2*mathrand.Float64()))
}

// restart discards the loop's checkpoint and history, keeping the spend already made, and
// records the fresh workspace's snapshot: the attempt starts over from its first step.
func (c *fencedCheckpointer) restart(ctx context.Context, spend workitems.Spend, ws workitems.WorkspaceSnapshot) error {
	e := envelope{Spend: spend, Workspace: &ws, At: c.clk().Now().UTC()}
	raw, _ := json.Marshal(e)
	_, err := c.write(ctx, itemstore.CheckpointWrite{State: raw, Reset: true,
		Snapshot: &workitems.Snapshot{WorkspaceSnapshot: ws}})
	if err == nil && c.snap != nil {
		c.snap.stored(ws)
	}
	return err
}

// storeSink writes a loop's events to the item's log and to the process log. With a fence the
// events are fenced (Store.EmitFenced): once another execution took the attempt over, this
// one's events are dropped, not recorded beside the new holder's.
type storeSink struct {
	store   *itemstore.Store
	fence   *itemstore.Fence
	item    string
	attempt int
	log     *slog.Logger
}

func (s *storeSink) Emit(ctx context.Context, e workitems.Event) {
	e.Item, e.Attempt = s.item, s.attempt
	if e.Type == "" {
		e.Type = workitems.EventStep
	}
	var err error
	if s.fence != nil {
		err = s.store.EmitFenced(context.WithoutCancel(ctx), s.fence, e)
	} else {
		err = s.store.Emit(context.WithoutCancel(ctx), e)
	}
	switch {
	case errors.Is(err, workitems.ErrLeaseLost):
		s.log.Debug("event dropped: the lease was taken over", "type", e.Type)
	case err != nil:
		s.log.Warn("event not recorded", "type", e.Type, "err", err)
	}
	s.log.Debug("event", "type", e.Type, "kind", e.Data["kind"], "message", e.Message)
}

// steerSource hands a loop the item's queued steer input without removing it: the next
// checkpoint (which holds it, in the loop's state or history) removes it in the same fenced
// write. Input drained but not yet checkpointed stays queued, so a crash in between loses
// nothing, and a fenced-out worker removes nothing.
type steerSource struct {
	store *itemstore.Store
	item  string

	mu      sync.Mutex
	pending int // handed to the loop since the last checkpoint, still queued
}

func (s *steerSource) Drain(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.store.PeekSteer(ctx, s.item, s.pending)
	if err != nil {
		return nil, err
	}
	s.pending += len(in)
	return in, nil
}

// untaken returns how many inputs the loop holds that are still queued.
func (s *steerSource) untaken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// taken records that a checkpoint removed n inputs from the queue.
func (s *steerSource) taken(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending -= n
}

type doneChecker struct {
	v      Verifier
	tmpl   *config.Template
	ws     string
	events EventSink     // where the check's running commands report progress (nil: nowhere)
	every  time.Duration // how often (0: the runner's default)
}

func (d doneChecker) Check(ctx context.Context) (DoneCheckResult, error) {
	if d.v == nil {
		return DoneCheckResult{}, fmt.Errorf("worker: no verifier configured")
	}
	if d.events != nil {
		ctx = withCheckProgress(ctx, d.events, d.every)
	}
	passed, summary, err := d.v.Check(ctx, d.tmpl, d.ws)
	return DoneCheckResult{Passed: passed, Summary: summary}, err
}

// NewFencedCheckpointer returns the Redis checkpointer the handler gives loops: writes are fenced
// by f's epoch and carry m's spend (for benchmarks and tools that drive a loop themselves).
func NewFencedCheckpointer(store *itemstore.Store, f *itemstore.Fence, m *Meter, obs Observer) Checkpointer {
	if obs == nil {
		obs = nopObserver{}
	}
	return &fencedCheckpointer{store: store, fence: f, meter: m, obs: obs}
}

// NewWorkspaceCheckpointer is NewFencedCheckpointer with a snapshot of ws in every checkpoint,
// as the handler gives loops (for benchmarks of the snapshot's cost).
func NewWorkspaceCheckpointer(store *itemstore.Store, f *itemstore.Fence, m *Meter, obs Observer, ws *Workspace, limit int) Checkpointer {
	c := NewFencedCheckpointer(store, f, m, obs).(*fencedCheckpointer)
	if limit <= 0 {
		limit = workitems.DefaultSnapshotLimit
	}
	c.snap = newSnapshotter(ws, limit, workitems.WorkspaceSnapshot{Tree: ws.Base.Tree})
	return c
}
