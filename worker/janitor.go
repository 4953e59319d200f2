package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"outerloop/lib/periodic"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// JanitorOptions configures a Janitor.
type JanitorOptions struct {
	Store     *itemstore.Store
	Retention config.Retention
	// Workspaces, when set, are this host's: an item's workspaces here go with it (other hosts'
	// sweepers remove theirs as those of an item no longer in the store).
	Workspaces *Workspaces
	Every      time.Duration // default 10m
	Batch      int           // items per state per pass (default 500)
	Clock      workitems.Clock
	Logger     *slog.Logger
}

// Janitor deletes items whose retention passed (retention.closed, .failed, .escalated): each
// with all its keys, index entries and counts in one transaction (Store.DeleteIfDue, which
// re-checks the retention on the record it deletes), then this host's workspaces of it. Any
// number of janitors may run: a deletion another one made first is skipped.
type Janitor struct {
	o    JanitorOptions
	loop *periodic.Loop
}

// NewJanitor returns a janitor (not started).
func NewJanitor(o JanitorOptions) *Janitor {
	if o.Every <= 0 {
		o.Every = 10 * time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Retention = o.Retention.WithDefaults()
	j := &Janitor{o: o}
	j.loop = &periodic.Loop{Every: o.Every, Clock: o.Clock, Logger: o.Logger, What: "retention pass failed",
		Pass: func(ctx context.Context) error { _, err := j.Run(ctx, false); return err }}
	return j
}

// Removed is one item a janitor pass deleted (or, dry, would delete).
type Removed struct {
	ID         string
	State      workitems.State
	Since      time.Time
	Workspaces int
}

// Start runs a pass now and then every o.Every until Shutdown.
func (j *Janitor) Start() {
	j.loop.Start()
}

// Shutdown stops the janitor and waits for a pass under way.
func (j *Janitor) Shutdown() { j.loop.Shutdown() }

// Run deletes every item due now, batch after batch until none is left; with dry it only
// lists them (the first batch per state). It returns what it removed.
func (j *Janitor) Run(ctx context.Context, dry bool) ([]Removed, error) {
	var out []Removed
	for {
		due, err := j.o.Store.DueForDeletion(ctx, j.o.Retention, j.o.Clock.Now(), j.o.Batch)
		if err != nil || dry {
			for _, d := range due {
				out = append(out, Removed{ID: d.ID, State: d.State, Since: d.Since})
			}
			return out, err
		}
		progress := 0
		for _, d := range due {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			now := j.o.Clock.Now()
			err := j.o.Store.DeleteIfDue(ctx, d.ID, func(it *workitems.Item) bool { return itemstore.RetentionDue(it, d, j.o.Retention, now) })
			switch {
			case errors.Is(err, workitems.ErrNotFound):
				j.o.Store.DropFromEnded(ctx, d.ID, d.State) // a stale index entry: nothing else is left
				progress++
				continue
			case errors.Is(err, itemstore.ErrNotDue):
				continue // resolved meanwhile, or ended later than its index entry says
			case err != nil:
				return out, err
			}
			progress++
			r := Removed{ID: d.ID, State: d.State, Since: d.Since}
			if j.o.Workspaces != nil {
				r.Workspaces, _ = removeWorkspaces(ctx, j.o.Workspaces, j.o.Store, &workitems.Item{ID: d.ID}, "item deleted by retention", j.o.Logger)
			}
			j.o.Logger.Info("item deleted by retention", "item", d.ID, "state", d.State, "since", d.Since, "workspaces", r.Workspaces)
			out = append(out, r)
		}
		if progress == 0 || len(due) < j.o.Batch {
			return out, nil
		}
	}
}
