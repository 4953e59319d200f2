package evals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"outerloop/workitems/config"
)

// Build returns the eval namespace's config for experiments: base (the production config in
// force) with, in place of its templates, one run template per task and variant of each
// experiment (RunTemplate): the task's template with the variant over it, its repo and ref,
// and delivery forced to patch. Every host builds it from its own copy of the config and the
// experiment's record, so a worker runs a run under the same template the eval process
// created it with; a template that changed since is what the item's pin says it is.
func Build(base *config.Config, exps ...*Experiment) (*config.Config, error) {
	var ts []config.Template
	var errs []error
	for _, e := range exps {
		rts, err := e.templates(base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts = append(ts, rts...)
	}
	cfg, err := base.WithTemplates(ts)
	if err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// templates are the run templates of one experiment over base.
func (e *Experiment) templates(base *config.Config) ([]config.Template, error) {
	vs := make([]Variant, 0, len(e.Variants))
	for _, spec := range e.Variants {
		v, err := ParseVariant(spec.Name, []byte(spec.Overlay))
		if err != nil {
			return nil, fmt.Errorf("evals: experiment %s: %w", e.ID, err)
		}
		vs = append(vs, v)
	}
	var out []config.Template
	var errs []error
	for _, task := range e.Suite.Tasks {
		t, ok := base.Template(task.Template)
		if !ok {
			errs = append(errs, fmt.Errorf("evals: experiment %s: task %s: template %q is not configured", e.ID, task.ID, task.Template))
			continue
		}
		for _, v := range vs {
			rt, err := v.Apply(base, t, task)
			if err != nil {
				errs = append(errs, fmt.Errorf("evals: experiment %s: task %s: %w", e.ID, task.ID, err))
				continue
			}
			rt.Name = RunTemplate(e.ID, task.ID, v.Name)
			// The experiment's budget bounds its runs; production's open and daily caps do not.
			rt.MaxOpen, rt.DailyCostCapUSD = 0, 0
			out = append(out, *rt)
		}
	}
	return out, errors.Join(errs...)
}

// Templates keeps the eval namespace's config for a worker: the run templates of the running
// experiments over the production config in force. A task naming a run template it does not
// know makes the worker reload (Reload), as a production template it does not know does.
type Templates struct {
	exps *Store
	base func() *config.Config
	log  *slog.Logger

	mu  sync.Mutex
	cur *config.Config
	key string // the base's version and the experiments it was built for
}

// NewTemplates returns the eval config source over exps and the production config base.
func NewTemplates(exps *Store, base func() *config.Config, log *slog.Logger) *Templates {
	if log == nil {
		log = slog.Default()
	}
	return &Templates{exps: exps, base: base, log: log}
}

// Current returns the config last built, or the base before the first Reload (a run
// template it lacks makes the worker call Reload).
func (t *Templates) Current() *config.Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != nil {
		return t.cur
	}
	return t.base()
}

// Reload builds the config again from the running experiments. An experiment whose templates
// no longer build over the config in force is left out (its runs' items then meet the worker's
// config check, as production items of a removed template do) and logged.
func (t *Templates) Reload(ctx context.Context) *config.Config {
	ids, err := t.exps.Active(ctx)
	if err != nil {
		t.log.Warn("eval templates: running experiments unknown", "err", err)
		return t.Current()
	}
	slices.Sort(ids)
	base := t.base()
	key := base.Version() + "|" + strings.Join(ids, ",")
	t.mu.Lock()
	if t.key == key && t.cur != nil {
		defer t.mu.Unlock()
		return t.cur
	}
	t.mu.Unlock()
	var ts []config.Template
	for _, id := range ids {
		e, err := t.exps.Get(ctx, id)
		if err != nil {
			t.log.Warn("eval templates: experiment unreadable", "experiment", id, "err", err)
			continue
		}
		rts, err := e.templates(base) // once per experiment: applying variants is the costly part
		if err != nil {
			t.log.Warn("eval templates: experiment left out", "experiment", id, "err", err)
			continue
		}
		ts = append(ts, rts...)
	}
	cfg, err := base.WithTemplates(ts)
	if err != nil {
		t.log.Warn("eval templates: config not built", "err", err)
		return t.Current()
	}
	t.mu.Lock()
	t.cur, t.key = cfg, key
	t.mu.Unlock()
	return cfg
}
