package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func TestPausedTemplateSkipsTicksAndResumeRestoresThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	onlyTemplate(f.cfg, "every-minute")
	c := fakeclock.New(time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC))
	log := newTickLog()
	obs := &countingObserver{}
	q := f.newQueue(t, c)
	s, err := scheduler.New(q, scheduler.Options{Clock: c, OnTick: log.add, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(ctx)
	t.Cleanup(s.Shutdown)
	if r := log.await(t, 1)[0]; r.Outcome != scheduler.TickCreated {
		t.Fatalf("first tick before the pause: %+v", r)
	}
	if _, err := q.Pause(ctx, "every-minute", "alice", "flaky upstream"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		c.BlockUntil(1, nil)
		c.Advance(time.Minute)
		if r := log.await(t, 1)[0]; r.Outcome != scheduler.TickSkippedPaused {
			t.Fatalf("tick %d while paused: %+v, want skipped_paused", i+1, r)
		}
	}
	obs.mu.Lock()
	skips := obs.skips["every-minute/paused"]
	obs.mu.Unlock()
	if skips != 2 {
		t.Errorf("paused skips counted %d, want 2", skips)
	}
	p, err := q.PauseOf(ctx, "every-minute")
	if err != nil || p == nil {
		t.Fatalf("pause while paused: %v %v", p, err)
	}
	if p.Actor != "alice" || p.Reason != "flaky upstream" || p.Skipped != 2 ||
		!p.LastSkipped.Equal(time.Date(2026, 11, 29, 10, 2, 0, 0, time.UTC)) {
		t.Errorf("pause record %+v: want alice, the reason, 2 skipped, the last at 10:02", p)
	}
	ended, err := q.Resume(ctx, "every-minute", "bob")
	if err != nil || ended.Skipped != 2 || ended.Actor != "alice" {
		t.Fatalf("resume: %+v %v", ended, err)
	}
	c.BlockUntil(1, nil)
	c.Advance(time.Minute)
	if r := log.await(t, 1)[0]; r.Outcome != scheduler.TickCreated || r.Item != "every-minute@20261129T100300Z" {
		t.Fatalf("first tick after resume: %+v, want the 10:03 item created", r)
	}
	if n := obs.misfires(); n != 0 {
		t.Errorf("%d misfires: a paused tick is handled, not missed", n)
	}
	items, err := f.store.List(ctx, itemstore.ListOptions{Sort: itemstore.SortOldest})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	if want := []string{"every-minute@20261129T100000Z", "every-minute@20261129T100300Z"}; !slices.Equal(ids, want) {
		t.Errorf("items %v, want %v (none for the paused ticks)", ids, want)
	}
	recs, err := q.Controls(ctx, "every-minute", 10)
	if err != nil || len(recs) != 2 || recs[0].Action != scheduler.ControlResume || recs[0].Actor != "bob" ||
		recs[1].Action != scheduler.ControlPause || recs[1].Actor != "alice" {
		t.Errorf("control log %+v %v: want resume by bob, then pause by alice", recs, err)
	}
}

func TestPausedTickIsCountedOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	onlyTemplate(f.cfg, "every-minute")
	start := time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC)
	log := newTickLog()
	var qs []*scheduler.Queue
	for range 2 {
		c := fakeclock.New(start)
		q := f.newQueue(t, c)
		s, err := scheduler.New(q, scheduler.Options{Clock: c, OnTick: log.add})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
		if len(qs) == 1 {
			if _, err := q.Pause(ctx, "every-minute", "alice", ""); err != nil {
				t.Fatal(err)
			}
		}
		s.Start(ctx)
		t.Cleanup(s.Shutdown)
	}
	for _, r := range log.await(t, 2) {
		if r.Outcome != scheduler.TickSkippedPaused {
			t.Fatalf("tick of a paused template: %+v", r)
		}
	}
	p, err := qs[1].PauseOf(ctx, "every-minute")
	if err != nil || p == nil || p.Skipped != 1 {
		t.Fatalf("one tick handled by two replicas: pause %+v %v, want 1 skipped", p, err)
	}
	if n, _ := f.store.Count(ctx, itemstore.ListOptions{}); n != 0 {
		t.Errorf("%d items made while paused", n)
	}
}

