package evals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func experiment(id string, created time.Time, tasks ...string) *Experiment {
	e := &Experiment{ID: id, Repeat: 1, State: StateRunning, CreatedAt: created,
		Suite:    Suite{Name: "s"},
		Variants: []VariantSpec{{Name: "A"}, {Name: "B"}}}
	for _, t := range tasks {
		e.Suite.Tasks = append(e.Suite.Tasks, Task{ID: t, Template: "fix"})
	}
	return e
}

// TestAnExperimentIdInUseIsRefusedAndChangesNothing: Create is one step; a second experiment
// with the same id neither replaces the record nor touches the indexes.
func TestAnExperimentIdInUseIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Create(ctx, experiment("x1", at, "t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(ctx, "x1", StateFinished, "", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	err := s.Create(ctx, experiment("x1", at.Add(time.Minute), "other"))
	if err == nil || err.Error() != "evals: experiment x1 exists" {
		t.Fatalf("second create: %v, want the id named as in use", err)
	}
	e, err := s.Get(ctx, "x1")
	if err != nil || e.State != StateFinished || e.Suite.Tasks[0].ID != "t1" {
		t.Fatalf("record after the refused create: %+v %v", e, err)
	}
	if active, _ := s.Active(ctx); len(active) != 0 {
		t.Errorf("the refused create made x1 active again: %v", active)
	}
}

// TestAnExperimentEndsOnceWhoeverSeesItsLastRun: many callers ending the same experiment at
// once (the driver, status calls) make one transition; the ended index and the active set
// agree with the record, and a reopen undoes both.
func TestAnExperimentEndsOnceWhoeverSeesItsLastRun(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := s.Create(ctx, experiment("x1", at, "t1")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	reasons := make([]string, 8)
	for i := range reasons {
		wg.Go(func() {
			e, err := s.End(ctx, "x1", StateStopped, fmt.Sprintf("caller %d", i), at.Add(time.Duration(i+1)*time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			reasons[i] = e.Reason
		})
	}
	wg.Wait()
	e, err := s.Get(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reasons {
		if r != e.Reason {
			t.Errorf("caller %d saw reason %q, the record says %q", i, r, e.Reason)
		}
	}
	ended, _ := s.EndedBefore(ctx, at.Add(time.Hour), 10)
	if active, _ := s.Active(ctx); len(active) != 0 || !slices.Equal(ended, []string{"x1"}) {
		t.Fatalf("after the end: active %v, ended %v", active, ended)
	}
	if got, _ := s.EndedBefore(ctx, e.EndedAt, 10); len(got) != 0 {
		t.Errorf("ended before its own end time: %v", got)
	}
	if err := s.Reopen(ctx, e); err != nil {
		t.Fatal(err)
	}
	ended, _ = s.EndedBefore(ctx, at.Add(time.Hour), 10)
	if active, _ := s.Active(ctx); !slices.Equal(active, []string{"x1"}) || len(ended) != 0 {
		t.Fatalf("after the reopen: active %v, ended %v", active, ended)
	}
	if _, err := s.End(ctx, "nope", StateFinished, "", at); !errors.Is(err, ErrNotFound) {
		t.Errorf("ending an unknown experiment: %v, want ErrNotFound", err)
	}
}

// TestExperimentsListNewestFirstAPageAtATime: one page is one range read and one MGET; an
// experiment deleted between the two is left out, the total counts what is indexed.
func TestExperimentsListNewestFirstAPageAtATime(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		if err := s.Create(ctx, experiment(fmt.Sprintf("x%d", i), at.Add(time.Duration(i)*time.Minute), "t")); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(es []*Experiment) (out []string) {
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	page, total, err := s.List(ctx, 0, 2)
	if err != nil || total != 5 || !slices.Equal(ids(page), []string{"x4", "x3"}) {
		t.Fatalf("first page: %v %d %v", ids(page), total, err)
	}
	if err := env.Client.Del(ctx, s.k.exp("x2")).Err(); err != nil { // its index entry stays
		t.Fatal(err)
	}
	page, _, err = s.List(ctx, 2, 2)
	if err != nil || !slices.Equal(ids(page), []string{"x1"}) {
		t.Fatalf("second page: %v %v", ids(page), err)
	}
	if page, _, err := s.List(ctx, 10, 2); err != nil || len(page) != 0 {
		t.Fatalf("past the end: %v %v", ids(page), err)
	}
}

// TestTheJanitorDeletesEndedExperimentsWithTheirItemsOnceTheirRetentionPassed: an experiment
// that ended more than the retention ago goes with its run results and its items; a recent
// one, a running one and one whose run item is still running stay; a dry run deletes nothing.
func TestTheJanitorDeletesEndedExperimentsWithTheirItemsOnceTheirRetentionPassed(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	exps := NewStore(env.Client, env.Prefix)
	clock := fakeclock.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	items := itemstore.NewStore(env.Client, ItemPrefix(env.Prefix), itemstore.WithClock(clock))
	ctx := context.Background()
	day := 24 * time.Hour
	mk := func(id string, ended time.Duration, itemState workitems.State) {
		e := experiment(id, clock.Now().Add(-ended-day), "t1")
		if err := exps.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		for _, r := range e.Runs() {
			it := &workitems.Item{ID: e.ItemID(r), Template: RunTemplate(id, r.Task, r.Variant), Goal: "g", MaxAttempts: 1}
			if err := items.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
				t.Fatal(err)
			}
			if _, err := items.Update(ctx, it.ID, nil, func(it *workitems.Item) ([]workitems.Event, error) {
				return nil, it.SetState(itemState)
			}); err != nil {
				t.Fatal(err)
			}
			if err := exps.RecordRun(ctx, id, Run{Task: r.Task, Variant: r.Variant, Rep: r.Rep}); err != nil {
				t.Fatal(err)
			}
		}
		if ended >= 0 {
			if _, err := exps.End(ctx, id, StateFinished, "", clock.Now().Add(-ended)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("old", 40*day, workitems.StateCancelled)
	mk("recent", 20*day, workitems.StateCancelled)
	mk("busy", 40*day, workitems.StateRunning)
	mk("running", -1, workitems.StateRunning)
	j := NewJanitor(JanitorOptions{Exps: exps, Items: items, Retention: 30 * day, Clock: clock})

	dry, err := j.Run(ctx, true)
	slices.Sort(dry)
	if err != nil || !slices.Equal(dry, []string{"busy", "old"}) {
		t.Fatalf("dry run: %v %v, want old and busy listed", dry, err)
	}
	if _, err := exps.Get(ctx, "old"); err != nil {
		t.Fatalf("the dry run deleted: %v", err)
	}
	removed, err := j.Run(ctx, false)
	if err != nil || !slices.Equal(removed, []string{"old"}) {
		t.Fatalf("removed %v %v, want old", removed, err)
	}
	if _, err := exps.Get(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("old experiment: %v, want deleted", err)
	}
	if runs, _ := exps.FinishedRuns(ctx, "old"); len(runs) != 0 {
		t.Errorf("old experiment's runs kept: %v", runs)
	}
	if _, err := items.Get(ctx, "old.t1.A.0"); !errors.Is(err, workitems.ErrNotFound) {
		t.Errorf("old experiment's item: %v, want deleted", err)
	}
	for _, id := range []string{"recent", "busy", "running"} {
		if _, err := exps.Get(ctx, id); err != nil {
			t.Errorf("%s: %v, want kept", id, err)
		}
	}
	if _, err := items.Get(ctx, "busy.t1.A.0"); err != nil {
		t.Errorf("a running item of an expired experiment: %v, want kept", err)
	}
	page, total, _ := exps.List(ctx, 0, 10)
	if total != 3 || len(page) != 3 {
		t.Errorf("listed %d of %d after the pass, want 3 of 3", len(page), total)
	}
}

// TestTheJanitorFindsExperimentsThatEndedBeforeTheEndedIndexExisted: an ended experiment the
// ended index lacks (written by an older binary) is indexed by the janitor's first pass and
// deleted once its retention passed.
func TestTheJanitorFindsExperimentsThatEndedBeforeTheEndedIndexExisted(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	exps := NewStore(env.Client, env.Prefix)
	items := itemstore.NewStore(env.Client, ItemPrefix(env.Prefix))
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := exps.Create(ctx, experiment("old", now.AddDate(0, 0, -100), "t1")); err != nil {
		t.Fatal(err)
	}
	if _, err := exps.End(ctx, "old", StateFinished, "", now.AddDate(0, 0, -99)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.ZRem(ctx, exps.k.ended(), "old").Err(); err != nil { // as an older binary left it
		t.Fatal(err)
	}
	j := NewJanitor(JanitorOptions{Exps: exps, Items: items, Retention: 90 * 24 * time.Hour, Clock: fakeclock.New(now)})
	removed, err := j.Run(ctx, false)
	if err != nil || !slices.Equal(removed, []string{"old"}) {
		t.Fatalf("removed %v %v, want old", removed, err)
	}
}
