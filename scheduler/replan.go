package scheduler

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"outerloop/workitems/config"
)

// plan builds the cron entries of cfg's scheduled templates. An entry of old with the same
// template name and schedule carries over with its progress (the next tick it waits for, what
// this replica handled), so a reload neither repeats nor skips a tick of an unchanged schedule;
// a new or changed schedule starts from now (its ticks before now are not missed ticks: they
// were never planned). now is zero at the first plan (Start handles the ticks due then).
func plan(cfg *config.Config, old []*entry, now time.Time) ([]*entry, error) {
	prev := make(map[string]*entry, len(old))
	for _, e := range old {
		prev[e.tmpl.Name] = e
	}
	var out []*entry
	for i := range cfg.Templates {
		t := &cfg.Templates[i]
		if t.Schedule == "" {
			continue
		}
		if e, ok := prev[t.Name]; ok && e.tmpl.Schedule == t.Schedule {
			out = append(out, &entry{tmpl: t, sched: e.sched, next: e.next, handled: e.handled})
			continue
		}
		sc, err := cron.ParseStandard(t.Schedule)
		if err != nil {
			return nil, fmt.Errorf("scheduler: template %q: schedule %q: %w", t.Name, t.Schedule, err)
		}
		e := &entry{tmpl: t, sched: sc}
		if !now.IsZero() {
			e.handled, e.next = now, sc.Next(now)
		}
		out = append(out, e)
	}
	return out, nil
}

// Replan makes the scheduler run cfg's schedules from now on (a config reload): added
// templates start ticking, removed ones stop, changed schedules are re-planned. It returns at
// once; the scheduler's loop applies it before its next tick. A config whose schedules do not
// parse is refused (a loaded config's always do).
func (s *Scheduler) Replan(cfg *config.Config) error {
	if _, err := plan(cfg, nil, time.Time{}); err != nil {
		return err
	}
	s.pending.Store(cfg)
	select {
	case s.wake <- struct{}{}:
	default: // a wake is pending already; it reads the newest config
	}
	return nil
}

// applyReplan swaps the entries for those of the pending config (in the run goroutine).
func (s *Scheduler) applyReplan() {
	cfg := s.pending.Swap(nil)
	if cfg == nil {
		return
	}
	entries, err := plan(cfg, s.entries, s.clock.Now())
	if err != nil { // checked by Replan
		s.log.Error("replan refused", "err", err)
		return
	}
	s.mu.Lock()
	s.entries = entries
	s.mu.Unlock()
	s.log.Info("schedules re-planned", "scheduled_templates", len(entries), "config_version", cfg.Version())
	if s.onPlan != nil {
		s.onPlan(len(entries))
	}
}