func TestPauseAndResumeRefuseBadRequestsAndChangeNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	q := f.newQueue(t, fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"an unknown template is not paused", func() error { _, err := q.Pause(ctx, "nope", "alice", ""); return err }, scheduler.ErrUnknownTemplate},
		{"a template without a schedule is not paused", func() error { _, err := q.Pause(ctx, "manual-only", "alice", ""); return err }, scheduler.ErrNoSchedule},
		{"a pause needs an actor", func() error { _, err := q.Pause(ctx, "limited", " ", ""); return err }, scheduler.ErrBadControl},
		{"a reason is bounded", func() error {
			_, err := q.Pause(ctx, "limited", "alice", strings.Repeat("x", scheduler.MaxReason+1))
			return err
		}, scheduler.ErrBadControl},
		{"a template that is not paused is not resumed", func() error { _, err := q.Resume(ctx, "limited", "alice"); return err }, scheduler.ErrNotPaused},
		{"an unknown template is not resumed", func() error { _, err := q.Resume(ctx, "nope", "alice"); return err }, scheduler.ErrUnknownTemplate},
	}
	for _, tc := range cases {
		if err := tc.do(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	ps, err := q.Pauses(ctx, []string{"limited", "manual-only", "nope"})
	if err != nil || len(ps) != 0 {
		t.Fatalf("pauses after refused requests: %v %v", ps, err)
	}
	if _, err := q.Pause(ctx, "limited", "alice", "first"); err != nil {
		t.Fatal(err)
	}
	_, err = q.Pause(ctx, "limited", "bob", "second")
	if !errors.Is(err, scheduler.ErrAlreadyPaused) || !strings.Contains(err.Error(), "by alice") {
		t.Fatalf("second pause: %v, want already paused by alice", err)
	}
	if p, _ := q.PauseOf(ctx, "limited"); p == nil || p.Actor != "alice" || p.Reason != "first" {
		t.Errorf("the second pause changed the first: %+v", p)
	}
	if recs, _ := q.Controls(ctx, "limited", 0); len(recs) != 1 {
		t.Errorf("control log %+v: only the one pause that happened", recs)
	}
}

func TestRunNowCreatesAManualItemEvenWhilePaused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	q := f.newQueue(t, fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	if _, err := q.Pause(ctx, "limited", "alice", ""); err != nil {
		t.Fatal(err)
	}
	it, err := q.RunNow(ctx, "limited", "bob", "try the fix", false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Get(ctx, it.ID)
	if err != nil || got.Origin.Kind != workitems.OriginManual || got.Origin.Actor != "bob" ||
		got.Attempts[0].Condition.Input != "try the fix" || got.State != workitems.StateQueued {
		t.Fatalf("run-now item %+v %v", got, err)
	}
	if _, err := f.insp.GetTaskInfo(f.env.Queue, workitems.TaskID(it.ID, 1)); err != nil {
		t.Errorf("run-now attempt not on asynq: %v", err)
	}
	recs, _ := q.Controls(ctx, "limited", 1)
	if len(recs) != 1 || recs[0].Action != scheduler.ControlRunNow || recs[0].Item != it.ID || recs[0].Actor != "bob" {
		t.Errorf("control log %+v", recs)
	}
	if _, err := q.RunNow(ctx, "nope", "bob", "", false); !errors.Is(err, scheduler.ErrUnknownTemplate) {
		t.Errorf("run now of an unknown template: %v", err)
	}
	// "limited" has max_open 1 and the item above is open: run now is a manual enqueue, so it
	// is refused unless forced, and the forced item says so.
	if _, err := q.RunNow(ctx, "limited", "bob", "", false); !errors.Is(err, itemstore.ErrMaxOpen) {
		t.Errorf("run now past max_open: %v, want ErrMaxOpen", err)
	}
	if n, _ := f.store.OpenCount(ctx, "limited"); n != 1 {
		t.Errorf("a refused run now left %d open items, want 1", n)
	}
	forced, err := q.RunNow(ctx, "limited", "bob", "", true)
	if err != nil || !forced.Origin.Forced {
		t.Errorf("forced run now: %+v %v", forced, err)
	}
}

func TestRerunMakesALinkedNewItemOnlyOfAnEndedItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	q := f.newQueue(t, fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	orig, err := q.Submit(ctx, scheduler.Request{Template: "manual-only", Input: "the input",
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("refuses an open item and changes nothing", func(t *testing.T) {
		_, err := q.Rerun(ctx, orig.ID, "bob")
		if !errors.Is(err, itemstore.ErrStillOpen) || !strings.Contains(err.Error(), "queued") {
			t.Fatalf("rerun of a queued item: %v, want still open naming its state", err)
		}
		got, _ := f.store.Get(ctx, orig.ID)
		if n, _ := f.store.Count(ctx, itemstore.ListOptions{}); n != 1 || len(got.Reruns) != 0 || got.Version != orig.Version {
			t.Errorf("a refused rerun changed something: %d items, reruns %v, version %d→%d", n, got.Reruns, orig.Version, got.Version)
		}
	})
	t.Run("refuses an unknown item", func(t *testing.T) {
		if _, err := q.Rerun(ctx, "nope", "bob"); !errors.Is(err, workitems.ErrNotFound) {
			t.Errorf("rerun of an unknown item: %v", err)
		}
	})
	if _, err := q.Resolve(ctx, orig.ID, workitems.Resolution{Action: workitems.ResolveCancel, Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	t.Run("re-runs a cancelled item with the same input, linked both ways", func(t *testing.T) {
		re, err := q.Rerun(ctx, orig.ID, "bob")
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.store.Get(ctx, re.ID)
		if err != nil || got.RerunOf != orig.ID || got.Template != "manual-only" || got.State != workitems.StateQueued ||
			got.Attempts[0].Condition.Input != "the input" || got.Origin.Kind != workitems.OriginRerun || got.Origin.Actor != "bob" {
			t.Fatalf("rerun item %+v %v", got, err)
		}
		// Made under the config in force, like any new item: a later reload can tell it stale.
		if got.Pin == nil || got.Pin.Config != q.Config().Version() || got.Pin.LoopKind != "script" {
			t.Errorf("rerun item pin %+v, want the config in force", got.Pin)
		}
		o, _ := f.store.Get(ctx, orig.ID)
		if !slices.Equal(o.Reruns, []string{re.ID}) || o.State != workitems.StateCancelled {
			t.Errorf("original: reruns %v state %s, want [%s] and still cancelled", o.Reruns, o.State, re.ID)
		}
		evs, _ := f.store.Events(ctx, orig.ID, "", 100, 0)
		found := false
		for _, e := range evs {
			found = found || e.Type == workitems.EventRerun && e.Actor == "bob" && e.Data["rerun"] == re.ID
		}
		if !found {
			t.Errorf("no rerun event by bob on the original: %+v", evs)
		}
		if _, err := f.insp.GetTaskInfo(f.env.Queue, workitems.TaskID(re.ID, 1)); err != nil {
			t.Errorf("rerun attempt not on asynq: %v", err)
		}
		h, err := q.History(ctx, "manual-only", 0, 10)
		if err != nil || h.Total != 2 || len(h.Items) != 2 || h.Items[0].ID != re.ID || h.Items[0].RerunOf != orig.ID ||
			!slices.Equal(h.Items[1].Reruns, []string{re.ID}) {
			t.Errorf("history %+v %v: want the rerun first, linked to the original", h, err)
		}
	})
}

func TestHistoryPagesATemplatesItemsNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	c := fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	f.store = itemstore.NewStore(f.env.Client, f.env.Prefix, itemstore.WithClock(c))
	q := f.newQueue(t, c)
	var ids []string
	for range 5 {
		it, err := q.RunNow(ctx, "manual-only", "alice", "", false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
		c.Advance(time.Second)
	}
	if _, err := q.RunNow(ctx, "limited", "alice", "", false); err != nil {
		t.Fatal(err)
	}
	h, err := q.History(ctx, "manual-only", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if h.Total != 5 || h.Offset != 1 || len(h.Items) != 2 || h.Items[0].ID != ids[3] || h.Items[1].ID != ids[2] {
		t.Fatalf("page 2 of 2: %+v, want items %s, %s of 5", h, ids[3], ids[2])
	}
	if h.Items[0].Outcome != "queued" || h.Paused != nil {
		t.Errorf("entry %+v: an undecided item's outcome is its state; not paused", h.Items[0])
	}
	if _, err := q.History(ctx, "nope", 0, 10); !errors.Is(err, scheduler.ErrUnknownTemplate) {
		t.Errorf("history of an unknown template: %v", err)
	}
}
