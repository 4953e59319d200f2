package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/internal/fakeclock"
	"outerloop/internal/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
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
  - name: manual-only
    daily_cost_cap_usd: 1
    goal: by hand
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

type fixture struct {
	env   *redistest.Env
	store *workitems.Store
	cfg   *workitems.Config
	insp  *asynq.Inspector
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg, err := workitems.ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	insp := asynq.NewInspector(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = insp.Close() })
	return &fixture{env: env, store: workitems.NewStore(env.Client, env.Prefix), cfg: cfg, insp: insp}
}

// newQueue gives each scheduler replica its own asynq client, as separate processes would have.
func (f *fixture) newQueue(t *testing.T, clock workitems.Clock) *scheduler.Queue {
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
		case <-time.After(10 * time.Second):
			t.Fatalf("waited for %d tick results, got %d: %+v", n, len(out), out)
		}
	}
	return out
}

func onlyTemplate(cfg *workitems.Config, names ...string) {
	var keep []workitems.Template
	for _, t := range cfg.Templates {
		for _, n := range names {
			if t.Name == n {
				keep = append(keep, t)
			}
		}
	}
	cfg.Templates = keep
	for i := range cfg.Templates {
		if cfg.Templates[i].CatchUp == "none" {
			// No missed tick falls in a 1ns window: these tests watch live ticks only.
			cfg.Templates[i].CatchUpWindow = 1
		}
	}
}

func TestTwoSchedulersCreateExactlyOneItemPerTick(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "every-minute")
	start := time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC)
	log := newTickLog()
	var clocks []*fakeclock.Clock
	for range 2 {
		c := fakeclock.New(start)
		s, err := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add})
		if err != nil {
			t.Fatal(err)
		}
		s.Start(context.Background())
		t.Cleanup(s.Shutdown)
		clocks = append(clocks, c)
	}
	for i := range 3 {
		for _, c := range clocks {
			c.BlockUntil(1, nil)
			c.Advance(time.Minute)
		}
		res := log.await(t, 2)
		outcomes := map[string]int{}
		for _, r := range res {
			outcomes[r.Outcome]++
			want := fmt.Sprintf("every-minute@20261129T10%02d00Z", i+1)
			if r.Item != want {
				t.Fatalf("tick %d made item %s, want %s", i, r.Item, want)
			}
		}
		if outcomes["created"] != 1 || outcomes["exists"] != 1 {
			t.Fatalf("tick %d outcomes %v, want one created and one exists", i, outcomes)
		}
	}
	items, err := f.store.List(context.Background(), workitems.ListOptions{})
	if err != nil || len(items) != 3 {
		t.Fatalf("items: %d %v", len(items), err)
	}
	tasks, err := f.insp.ListPendingTasks(f.env.Queue)
	if err != nil || len(tasks) != 3 {
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

func TestCatchUpLastRunsTheMissedTickOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "nightly", "nightly-none")
	f.cfg.Templates[1].CatchUpWindow = workitems.Duration(24 * time.Hour)
	// Started at 05:00 UTC: the 03:00 tick of "nightly" and the 00:00 tick of "nightly-none" were missed.
	c := fakeclock.New(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
	log := newTickLog()
	for range 2 { // a restart must not run the tick again
		s, _ := scheduler.New(f.newQueue(t, c), scheduler.Options{Clock: c, OnTick: log.add})
		s.Start(context.Background())
		s.Shutdown()
	}
	res := log.await(t, 4)
	got := map[string][]string{}
	for _, r := range res {
		got[r.Template] = append(got[r.Template], r.Outcome)
	}
	if fmt.Sprint(got["nightly"]) != "[caught_up exists]" {
		t.Fatalf("nightly outcomes %v", got["nightly"])
	}
	if fmt.Sprint(got["nightly-none"]) != "[misfire_dropped misfire_dropped]" {
		t.Fatalf("nightly-none outcomes %v", got["nightly-none"])
	}
	if _, err := f.store.Get(context.Background(), "nightly@20261129T030000Z"); err != nil {
		t.Fatalf("caught-up item: %v", err)
	}
	items, _ := f.store.List(context.Background(), workitems.ListOptions{Template: "nightly-none"})
	if len(items) != 0 {
		t.Fatalf("catch_up none created %d items", len(items))
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
	if _, err := q.Submit(ctx, scheduler.Request{Template: "manual-only"}); !errors.Is(err, workitems.ErrDailyCap) {
		t.Fatalf("over the daily cap: %v", err)
	}
}
