package evals

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

// ItemDeleter deletes a run's item from the eval namespace's store when due says so (the
// store re-reads the item in the deleting transaction).
type ItemDeleter interface {
	DeleteIfDue(ctx context.Context, id string, due func(*workitems.Item) bool) error
}

// JanitorOptions configures a Janitor.
type JanitorOptions struct {
	Exps  *Store
	Items ItemDeleter
	// Retention is how long an ended experiment stays (config.Retention.Experiments).
	Retention time.Duration
	Every     time.Duration // default 10m
	Batch     int           // experiments per pass (default 100)
	Clock     workitems.Clock
	Logger    *slog.Logger
}

// Janitor deletes experiments that ended longer than their retention ago, with their runs'
// results and their runs' items. Items are deleted first, so an experiment that is still
// listed is one whose items may still exist, never the reverse; a run item still running
// (a worker caught mid-attempt) keeps its experiment until the next pass. Any number of
// janitors may run: what another deleted first is skipped.
type Janitor struct {
	o       JanitorOptions
	loop    *periodic.Loop
	indexed bool // IndexEnded ran (once per janitor)
}

// NewJanitor returns a janitor (not started).
func NewJanitor(o JanitorOptions) *Janitor {
	if o.Every <= 0 {
		o.Every = 10 * time.Minute
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Retention <= 0 {
		o.Retention = config.DefaultExperimentRetention
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	j := &Janitor{o: o}
	j.loop = &periodic.Loop{Every: o.Every, Clock: o.Clock, Logger: o.Logger, What: "experiment retention pass failed",
		Pass: func(ctx context.Context) error { _, err := j.Run(ctx, false); return err }}
	return j
}

// Start runs a pass now and then every o.Every until Shutdown.
func (j *Janitor) Start() {
	j.loop.Start()
}

// Shutdown stops the janitor and waits for a pass under way.
func (j *Janitor) Shutdown() { j.loop.Shutdown() }

// Run deletes the experiments due now (with dry, only lists them) and returns their ids.
func (j *Janitor) Run(ctx context.Context, dry bool) ([]string, error) {
	if !j.indexed {
		if _, err := j.o.Exps.IndexEnded(ctx); err != nil {
			return nil, err
		}
		j.indexed = true
	}
	var out []string
	seen := map[string]bool{}
	for {
		ids, err := j.o.Exps.EndedBefore(ctx, j.o.Clock.Now().Add(-j.o.Retention), j.o.Batch)
		if err != nil || dry {
			return append(out, ids...), err
		}
		progress := 0
		for _, id := range ids {
			if seen[id] {
				continue // kept by a running item in this pass
			}
			seen[id] = true
			kept, err := j.delete(ctx, id)
			if err != nil {
				return out, err
			}
			if !kept {
				out = append(out, id)
				progress++
			}
		}
		if progress == 0 {
			return out, nil
		}
	}
}

// delete removes one experiment's items, then the experiment; kept reports an item still
// running, which keeps the experiment for the next pass.
func (j *Janitor) delete(ctx context.Context, id string) (kept bool, err error) {
	e, err := j.o.Exps.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, j.o.Exps.Delete(ctx, id) // a stale index entry
	}
	if err != nil {
		return false, err
	}
	if e.State == StateRunning {
		return true, nil // reopened between the listing and now
	}
	for _, r := range e.Runs() {
		err := j.o.Items.DeleteIfDue(ctx, e.ItemID(r), func(it *workitems.Item) bool { return ended(it.State) })
		switch {
		case err == nil, errors.Is(err, workitems.ErrNotFound):
		case errors.Is(err, itemstore.ErrNotDue):
			j.o.Logger.Info("experiment kept: a run is still running", "experiment", id, "item", e.ItemID(r))
			kept = true
		default:
			return false, err
		}
	}
	if kept {
		return true, nil
	}
	if err := j.o.Exps.Delete(ctx, id); err != nil {
		return false, err
	}
	j.o.Logger.Info("experiment deleted", "experiment", id, "ended", e.EndedAt, "runs", e.Total())
	return false, nil
}
