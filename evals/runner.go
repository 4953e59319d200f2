package evals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Runner drives experiments: it checks a plan before anything is enqueued, creates each run as
// a real item in the eval namespace (its own store and asynq queue, served by the same
// workers), records the runs that ended and ends the experiment. Every round reads the state
// from Redis, so a driver killed at any moment is resumed by another (eval run --resume) that
// re-runs nothing that finished and makes no run twice (run ids are deterministic).
type Runner struct {
	Exps *Store
	// Queue creates and enqueues runs: over the eval namespace's store, on the eval queue.
	Queue *scheduler.Queue
	// Config is the production config in force (the run templates are built over it).
	Config func() *config.Config
	Clock  workitems.Clock
	Log    *slog.Logger

	mu    sync.Mutex
	built map[buildKey]*config.Config // what step built, by config in force and experiment
}

// buildKey names one build of an experiment's run templates: an experiment's suite and
// variants never change, so the build changes only with the config in force.
type buildKey struct {
	base *config.Config
	exp  string
}

// build returns the config with e's run templates over the config in force, built once per
// config version and experiment (a driver's round every few seconds would otherwise validate
// every run template again each time).
func (r *Runner) build(e *Experiment) (*config.Config, error) {
	base := r.Config()
	k := buildKey{base, e.ID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.built[k]; ok {
		return c, nil
	}
	c, err := Build(base, e)
	if err != nil {
		return nil, err
	}
	if e.State != StateRunning {
		return c, nil // an ended experiment's report builds once per read; keep no copy
	}
	for old := range r.built { // keep only builds over the config in force
		if old.base != base {
			delete(r.built, old)
		}
	}
	if r.built == nil {
		r.built = map[buildKey]*config.Config{}
	}
	r.built[k] = c
	return c, nil
}

// Plan is what `outerloop eval run` asks for.
type Plan struct {
	ID        string // default: NewID
	Suite     *Suite
	Variants  []Variant
	Repeat    int     // default 1
	BudgetUSD float64 // 0: none
	Actor     string
}

// MaxRepeat bounds --repeat: pass^k for k up to it is reported per task.
const MaxRepeat = 100

// Prepare checks a plan and returns its experiment, not yet stored: every problem (an unknown
// template, a variant field the template does not have, an overlay that makes an invalid
// template, a budget that cannot cover one run) is named, joined, before anything is enqueued.
func (r *Runner) Prepare(p Plan) (*Experiment, error) {
	cfg := r.Config()
	var errs []error
	if p.Suite == nil || len(p.Suite.Tasks) == 0 {
		return nil, errors.New("evals: the suite has no tasks")
	}
	if err := p.Suite.Check(cfg); err != nil {
		errs = append(errs, err)
	}
	if len(p.Variants) == 0 {
		errs = append(errs, errors.New("evals: no variant: give at least one --variant NAME=FILE (an empty file runs the templates as they are)"))
	}
	seen := map[string]bool{}
	for _, v := range p.Variants {
		if seen[v.Name] {
			errs = append(errs, fmt.Errorf("evals: variant %q is given twice", v.Name))
		}
		seen[v.Name] = true
	}
	if p.Repeat == 0 {
		p.Repeat = 1
	}
	if p.Repeat < 1 || p.Repeat > MaxRepeat {
		errs = append(errs, fmt.Errorf("evals: repeat %d: want 1 to %d", p.Repeat, MaxRepeat))
	}
	if p.BudgetUSD < 0 {
		errs = append(errs, fmt.Errorf("evals: budget cost_usd=%g: want a positive amount", p.BudgetUSD))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	now := r.Clock.Now()
	if p.ID == "" {
		p.ID = NewID(now)
	}
	e := &Experiment{ID: p.ID, Suite: *p.Suite, Repeat: p.Repeat, BudgetUSD: p.BudgetUSD, Actor: p.Actor,
		ConfigVersion: cfg.Version(), State: StateRunning, CreatedAt: now}
	for _, v := range p.Variants {
		text, err := v.text()
		if err != nil {
			return nil, err
		}
		e.Variants = append(e.Variants, VariantSpec{Name: v.Name, Overlay: text, Source: v.Source})
	}
	built, err := Build(cfg, e)
	if err != nil {
		return nil, err
	}
	if e.Versions, err = versions(cfg, &e.Suite, p.Variants); err != nil {
		return nil, err
	}
	for _, task := range e.Suite.Tasks {
		for _, v := range e.Variants {
			t, _ := built.Template(RunTemplate(e.ID, task.ID, v.Name))
			if p.BudgetUSD == 0 {
				continue
			}
			c := runCap(t)
			switch {
			case c == 0:
				errs = append(errs, fmt.Errorf("evals: task %s under variant %s: its template has no cost cap (budget.cost_usd or item_budget.cost_usd), so no experiment budget can bound it", task.ID, v.Name))
			case c > p.BudgetUSD:
				errs = append(errs, fmt.Errorf("evals: budget cost_usd=%g cannot cover one run of task %s under variant %s (its cap is %g USD)", p.BudgetUSD, task.ID, v.Name, c))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

// versions are the versions an experiment of suite under vs runs under over cfg (see
// Versions): the production templates' as configured, and each variant's over each of them,
// hashed under the template's own name so that they compare across experiments.
func versions(cfg *config.Config, suite *Suite, vs []Variant) (Versions, error) {
	out := Versions{Config: cfg.Version(), Templates: map[string]string{}, Variants: map[string]map[string]string{}}
	for _, task := range suite.Tasks {
		if _, ok := out.Templates[task.Template]; ok {
			continue
		}
		t, ok := cfg.Template(task.Template)
		if !ok {
			return out, fmt.Errorf("evals: task %s: template %q is not configured", task.ID, task.Template)
		}
		out.Templates[task.Template] = cfg.TemplateVersion(task.Template)
		// A fleet's runs are on their tasks' repositories: applied with this task's, hashed
		// with none, so the version does not depend on which task came first.
		on := Task{Template: task.Template}
		if t.IsFleet() {
			on.Repo = task.Repo
		}
		for _, v := range vs {
			rt, err := v.Apply(cfg, t, on)
			if err != nil {
				return out, err
			}
			if t.IsFleet() {
				c := *rt
				c.Repo = ""
				rt = &c
			}
			if out.Variants[v.Name] == nil {
				out.Variants[v.Name] = map[string]string{}
			}
			out.Variants[v.Name][task.Template] = cfg.VersionOf(rt)
		}
	}
	return out, nil
}

// runCap is the most one run of t can spend: its item cap, else its attempt cap times its
// attempts; 0 when nothing caps its cost.
func runCap(t *config.Template) float64 {
	if t == nil {
		return 0
	}
	if t.ItemBudget.CostUSD > 0 {
		return t.ItemBudget.CostUSD
	}
	return t.Budget.CostUSD * float64(max(t.MaxAttempts, 1))
}

// Start stores a prepared experiment; its runs are enqueued by Step.
func (r *Runner) Start(ctx context.Context, e *Experiment) error { return r.Exps.Create(ctx, e) }

// Progress is where an experiment stands after a round.
type Progress struct {
	ID          string         `json:"id"`
	State       State          `json:"state"`
	Reason      string         `json:"reason,omitempty"`
	Total       int            `json:"total"`
	Created     int            `json:"created"` // runs made (enqueued) so far
	Done        int            `json:"done"`
	Closed      map[string]int `json:"closed"` // per variant
	SpentUSD    float64        `json:"spent_usd"`
	ReservedUSD float64        `json:"reserved_usd"` // caps of the runs still going
	BudgetUSD   float64        `json:"budget_usd,omitempty"`
}

// ended says whether a run's item has a result for the experiment: closed, or an end that is
// not closed. An escalated run is not closed (nobody resolves eval runs).
func ended(s workitems.State) bool {
	return s.Terminal() || s == workitems.StateEscalated
}

// getPage bounds one read of run items.
const getPage = 200

// Step does one round of an experiment: it records the runs whose items ended, enqueues the
// next runs the budget covers, and ends the experiment once every run ended (finished) or
// nothing more fits its budget (stopped). It is idempotent: any number of drivers may step
// one experiment.
func (r *Runner) Step(ctx context.Context, id string) (Progress, error) { return r.step(ctx, id, true) }

// Status records the runs whose items ended and says where the experiment stands, without
// enqueuing anything (eval status, report and gate).
func (r *Runner) Status(ctx context.Context, id string) (Progress, error) {
	return r.step(ctx, id, false)
}

func (r *Runner) step(ctx context.Context, id string, advance bool) (Progress, error) {
	e, err := r.Exps.Get(ctx, id)
	if err != nil {
		return Progress{}, err
	}
	pr := Progress{ID: e.ID, State: e.State, Reason: e.Reason, Total: e.Total(), Closed: map[string]int{}, BudgetUSD: e.BudgetUSD}
	for _, v := range e.Variants {
		pr.Closed[v.Name] = 0
	}
	recorded, err := r.Exps.FinishedRuns(ctx, id)
	if err != nil {
		return pr, err
	}
	cfg, err := r.build(e)
	if err != nil {
		return pr, fmt.Errorf("evals: experiment %s no longer builds over the config in force: %w", id, err)
	}
	runs := e.Runs()
	var open []RunRef // not recorded: look at their items
	for _, run := range runs {
		if rec, ok := recorded[runKey(run.Task, run.Variant, run.Rep)]; ok {
			pr.Done++
			pr.Created++
			pr.SpentUSD += rec.CostUSD
			if rec.Closed {
				pr.Closed[run.Variant]++
			}
			continue
		}
		open = append(open, run)
	}
	var todo []RunRef // not made yet
	for i := 0; i < len(open); i += getPage {
		page := open[i:min(i+getPage, len(open))]
		ids := make([]string, len(page))
		for j, run := range page {
			ids[j] = e.ItemID(run)
		}
		items, err := r.Queue.Store().GetMany(ctx, ids)
		if err != nil {
			return pr, err
		}
		for j, run := range page {
			it, ok := items[ids[j]]
			if !ok {
				todo = append(todo, run)
				continue
			}
			pr.Created++
			if !ended(it.State) {
				t, _ := cfg.Template(RunTemplate(e.ID, run.Task, run.Variant))
				pr.ReservedUSD += max(runCap(t), it.Spend.CostUSD)
				continue
			}
			rec := RunFromItem(run, it)
			if err := r.Exps.RecordRun(ctx, id, rec); err != nil {
				return pr, err
			}
			pr.Done++
			pr.SpentUSD += rec.CostUSD
			if rec.Closed {
				pr.Closed[run.Variant]++
			}
		}
	}
	if e.State != StateRunning || !advance {
		return pr, nil
	}
	r.Queue.SetConfig(cfg)
	made := 0
	for _, run := range todo {
		t, _ := cfg.Template(RunTemplate(e.ID, run.Task, run.Variant))
		c := runCap(t)
		if e.BudgetUSD > 0 && pr.SpentUSD+pr.ReservedUSD+c > e.BudgetUSD+1e-9 {
			break // in order: a later run never jumps an earlier one that did not fit
		}
		task := e.task(run.Task)
		_, err := r.Queue.Submit(ctx, scheduler.Request{ID: e.ItemID(run), Template: RunTemplate(e.ID, run.Task, run.Variant),
			Origin: workitems.Origin{Kind: workitems.OriginEval, Actor: e.ID}, Input: task.Input, Ref: task.Ref})
		if err != nil && !errors.Is(err, workitems.ErrExists) {
			return pr, fmt.Errorf("evals: experiment %s: run %s: %w", id, e.ItemID(run), err)
		}
		made++
		pr.Created++
		pr.ReservedUSD += c
	}
	switch {
	case pr.Done == pr.Total:
		e, err = r.Exps.End(ctx, id, StateFinished, "", r.Clock.Now())
	case pr.Created == pr.Done && made == 0 && len(todo) > 0:
		// Nothing runs and the next run does not fit: the budget is spent.
		e, err = r.Exps.End(ctx, id, StateStopped, fmt.Sprintf("budget: %.2f of %.2f USD spent; %d of %d runs not started",
			pr.SpentUSD, e.BudgetUSD, len(todo), pr.Total), r.Clock.Now())
	}
	if err != nil {
		return pr, err
	}
	pr.State, pr.Reason = e.State, e.Reason
	return pr, nil
}

func (e *Experiment) task(id string) Task {
	for _, t := range e.Suite.Tasks {
		if t.ID == id {
			return t
		}
	}
	return Task{ID: id}
}

// Drive steps an experiment every `every` until it ends or ctx ends, calling progress after
// every round in which something changed.
func (r *Runner) Drive(ctx context.Context, id string, every time.Duration, progress func(Progress)) (Progress, error) {
	var last Progress
	for first := true; ; first = false {
		pr, err := r.Step(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return pr, ctx.Err()
			}
			return pr, err
		}
		if progress != nil && (first || pr.Done != last.Done || pr.Created != last.Created || pr.State != last.State) {
			progress(pr)
		}
		last = pr
		if pr.State != StateRunning {
			return pr, nil
		}
		select {
		case <-ctx.Done():
			return pr, ctx.Err()
		case <-r.Clock.After(every):
		}
	}
}

// Report builds the report of an experiment from its recorded runs.
func (r *Runner) Report(ctx context.Context, id string) (Report, *Experiment, error) {
	e, err := r.Exps.Get(ctx, id)
	if err != nil {
		return Report{}, nil, err
	}
	recorded, err := r.Exps.FinishedRuns(ctx, id)
	if err != nil {
		return Report{}, nil, err
	}
	runs := make([]Run, 0, len(recorded))
	for _, run := range recorded {
		runs = append(runs, run)
	}
	rep := BuildReport(e.ID, e.Suite.Name, e.Repeat, e.VariantNames(), runs, ReportOptions{Seed: 1})
	if e.Versions.Config != "" { // an experiment made before versions were recorded has none
		v := e.Versions
		rep.Versions = &v
	}
	return rep, e, nil
}
