package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const cfgYAML = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: every-minute
    schedule: "* * * * *"
    goal: tick
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: limited
    schedule: "*/5 * * * *"
    max_open: 1
    goal: tick
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: nightly
    schedule: "CRON_TZ=UTC 0 3 * * *"
    catch_up: last
    goal: nightly
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: nightly-none
    schedule: "@daily"
    goal: nightly
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: stall-none
    schedule: "*/10 * * * *"
    goal: tick
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: stall-last
    schedule: "*/10 * * * *"
    catch_up: last
    goal: tick
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: manual-only
    daily_cost_cap_usd: 1
    goal: by hand
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

type fixture struct {
	env   *redistest.Env
	store *itemstore.Store
	cfg   *config.Config
	insp  *asynq.Inspector
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	insp := asynq.NewInspector(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = insp.Close() })
	return &fixture{env: env, store: itemstore.NewStore(env.Client, env.Prefix), cfg: cfg, insp: insp}
}

// newQueue gives each scheduler replica its own asynq client, as separate processes would have.
func (f *fixture) newQueue(t testing.TB, clock workitems.Clock) *scheduler.Queue {
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	return scheduler.NewQueue(f.store, c, f.insp, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue, Clock: clock})
}

type tickLog struct {
	mu  sync.Mutex
	res []scheduler.TickResult
	ch  chan scheduler.TickResult
}

func newTickLog() *tickLog { return &tickLog{ch: make(chan scheduler.TickResult, 100)} }
func (l *tickLog) add(r scheduler.TickResult) {
	l.mu.Lock()
	l.res = append(l.res, r)
	l.mu.Unlock()
	l.ch <- r
}

func (l *tickLog) await(t *testing.T, n int) []scheduler.TickResult {
	t.Helper()
	var out []scheduler.TickResult
	for range n {
		select {
		case r := <-l.ch:
			out = append(out, r)
		case <-testwait.After(t):
			t.Fatalf("waited for %d tick results, got %d: %+v", n, len(out), out)
		}
	}
	return out
}

func onlyTemplate(cfg *config.Config, names ...string) {
	var keep []config.Template
	for _, t := range cfg.Templates {
		for _, n := range names {
			if t.Name == n {
				keep = append(keep, t)
			}
		}
	}
	cfg.Templates = keep
}

func TestTwoSchedulersCreateExactlyOneItemPerTick(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "every-minute")
	start := time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC)
	log := newTickLog()
	obs := &countingObserver{}
	var clocks []*fakeclock.Clock
	for range 2 {
		c := fakeclock.New(start)
		s, err := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(context.Background())
		t.Cleanup(s.Shutdown)
		clocks = append(clocks, c)
	}
	// Started 30s after the 10:00 tick: it is on time, and both replicas run it.
	for i := range 4 {
		if i > 0 {
			for _, c := range clocks {
				c.BlockUntil(1, nil)
				c.Advance(time.Minute)
			}
		}
		res := log.await(t, 2)
		outcomes := map[string]int{}
		for _, r := range res {
			outcomes[string(r.Outcome)]++
			want := fmt.Sprintf("every-minute@20261129T10%02d00Z", i)
			if r.Item != want {
				t.Fatalf("tick %d made item %s, want %s", i, r.Item, want)
			}
		}
		if outcomes["created"] != 1 || outcomes["exists"] != 1 {
			t.Fatalf("tick %d outcomes %v, want one created and one exists", i, outcomes)
		}
	}
	if n := obs.misfires(); n != 0 {
		t.Errorf("%d misfires while two replicas ran every tick", n)
	}
	items, err := f.store.List(context.Background(), itemstore.ListOptions{})
	if err != nil || len(items) != 4 {
		t.Fatalf("items: %d %v", len(items), err)
	}
	tasks, err := f.insp.ListPendingTasks(f.env.Queue)
	if err != nil || len(tasks) != 4 {
		t.Fatalf("pending asynq tasks: %d %v", len(tasks), err)
	}
	for _, tk := range tasks {
		if _, n, err := workitems.ParseTaskID(tk.ID); err != nil || n != 1 {
			t.Errorf("task id %q is not <item>/attempt-1", tk.ID)
		}
		if tk.Timeout != 10*time.Minute+scheduler.TaskMargin {
			t.Errorf("task timeout %s: must come from the wall-time budget, never asynq's default", tk.Timeout)
		}
	}
}

