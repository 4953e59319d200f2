// Package scheduler turns cron schedules and manual requests into work items: each cron tick
// becomes an item with a deterministic id (template@tick), created at most once however many
// scheduler replicas run, and its first attempt is enqueued on asynq. Per-template max_open and
// daily cost caps skip ticks (counted and logged), and so does a person's pause of the template
// (pause.go; controls.go holds the other template controls: run now, re-run, history).
//
// Misfires. A tick is on time when a scheduler handles it within OnTimeGrace of its time and no
// later tick of the template is due yet; then it runs. Any other due tick was missed: the
// schedulers were down, or the process stalled (a suspended runtime wakes with many ticks due).
// The template's misfire policy decides what a missed tick becomes — catch_up: none drops it,
// catch_up: last runs the newest missed tick if it lies within catch_up_window — and each missed
// tick is counted once (SchedulerMisfire). Which ticks should have run is known from a mark in
// Redis per template, "handled up to", that every replica moves forward atomically after
// handling; the replica that moves it over an interval judges the ticks in it, so replicas never
// double count, a restart counts only the ticks while nobody ran, and a new deployment (no mark)
// counts none.
//
// The schedule grammar is robfig/cron/v3's standard one (5 fields, @daily-style descriptors,
// CRON_TZ=). The timing loop is ours, driven by an injected clock, so it can be tested without
// waiting for real minutes.
package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Observer receives the scheduler's counts (metrics.Metrics implements it).
type Observer interface {
	SchedulerTick(template string)
	SchedulerSkip(template, reason string)
	SchedulerMisfire(template string, n int)
	// FleetReposSkipped counts the repositories a fleet template's tick skipped, by reason.
	FleetReposSkipped(template string, skipped map[string]int)
}

type nopObserver struct{}

func (nopObserver) SchedulerTick(string)                     {}
func (nopObserver) SchedulerSkip(string, string)             {}
func (nopObserver) SchedulerMisfire(string, int)             {}
func (nopObserver) FleetReposSkipped(string, map[string]int) {}

// OnTimeGrace is how late a scheduler may handle a tick for it to count as on time (a busy or
// restarting process); a tick handled later was missed, and the misfire policy applies.
const OnTimeGrace = time.Minute

// maxCounted bounds how many missed ticks one handling walks to count them (69 days of an
// every-minute schedule); past it the count is a lower bound, and says so in the log.
const maxCounted = 100_000

// TickOutcome is what one tick of one template did.
type TickOutcome string

// The tick outcomes.
const (
	TickCreated         TickOutcome = "created"
	TickExists          TickOutcome = "exists" // another replica, or an earlier run, made it
	TickSkippedMaxOpen  TickOutcome = "skipped_max_open"
	TickSkippedDailyCap TickOutcome = "skipped_daily_cap"
	TickSkippedPaused   TickOutcome = "skipped_paused"  // the template is paused (pause.go)
	TickCaughtUp        TickOutcome = "caught_up"       // the one run for a gap, under catch_up
	TickMisfireDropped  TickOutcome = "misfire_dropped" // a gap's ticks dropped, under skip
	TickError           TickOutcome = "error"
)

// TickResult says what one tick of one template did.
type TickResult struct {
	Template string
	Tick     time.Time
	Item     string // the item id (created or existing)
	Outcome  TickOutcome
	// Missed is, with caught_up and misfire_dropped, how many ticks were missed in the gap
	// (Tick is the newest of them).
	Missed int
	// Fleet is what a fleet template's tick did per repository (Item is then empty).
	Fleet *FleetTick
	Err   error
}

// Options configures a Scheduler.
type Options struct {
	Clock    workitems.Clock
	Logger   *slog.Logger
	Observer Observer
	// OnTick is called after every tick decision (tests await it; the CLI prints it).
	OnTick func(TickResult)
	// OnReplan is called after a replan (Replan) is applied, with the number of schedules.
	OnReplan func(int)
	// Fleet grants a limited fleet's items right after its tick made them (nil: the next
	// round of the workers' admitters does).
	Fleet FleetAdmitter
}

