package app

import (
	"sync"

	"outerloop/delivery"
	"outerloop/evals"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems/itemstore"
)

// Evals is a deployment's eval namespace: experiments, and the items of their runs in a store
// and an asynq queue of their own, so that no production list, inbox, notification, daily cap
// or template metric sees them. The same workers serve its queue below production's.
type Evals struct {
	Exps      *evals.Store
	Store     *itemstore.Store
	Queue     *scheduler.Queue
	Templates *evals.Templates
}

// evalsOnce builds a.evals once.
type evalsOnce struct {
	once sync.Once
	ev   *Evals
}

// EvalQueue is the asynq queue of a deployment's eval runs.
func EvalQueue(queue string) string { return queue + "-eval" }

// Evals returns the eval namespace.
func (a *App) Evals() *Evals {
	a.evals.once.Do(func() {
		exps := evals.NewStore(a.Redis, a.opts.Prefix)
		// No transition or limit hooks: eval runs notify nobody.
		st := itemstore.NewStore(a.Redis, evals.ItemPrefix(a.opts.Prefix), itemstore.WithClock(a.opts.Clock))
		tpl := evals.NewTemplates(exps, a.CurrentConfig, a.Logger.With("component", "evals"))
		q := scheduler.NewQueue(st, a.client, a.inspector, a.CurrentConfig(),
			scheduler.QueueOptions{Queue: EvalQueue(a.opts.Queue), Clock: a.opts.Clock, Logger: a.Logger.With("lane", "eval"), Loops: a.Loops})
		a.evals.ev = &Evals{Exps: exps, Store: st, Queue: q, Templates: tpl}
	})
	return a.evals.ev
}

// EvalRunner returns the driver of experiments.
func (a *App) EvalRunner() *evals.Runner {
	ev := a.Evals()
	return &evals.Runner{Exps: ev.Exps, Queue: ev.Queue, Config: a.CurrentConfig, Clock: a.opts.Clock,
		Log: a.Logger.With("component", "evals")}
}

// evalLane is the worker's lane of eval runs: the same loops, sandbox and verifier as
// production, over the eval store, with workspaces of their own (production's sweeper would
// take them for items it does not know), no metrics of templates, and a deliverer without a
// publisher: a run's delivery can only be a patch in its record, never a push.
func (a *App) evalLane(workerID string) worker.Lane {
	ev := a.Evals()
	// Mirrors are shared with production's (a mirror's flock keeps the two apart).
	w := a.Workspaces
	ws := worker.Workspaces{Root: w.Root, BaseDir: w.BaseDir, Deployment: evals.ItemPrefix(a.opts.Prefix),
		SnapshotLimit: w.SnapshotLimit, Host: w.Host, Credentials: w.Credentials, Clock: w.Clock}
	h := worker.NewHandler(worker.HandlerOptions{
		Store: ev.Store, Config: a.Config, CurrentConfig: ev.Templates.Current, ReloadConfig: ev.Templates.Reload,
		Loops: a.Loops, Verifier: a.Verifier, Evidence: a.Judge, Enqueuer: ev.Queue, Workspaces: &ws,
		Deliverer: delivery.New(delivery.Options{MaxPatchBytes: a.opts.MaxPatchBytes, Clock: a.opts.Clock, Logger: a.Logger}),
		Clock:     a.opts.Clock, Logger: a.Logger.With("lane", "eval"), WorkerID: workerID, LeaseTTL: a.opts.LeaseTTL,
		Runner: a.Runner, ProgressEvery: a.opts.ProgressEvery,
	})
	var sw *worker.Sweeper
	if !a.opts.KeepWorkspaces {
		sw = worker.NewSweeper(worker.SweeperOptions{Workspaces: &ws, Store: ev.Store, Retention: a.Config.Retention,
			Clock: a.opts.Clock, Logger: a.Logger.With("component", "sweeper", "lane", "eval")})
	}
	return worker.Lane{Queue: EvalQueue(a.opts.Queue), Handler: h, Enqueuer: ev.Queue, Sweeper: sw, Janitor: a.EvalJanitor()}
}

// EvalJanitor returns the retention pass of experiments (not started): an experiment that
// ended longer than retention.experiments ago goes with its runs and their items.
func (a *App) EvalJanitor() *evals.Janitor {
	ev := a.Evals()
	return evals.NewJanitor(evals.JanitorOptions{Exps: ev.Exps, Items: ev.Store,
		Retention: a.Config.Retention.WithDefaults().Experiments.D(), Clock: a.opts.Clock,
		Logger: a.Logger.With("component", "janitor", "lane", "eval")})
}