func TestMaxOpenSkipsTicksWhileItemsAreOpen(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "limited")
	c := fakeclock.New(time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC))
	log := newTickLog()
	s, _ := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add})
	s.Start(context.Background())
	t.Cleanup(s.Shutdown)
	c.BlockUntil(1, nil)
	c.Advance(4 * time.Minute)
	if r := log.await(t, 1)[0]; r.Outcome != "created" {
		t.Fatalf("first tick: %+v", r)
	}
	c.BlockUntil(1, nil)
	c.Advance(5 * time.Minute)
	if r := log.await(t, 1)[0]; r.Outcome != "skipped_max_open" {
		t.Fatalf("second tick while one is open: %+v", r)
	}
	if n, _ := f.store.OpenCount(context.Background(), "limited"); n != 1 {
		t.Fatalf("open items: %d", n)
	}
}

// countingObserver records the scheduler's and the queue's counts.
type countingObserver struct {
	mu        sync.Mutex
	misfire   map[string]int
	skips     map[string]int
	decisions []string
}

func (o *countingObserver) SchedulerTick(string) {}
func (o *countingObserver) SchedulerSkip(template, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.skips == nil {
		o.skips = map[string]int{}
	}
	o.skips[template+"/"+reason]++
}
func (o *countingObserver) FleetReposSkipped(string, map[string]int) {}

func (o *countingObserver) SchedulerMisfire(template string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.misfire == nil {
		o.misfire = map[string]int{}
	}
	o.misfire[template] += n
}
func (o *countingObserver) Decision(template string, actor workitems.ActorKind, outcome workitems.Outcome, rule workitems.RuleName, item string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions = append(o.decisions, fmt.Sprintf("%s %s %s %s", template, actor, outcome, item))
}
func (o *countingObserver) misfires() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.misfire {
		n += v
	}
	return n
}
func (o *countingObserver) misfiresOf(template string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.misfire[template]
}

// startStop runs one scheduler start (its start-up handling) at the clock's time and stops it.
func (f *fixture) startStop(t *testing.T, c *fakeclock.Clock, log *tickLog, obs scheduler.Observer) {
	t.Helper()
	s, err := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	s.Shutdown()
}

