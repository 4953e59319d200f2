// Package scheduler turns cron schedules and manual requests into work items: each cron tick
// becomes an item with a deterministic id (template@tick), created at most once however many
// scheduler replicas run, and its first attempt is enqueued on asynq. Per-template max_open and
// daily cost caps skip ticks (counted and logged); the misfire policy (catch_up: none|last)
// decides what happens to a tick missed while no scheduler ran.
//
// The schedule grammar is robfig/cron/v3's standard one (5 fields, @daily-style descriptors,
// CRON_TZ=). The timing loop is ours, driven by an injected clock, so it can be tested without
// waiting for real minutes.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"outerloop/workitems"
)

// Observer receives the scheduler's counts (metrics.Metrics implements it).
type Observer interface {
	SchedulerTick(template string)
	SchedulerSkip(template, reason string)
	SchedulerMisfire(template string)
}

type nopObserver struct{}

func (nopObserver) SchedulerTick(string)         {}
func (nopObserver) SchedulerSkip(string, string) {}
func (nopObserver) SchedulerMisfire(string)      {}

// TickResult says what one tick of one template did.
type TickResult struct {
	Template string
	Tick     time.Time
	Item     string // the item id (created or existing)
	Outcome  string // created | exists | skipped_max_open | skipped_daily_cap | caught_up | misfire_dropped | error
	Err      error
}

// Options configures a Scheduler.
type Options struct {
	Clock    workitems.Clock
	Logger   *slog.Logger
	Observer Observer
	// OnTick is called after every tick decision (tests await it; the CLI prints it).
	OnTick func(TickResult)
}

// Scheduler runs the cron schedules of the templates that have one.
type Scheduler struct {
	q       *Queue
	clock   workitems.Clock
	log     *slog.Logger
	obs     Observer
	onTick  func(TickResult)
	entries []*entry

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	tmpl  *workitems.Template
	sched cron.Schedule
	next  time.Time
}

// New parses every template's schedule.
func New(q *Queue, o Options) (*Scheduler, error) {
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	s := &Scheduler{q: q, clock: o.Clock, log: o.Logger, obs: o.Observer, onTick: o.OnTick}
	for i := range q.cfg.Templates {
		t := &q.cfg.Templates[i]
		if t.Schedule == "" {
			continue
		}
		sc, err := cron.ParseStandard(t.Schedule)
		if err != nil {
			return nil, fmt.Errorf("scheduler: template %q: schedule %q: %w", t.Name, t.Schedule, err)
		}
		s.entries = append(s.entries, &entry{tmpl: t, sched: sc})
	}
	return s, nil
}

// Start applies the misfire policy, then runs the schedules until Shutdown or ctx ends.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	now := s.clock.Now()
	for _, e := range s.entries {
		s.catchUp(ctx, e, now)
		e.next = e.sched.Next(now)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.run(ctx)
	}()
}

// Shutdown stops the loop and waits for it.
func (s *Scheduler) Shutdown() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

func (s *Scheduler) run(ctx context.Context) {
	if len(s.entries) == 0 {
		<-ctx.Done()
		return
	}
	for {
		next := s.entries[0].next
		for _, e := range s.entries[1:] {
			if e.next.Before(next) {
				next = e.next
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(next.Sub(s.clock.Now())):
		}
		now := s.clock.Now()
		for _, e := range s.entries {
			for !e.next.After(now) {
				s.tick(ctx, e, e.next, workitems.OriginCron)
				e.next = e.sched.Next(e.next)
			}
		}
	}
}

// tick creates the item of one tick and reports what happened.
func (s *Scheduler) tick(ctx context.Context, e *entry, at time.Time, kind string) TickResult {
	id := workitems.CronItemID(e.tmpl.Name, at)
	r := TickResult{Template: e.tmpl.Name, Tick: at, Item: id}
	_, err := s.q.Submit(ctx, Request{Template: e.tmpl.Name, ID: id,
		Origin: workitems.Origin{Kind: workitems.OriginCron, Actor: "scheduler", Tick: at.UTC()}})
	switch {
	case err == nil:
		r.Outcome = "created"
		if kind == "catch_up" {
			r.Outcome = "caught_up"
			s.obs.SchedulerMisfire(e.tmpl.Name)
		}
		s.obs.SchedulerTick(e.tmpl.Name)
		s.log.Info("tick: item created", "template", e.tmpl.Name, "tick", at.UTC(), "item", id, "via", kind)
	case errors.Is(err, workitems.ErrExists):
		r.Outcome = "exists" // another replica, or an earlier run, made it
		s.log.Debug("tick: item exists", "template", e.tmpl.Name, "item", id)
	case errors.Is(err, workitems.ErrMaxOpen):
		r.Outcome = "skipped_max_open"
		s.obs.SchedulerSkip(e.tmpl.Name, "max_open")
		s.log.Warn("tick skipped: max_open reached", "template", e.tmpl.Name, "tick", at.UTC(), "max_open", e.tmpl.MaxOpen)
	case errors.Is(err, workitems.ErrDailyCap):
		r.Outcome = "skipped_daily_cap"
		s.obs.SchedulerSkip(e.tmpl.Name, "daily_cap")
		s.log.Warn("tick skipped: daily cost cap reached", "template", e.tmpl.Name, "tick", at.UTC(), "cap_usd", e.tmpl.DailyCostCapUSD)
	default:
		r.Outcome, r.Err = "error", err
		s.log.Error("tick failed", "template", e.tmpl.Name, "tick", at.UTC(), "err", err)
	}
	if s.onTick != nil {
		s.onTick(r)
	}
	return r
}

// catchUp looks for the last tick before now within the template's window. With catch_up: last
// it is run now (a no-op if it ran before: the id is deterministic); with none it is counted as a
// misfire when it never ran.
func (s *Scheduler) catchUp(ctx context.Context, e *entry, now time.Time) {
	window := e.tmpl.CatchUpWindow.D()
	var last time.Time
	for t := e.sched.Next(now.Add(-window)); !t.After(now); t = e.sched.Next(t) {
		last = t
	}
	if last.IsZero() {
		return
	}
	if e.tmpl.CatchUp == "last" {
		s.tick(ctx, e, last, "catch_up")
		return
	}
	if _, err := s.q.store.Get(ctx, workitems.CronItemID(e.tmpl.Name, last)); errors.Is(err, workitems.ErrNotFound) {
		s.obs.SchedulerMisfire(e.tmpl.Name)
		s.log.Warn("missed tick dropped (catch_up: none)", "template", e.tmpl.Name, "tick", last.UTC())
		if s.onTick != nil {
			s.onTick(TickResult{Template: e.tmpl.Name, Tick: last, Outcome: "misfire_dropped"})
		}
	}
}

// NextRun returns a template's next scheduled tick after now (false when it has no schedule).
func (s *Scheduler) NextRun(template string) (time.Time, bool) {
	for _, e := range s.entries {
		if e.tmpl.Name == template {
			return e.sched.Next(s.clock.Now()), true
		}
	}
	return time.Time{}, false
}
