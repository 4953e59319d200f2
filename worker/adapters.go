package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"outerloop/workitems"
)

// fencedCheckpointer writes a loop's checkpoints under the attempt's fence. The stored state is
// an envelope holding the meter's spend beside the loop's own state, so that a resumed attempt
// does not get its budget back. With a charge, every checkpoint also charges the spend made
// since the last one (daily cost and counters; see workitems.SaveChargedCheckpoint).
type fencedCheckpointer struct {
	store  *workitems.Store
	fence  *workitems.Fence
	meter  *Meter
	obs    Observer
	charge *charge // nil: checkpoints charge nothing (NewFencedCheckpointer)
}

// charge is where an attempt's spend is charged, and what has been so far.
type charge struct {
	template, loop  string
	provider, model string // the config's provider key ("" for none) and the model asked for ("": its configured one)
	item            string
	charged         workitems.Spend // what the attempt's checkpoints charged, this execution's and earlier ones'
}

// count reports a charge to the observer: the spend counters and the running attempt's cost.
func (c *charge) count(obs Observer, delta workitems.Spend) {
	obs.AddSpend(c.template, c.loop, delta, c.item)
	if c.provider != "" {
		obs.AddModelSpend(c.template, c.provider, c.model, delta, c.item)
	}
	obs.SetRunningCost(c.template, c.loop, c.item, c.charged.CostUSD)
}

type envelope struct {
	Spend workitems.Spend `json:"spend"`
	Loop  json.RawMessage `json:"loop,omitempty"`
	At    time.Time       `json:"at"`
}

func (c *fencedCheckpointer) priorSpend(ctx context.Context) (workitems.Spend, error) {
	raw, _, err := c.store.LoadCheckpoint(ctx, c.fence.Item, c.fence.Attempt)
	if err != nil || raw == nil {
		return workitems.Spend{}, err
	}
	var e envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return workitems.Spend{}, fmt.Errorf("worker: checkpoint of %s attempt %d unreadable: %w", c.fence.Item, c.fence.Attempt, err)
	}
	return e.Spend, nil
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

// Save writes the loop's state with the current spend.
func (c *fencedCheckpointer) Save(ctx context.Context, state []byte, history ...[]byte) error {
	e := envelope{Spend: c.meter.Spent(), At: time.Now().UTC()}
	if len(state) > 0 {
		if !json.Valid(state) {
			b, _ := json.Marshal(string(state))
			state = b
		}
		e.Loop = state
	}
	raw, _ := json.Marshal(e)
	start := time.Now()
	if c.charge == nil {
		err := c.store.SaveCheckpoint(ctx, c.fence, raw, history...)
		c.obs.CheckpointWrite(time.Since(start))
		return err
	}
	charged, delta, err := c.store.SaveChargedCheckpoint(ctx, c.fence, c.charge.template, e.Spend, raw, history...)
	c.obs.CheckpointWrite(time.Since(start))
	if err == nil {
		c.charge.charged = charged
		c.charge.count(c.obs, delta)
	}
	return err
}

// storeSink writes a loop's events to the item's log and to the process log.
type storeSink struct {
	store   *workitems.Store
	item    string
	attempt int
	log     *slog.Logger
}

func (s *storeSink) Emit(ctx context.Context, e workitems.Event) {
	e.Item, e.Attempt = s.item, s.attempt
	if e.Type == "" {
		e.Type = workitems.EventStep
	}
	if err := s.store.Emit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Warn("event not recorded", "type", e.Type, "err", err)
	}
	s.log.Debug("event", "type", e.Type, "kind", e.Data["kind"], "message", e.Message)
}

type steerSource struct {
	store *workitems.Store
	item  string
}

func (s steerSource) Drain(ctx context.Context) ([]string, error) {
	return s.store.DrainSteer(ctx, s.item)
}

type doneChecker struct {
	v    Verifier
	tmpl *workitems.Template
	ws   string
}

func (d doneChecker) Check(ctx context.Context) (DoneCheckResult, error) {
	if d.v == nil {
		return DoneCheckResult{}, fmt.Errorf("worker: no verifier configured")
	}
	return d.v.Check(ctx, d.tmpl, d.ws)
}

// NewFencedCheckpointer returns the Redis checkpointer the handler gives loops: writes are fenced
// by f's epoch and carry m's spend (for benchmarks and tools that drive a loop themselves).
func NewFencedCheckpointer(store *workitems.Store, f *workitems.Fence, m *Meter, obs Observer) Checkpointer {
	if obs == nil {
		obs = nopObserver{}
	}
	return &fencedCheckpointer{store: store, fence: f, meter: m, obs: obs}
}