func outcomesByTemplate(res []scheduler.TickResult) map[string]string {
	got := map[string][]string{}
	for _, r := range res {
		o := string(r.Outcome)
		if r.Missed > 0 {
			o += fmt.Sprintf("(%d)", r.Missed)
		}
		got[r.Template] = append(got[r.Template], o)
	}
	out := map[string]string{}
	for k, v := range got {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func TestANewDeploymentCountsNoMisfire(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "nightly", "nightly-none", "limited")
	// First start ever at 05:02 UTC, two replicas at once: the 03:00 tick of "nightly" and the
	// 00:00 tick of "nightly-none" were never the deployment's to run.
	c := fakeclock.New(time.Date(2026, 11, 29, 5, 2, 0, 0, time.UTC))
	log, obs := newTickLog(), &countingObserver{}
	for range 2 {
		f.startStop(t, c, log, obs)
	}
	if n := obs.misfires(); n != 0 {
		t.Errorf("%d misfires on the first start of a new deployment, want 0", n)
	}
	if len(log.ch) != 0 {
		t.Errorf("tick results on the first start: %+v", log.await(t, len(log.ch)))
	}
	if items, _ := f.store.List(context.Background(), itemstore.ListOptions{}); len(items) != 0 {
		t.Errorf("the first start created %d items", len(items))
	}
}

func TestARestartJudgesOnlyTheTicksNobodyRan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "nightly", "nightly-none", "limited")
	c := fakeclock.New(time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC))
	log, obs := newTickLog(), &countingObserver{}
	// 02:00: the first start (at "limited"'s on-time 02:00 tick), then nobody runs until 05:02.
	f.startStop(t, c, log, obs)
	if got := outcomesByTemplate(log.await(t, 1)); got["limited"] != "[created]" {
		t.Fatalf("first start: %v", got)
	}
	c.Set(time.Date(2026, 11, 29, 5, 2, 0, 0, time.UTC))
	for range 2 { // two replicas restart together: one judges the gap
		f.startStop(t, c, log, obs)
	}
	got := outcomesByTemplate(log.await(t, 2))
	// nightly (catch_up: last, 6h window) runs its 03:00 tick; limited (*/5, none) drops the 36
	// ticks from 02:05 to 05:00; nightly-none's 00:00 tick was before the mark: not missed.
	if got["nightly"] != "[caught_up(1)]" || got["limited"] != "[misfire_dropped(36)]" || got["nightly-none"] != "" {
		t.Errorf("restart after the gap: %v", got)
	}
	if obs.misfiresOf("nightly") != 1 || obs.misfiresOf("limited") != 36 || obs.misfiresOf("nightly-none") != 0 {
		t.Errorf("misfires %v, want nightly 1, limited 36 (counted once for two replicas)", obs.misfire)
	}
	if _, err := f.store.Get(context.Background(), "nightly@20261129T030000Z"); err != nil {
		t.Errorf("caught-up item: %v", err)
	}

	t.Run("and a quick restart runs the tick it spans, missing nothing", func(t *testing.T) {
		c.Set(time.Date(2026, 11, 29, 5, 5, 30, 0, time.UTC)) // 30s after limited's 05:05 tick
		f.startStop(t, c, log, obs)
		if got := outcomesByTemplate(log.await(t, 1)); got["limited"] != "[skipped_max_open]" {
			t.Errorf("restart within the grace: %v", got) // 02:00's item is still open
		}
		if obs.misfiresOf("limited") != 36 {
			t.Errorf("limited misfires %d after a quick restart, want still 36", obs.misfiresOf("limited"))
		}
		if obs.skips["limited/max_open"] != 1 {
			t.Errorf("skips %v, want the skip counted once", obs.skips)
		}
	})

	t.Run("and a gap longer than the catch-up window drops the missed tick", func(t *testing.T) {
		c.Set(time.Date(2026, 11, 30, 9, 32, 0, 0, time.UTC)) // 6.5h after the 30 Nov 03:00 tick
		f.startStop(t, c, log, obs)
		got := outcomesByTemplate(log.await(t, 3))
		if got["nightly"] != "[misfire_dropped(1)]" || got["nightly-none"] != "[misfire_dropped(1)]" {
			t.Errorf("after a day's gap: %v", got)
		}
	})
}

func TestAStalledSchedulerAppliesTheMisfirePolicyToTheGap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "stall-none", "stall-last")
	c := fakeclock.New(time.Date(2026, 11, 29, 10, 5, 0, 0, time.UTC))
	log, obs := newTickLog(), &countingObserver{}
	s, err := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	t.Cleanup(s.Shutdown)
	// The process is suspended for a day while it waits for 10:10: it wakes at 10:05 the next
	// day with 144 ticks of each */10 schedule due, the newest 5 minutes old.
	c.BlockUntil(1, nil)
	c.Advance(24 * time.Hour)
	got := outcomesByTemplate(log.await(t, 2))
	if got["stall-none"] != "[misfire_dropped(144)]" || got["stall-last"] != "[caught_up(144)]" {
		t.Fatalf("after a day's stall: %v", got)
	}
	for tmpl, want := range map[string]int{"stall-none": 0, "stall-last": 1} {
		items, _ := f.store.List(context.Background(), itemstore.ListOptions{Template: tmpl})
		if len(items) != want {
			t.Errorf("%s: %d items after the stall, want %d", tmpl, len(items), want)
		}
	}
	if _, err := f.store.Get(context.Background(), "stall-last@20261130T100000Z"); err != nil {
		t.Errorf("the caught-up tick is not the newest missed one: %v", err)
	}
	if obs.misfiresOf("stall-none") != 144 || obs.misfiresOf("stall-last") != 144 {
		t.Errorf("misfires %v, want 144 each", obs.misfire)
	}

	t.Run("then the schedule goes on on time", func(t *testing.T) {
		c.BlockUntil(1, nil)
		c.Advance(5 * time.Minute)
		got := outcomesByTemplate(log.await(t, 2))
		if got["stall-none"] != "[created]" || got["stall-last"] != "[created]" {
			t.Errorf("the 10:10 tick after the stall: %v", got)
		}
		if obs.misfiresOf("stall-none") != 144 {
			t.Errorf("misfires grew to %d for an on-time tick", obs.misfiresOf("stall-none"))
		}
	})
}