// Scheduler runs the cron schedules of the templates that have one.
type Scheduler struct {
	q       *Queue
	k       keys
	clock   workitems.Clock
	log     *slog.Logger
	obs     Observer
	onTick  func(TickResult)
	onPlan  func(int)
	fleet   FleetAdmitter
	entries []*entry
	// mu guards replacing entries (a replan) against NextRun; the run goroutine is the only
	// writer, so it reads them without it.
	mu      sync.Mutex
	pending atomic.Pointer[config.Config] // the config a replan waits to apply
	wake    chan struct{}                 // a replan is pending

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	tmpl    *config.Template
	sched   cron.Schedule
	next    time.Time // the next tick to wake for
	handled time.Time // this replica handled every tick up to here (zero before Start)
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
	s := &Scheduler{q: q, k: keys{p: q.store.Prefix()}, clock: o.Clock, log: o.Logger, obs: o.Observer, onTick: o.OnTick,
		onPlan: o.OnReplan, wake: make(chan struct{}, 1), fleet: o.Fleet}
	entries, err := plan(q.Config(), nil, time.Time{})
	if err != nil {
		return nil, err
	}
	s.entries = entries
	return s, nil
}

// Start handles the ticks due now (an on-time tick runs; missed ones get the misfire policy),
// then runs the schedules until Shutdown or ctx ends.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	now := s.clock.Now()
	for _, e := range s.entries {
		s.handle(ctx, e, now)
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
	var due <-chan time.Time // nil (never) with no schedule
	var dueAt time.Time
	for {
		if len(s.entries) == 0 {
			due = nil
		} else {
			next := s.entries[0].next
			for _, e := range s.entries[1:] {
				if e.next.Before(next) {
					next = e.next
				}
			}
			if due == nil || !next.Equal(dueAt) { // a replan that keeps the next tick keeps its timer
				due, dueAt = s.clock.After(next.Sub(s.clock.Now())), next
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.applyReplan()
			continue
		case <-due:
			due = nil
		}
		// After a stall (a suspended process) many ticks are due at once: handle applies the
		// misfire policy to them instead of running each.
		now := s.clock.Now()
		for _, e := range s.entries {
			if !e.next.After(now) {
				s.handle(ctx, e, now)
			}
		}
	}
}

// handle deals with every tick of e due by now that this replica has not handled: the newest
// runs if it is on time, the others (and a late newest) were missed. It first moves the
// template's mark to now; the replica that moved it over an interval judges the ticks in it:
// missed ones are counted, then dropped or caught up by the misfire policy, and a skip of the
// on-time tick is counted by it alone. The on-time tick is submitted by every replica (its id is
// deterministic, so one creates it), so a replica dying after the mark moved loses no tick.
func (s *Scheduler) handle(ctx context.Context, e *entry, now time.Time) {
	defer func() {
		e.handled = now
		e.next = e.sched.Next(now)
	}()
	from := now.Add(-OnTimeGrace)
	if e.handled.After(from) {
		from = e.handled
	}
	_, onTime, _ := ticksIn(e.sched, from, now, maxCounted)
	prev, status, err := s.claim(ctx, e.tmpl.Name, now)
	if err != nil {
		// Unclaimed: the next handling claims the interval since the mark, this one included.
		s.log.Error("tick marks not updated; missed ticks are judged at the next tick", "template", e.tmpl.Name, "err", err)
	}
	judge := status == claimMoved && err == nil
	if !onTime.IsZero() {
		s.tick(ctx, e, onTime, tickOnTime, 0, err != nil || status == claimFirst || (judge && onTime.After(prev)))
	}
	if !judge {
		return // a new deployment (nothing was missed), another replica judged these ticks, or no mark
	}
	upTo := now
	if !onTime.IsZero() {
		upTo = onTime.Add(-time.Nanosecond) // the on-time tick ran
	}
	missed, newest, capped := ticksIn(e.sched, prev, upTo, maxCounted)
	if missed == 0 {
		return
	}
	window := e.tmpl.CatchUpWindow.D()
	if capped {
		// Too many to walk: the newest missed is found from the catch-up window instead.
		_, newest, _ = ticksIn(e.sched, maxTime(prev, now.Add(-window)), upTo, maxCounted)
	}
	s.obs.SchedulerMisfire(e.tmpl.Name, missed)
	log := s.log.With("template", e.tmpl.Name, "missed", missed, "all_counted", !capped, "since", prev.UTC(), "newest", newest.UTC())
	if e.tmpl.CatchUp == "last" && onTime.IsZero() && !newest.IsZero() && now.Sub(newest) <= window {
		log.Warn("ticks missed; catching up the newest (catch_up: last)")
		s.tick(ctx, e, newest, tickCatchUp, missed, true)
		return
	}
	log.Warn("ticks missed and dropped", "catch_up", e.tmpl.CatchUp, "catch_up_window", window)
	s.report(TickResult{Template: e.tmpl.Name, Tick: newest, Outcome: TickMisfireDropped, Missed: missed})
}

// ticksIn counts the ticks of sched in (after, upTo], walking at most limit of them, and returns
// the newest one walked (zero when none); capped says the walk stopped at the limit.
func ticksIn(sched cron.Schedule, after, upTo time.Time, limit int) (n int, newest time.Time, capped bool) {
	for t := sched.Next(after); !t.IsZero() && !t.After(upTo); t = sched.Next(t) {
		if n == limit {
			return n, newest, true
		}
		n++
		newest = t
	}
	return n, newest, false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SkipPaused is the skip reason (Observer.SchedulerSkip) of a paused template's tick.
const SkipPaused = "paused"

// How a tick comes to be submitted: on time, or as the newest missed tick (catch_up: last).
const (
	tickOnTime  = "cron"
	tickCatchUp = "catch_up"
)

// tick creates the item of one tick and reports what happened; missed is, for a catch-up, how
// many ticks the gap had. countSkip says whether this replica counts a skip (the one that judged
// the tick's interval does).
func (s *Scheduler) tick(ctx context.Context, e *entry, at time.Time, kind string, missed int, countSkip bool) TickResult {
	id := workitems.CronItemID(e.tmpl.Name, at)
	r := TickResult{Template: e.tmpl.Name, Tick: at, Item: id}
	if kind == tickCatchUp {
		r.Missed = missed
	}
	paused, err := s.q.skipPaused(ctx, e.tmpl.Name, at)
	if err == nil && !paused {
		if e.tmpl.IsFleet() {
			r.Fleet, err = s.fleetTick(ctx, e.tmpl, at)
			r.Item = ""
		} else {
			_, err = s.q.Submit(ctx, Request{Template: e.tmpl.Name, ID: id,
				Origin: workitems.Origin{Kind: workitems.OriginCron, Actor: "scheduler", Tick: at.UTC()}})
		}
	}
	switch {
	case paused:
		r.Outcome = TickSkippedPaused
		if countSkip {
			s.obs.SchedulerSkip(e.tmpl.Name, SkipPaused)
		}
		s.log.Info("tick skipped: template paused", "template", e.tmpl.Name, "tick", at.UTC(), "via", kind)
	case err == nil:
		r.Outcome = TickCreated
		if kind == tickCatchUp {
			r.Outcome = TickCaughtUp
		}
		s.obs.SchedulerTick(e.tmpl.Name)
		if r.Fleet != nil {
			if countSkip {
				s.obs.FleetReposSkipped(e.tmpl.Name, r.Fleet.Skipped)
			}
			s.log.Info("tick: fleet items created", "template", e.tmpl.Name, "tick", at.UTC(), "via", kind, "repos", r.Fleet.Repos,
				"created", r.Fleet.Created, "existing", r.Fleet.Existing, "skipped", r.Fleet.SkippedCount(), "failed", r.Fleet.Failed)
			break
		}
		s.log.Info("tick: item created", "template", e.tmpl.Name, "tick", at.UTC(), "item", id, "via", kind)
	case errors.Is(err, workitems.ErrExists):
		r.Outcome = TickExists
		s.log.Debug("tick: item exists", "template", e.tmpl.Name, "item", id)
	case errors.Is(err, itemstore.ErrMaxOpen):
		r.Outcome = TickSkippedMaxOpen
		if countSkip {
			s.obs.SchedulerSkip(e.tmpl.Name, "max_open")
		}
		s.log.Warn("tick skipped: max_open reached", "template", e.tmpl.Name, "tick", at.UTC(), "max_open", e.tmpl.MaxOpen)
	case errors.Is(err, itemstore.ErrDailyCap):
		r.Outcome = TickSkippedDailyCap
		if countSkip {
			s.obs.SchedulerSkip(e.tmpl.Name, "daily_cap")
		}
		s.log.Warn("tick skipped: daily cost cap reached", "template", e.tmpl.Name, "tick", at.UTC(), "cap_usd", e.tmpl.DailyCostCapUSD)
	default:
		r.Outcome, r.Err = TickError, err
		s.log.Error("tick failed", "template", e.tmpl.Name, "tick", at.UTC(), "err", err)
	}
	s.report(r)
	return r
}

func (s *Scheduler) report(r TickResult) {
	if s.onTick != nil {
		s.onTick(r)
	}
}

// NextRun returns a template's next scheduled tick after now (false when it has no schedule).
func (s *Scheduler) NextRun(template string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.tmpl.Name == template {
			return e.sched.Next(s.clock.Now()), true
		}
	}
	return time.Time{}, false
}