func TestAPersonsDecisionIsCountedOnceWhereverItComesFrom(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	obs := &countingObserver{}
	q := scheduler.NewQueue(f.store, c, f.insp, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue, Observer: obs})
	ctx := context.Background()
	it, err := q.Submit(ctx, scheduler.Request{Template: "manual-only"})
	if err != nil {
		t.Fatal(err)
	}
	// Closing a queued item is refused: nothing is counted.
	if _, err := q.Resolve(ctx, it.ID, workitems.Resolution{Action: "close", Actor: "alice"}); err == nil {
		t.Fatal("closing a queued item was accepted")
	}
	if _, err := q.Resolve(ctx, it.ID, workitems.Resolution{Action: "cancel", Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	want := "manual-only person cancel " + it.ID
	if len(obs.decisions) != 1 || obs.decisions[0] != want {
		t.Errorf("decisions %q, want [%s]", obs.decisions, want)
	}
}

func TestSubmitUnknownTemplateChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, workitems.SystemClock{})
	_, err := q.Submit(context.Background(), scheduler.Request{Template: "nope"})
	if !errors.Is(err, scheduler.ErrUnknownTemplate) {
		t.Fatalf("got %v", err)
	}
	if n := f.env.Client.Exists(context.Background(), f.env.Prefix+"items").Val(); n != 0 {
		t.Fatal("an index was written for a refused request")
	}
}

// TestSubmitKeepsTheRefItsAttemptsStartFromAndRefusesOneGitWouldNot: a ref is kept on the
// item; one git refuses (an option-like name, "..") is refused naming it, writing nothing.
func TestSubmitKeepsTheRefItsAttemptsStartFromAndRefusesOneGitWouldNot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, workitems.SystemClock{})
	ctx := context.Background()
	for _, bad := range []string{"--upload-pack=x", "a..b", "has space"} {
		_, err := q.Submit(ctx, scheduler.Request{Template: "manual-only", Ref: bad})
		if err == nil || !strings.Contains(err.Error(), "ref: ") || workitems.ClassOf(err) != workitems.ClassInvalidInput {
			t.Fatalf("ref %q: %v", bad, err)
		}
	}
	if n := f.env.Client.Exists(ctx, f.env.Prefix+"items").Val(); n != 0 {
		t.Fatal("an index was written for a refused request")
	}
	it, err := q.Submit(ctx, scheduler.Request{Template: "manual-only", Ref: "release/1.2"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.store.Get(ctx, it.ID); err != nil || got.Ref != "release/1.2" {
		t.Fatalf("stored ref: %+v %v", got, err)
	}
}

func TestManualSubmitHonoursDailyCostCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q := f.newQueue(t, workitems.SystemClock{})
	ctx := context.Background()
	it, err := q.Submit(ctx, scheduler.Request{Template: "manual-only", Input: "please", Origin: workitems.Origin{Kind: "manual", Actor: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	if it.Attempts[0].Condition.Input != "please" || it.Goal != "by hand" {
		t.Fatalf("item: %+v", it)
	}
	fence, _ := f.store.AcquireLease(ctx, it.ID, 1, "w", time.Minute)
	_, _, _ = f.store.StartAttempt(ctx, fence, "w")
	_, _ = f.store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 1.2}, "", false)
	if _, err := q.Submit(ctx, scheduler.Request{Template: "manual-only"}); !errors.Is(err, itemstore.ErrDailyCap) {
		t.Fatalf("over the daily cap: %v", err)
	}
}
