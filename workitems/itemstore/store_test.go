package itemstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

func newStore(t *testing.T) (*itemstore.Store, *redistest.Env) {
	t.Helper()
	env := redistest.New(t)
	return itemstore.NewStore(env.Client, env.Prefix), env
}

func newItem(id string) *workitems.Item {
	return &workitems.Item{ID: id, Template: "tmpl", Goal: "fix it", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
		Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
}

func eventTypes(t *testing.T, s *itemstore.Store, id string) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), id, "", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		tag := string(e.Type)
		if e.Type == workitems.EventState {
			tag += ":" + string(e.To)
		}
		out = append(out, tag)
	}
	return out
}

func TestCreateExactlyOneOfConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Create(ctx, newItem("dup@1"), itemstore.CreateLimits{})
		}()
	}
	wg.Wait()
	created := 0
	for _, err := range results {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, workitems.ErrExists):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if created != 1 {
		t.Fatalf("created %d items, want exactly 1", created)
	}
	if got := eventTypes(t, s, "dup@1"); len(got) != 1 || got[0] != "created" {
		t.Fatalf("events = %v, want one created", got)
	}
}

func TestCreateRespectsMaxOpenAndDailyCap(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Create(ctx, newItem("a"), itemstore.CreateLimits{MaxOpen: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, newItem("b"), itemstore.CreateLimits{MaxOpen: 1}); !errors.Is(err, itemstore.ErrMaxOpen) {
		t.Fatalf("second open item: %v, want ErrMaxOpen", err)
	}
	if _, err := s.Get(ctx, "b"); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("a skipped item must not exist: %v", err)
	}
	// Spend $2 on "a" and a cap of $2 refuses the next item.
	f := mustLease(t, s, "a", 1)
	if _, _, err := s.StartAttempt(ctx, f, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 2}, "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, newItem("c"), itemstore.CreateLimits{DailyCostCap: 2}); !errors.Is(err, itemstore.ErrDailyCap) {
		t.Fatalf("over the daily cap: %v, want ErrDailyCap", err)
	}
	if err := s.Create(ctx, newItem("c"), itemstore.CreateLimits{DailyCostCap: 2.5}); err != nil {
		t.Fatalf("under the daily cap: %v", err)
	}
}

func mustLease(t *testing.T, s *itemstore.Store, id string, n int) *itemstore.Fence {
	t.Helper()
	f, err := s.AcquireLease(context.Background(), id, n, "holder-"+t.Name(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFullPathQueuedToClosedWithRetry(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.Create(ctx, newItem("p"), itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	f := mustLease(t, s, "p", 1)
	if _, resumed, err := s.StartAttempt(ctx, f, "w1"); err != nil || resumed {
		t.Fatalf("start: resumed=%v err=%v", resumed, err)
	}
	if _, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 1, Steps: 2}, "/ws", false); err != nil {
		t.Fatal(err)
	}
	next := workitems.Condition{Input: "TestX failed: want 1 got 2"}
	it, err := s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "real_failure", Next: &next, Actor: "verifier"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateRetryWait || it.Attempt != 2 || it.Current().Changed[0] != "input" {
		t.Fatalf("after retry decision: state=%s attempt=%d changed=%v", it.State, it.Attempt, it.Current().Changed)
	}
	if it, err = s.MarkQueued(ctx, "p", 2); err != nil || it.State != workitems.StateQueued {
		t.Fatalf("mark queued: %v %v", it.State, err)
	}
	f2 := mustLease(t, s, "p", 2)
	if _, _, err := s.StartAttempt(ctx, f2, "w2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordExit(ctx, f2, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 0.5}, "/ws2", false); err != nil {
		t.Fatal(err)
	}
	it, err = s.RecordDecision(ctx, f2, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "green", Actor: "verifier"}, &workitems.Verdict{Passed: 3})
	if err != nil || it.State != workitems.StateClosed {
		t.Fatalf("close: %v %v", it.State, err)
	}
	if it.Spend.CostUSD != 1.5 || it.Spend.Steps != 2 {
		t.Fatalf("item spend must add up across attempts: %+v", it.Spend)
	}
	want := []string{"created", "state:running", "attempt_started", "state:verifying", "attempt_exited", "state:retry_wait", "decision", "step",
		"state:queued", "state:running", "attempt_started", "state:verifying", "attempt_exited", "state:closed", "decision"}
	got := eventTypes(t, s, "p")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events\n got %v\nwant %v", got, want)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Items["tmpl"][workitems.StateClosed] != 1 || st.Items["tmpl"][workitems.StateQueued] != 0 {
		t.Fatalf("stats counts: %+v", st.Items)
	}
	if st.DailyCostUSD["tmpl"] != 1.5 || st.LastClosedAt["tmpl"].IsZero() {
		t.Fatalf("stats cost/closed: %+v %+v", st.DailyCostUSD, st.LastClosedAt)
	}
	if n, _ := s.OpenCount(ctx, "tmpl"); n != 0 {
		t.Fatalf("closed item still open: %d", n)
	}
}

// The store enforces what a retry must be and never decides instead: a retry that would run
// exactly as the last attempt, or one past the attempts the item was made with, is refused as an
// invalid transition and changes nothing (the policy's guards escalate such retries before).
func TestARetryTheStoreMustNotTakeIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		max  int
		next *workitems.Condition
	}{
		{"without a next condition", 3, nil},
		{"with an unchanged condition", 3, &workitems.Condition{}},
		{"past max_attempts", 1, &workitems.Condition{Input: "x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newStore(t)
			ctx := context.Background()
			it := newItem("r")
			it.MaxAttempts = c.max
			if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
				t.Fatal(err)
			}
			f := mustLease(t, s, "r", 1)
			_, _, _ = s.StartAttempt(ctx, f, "w")
			before, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "tests_failed", Next: c.next, Actor: "verifier"}, nil)
			if !errors.Is(err, workitems.ErrInvalidTransition) || workitems.ClassOf(err) != workitems.ClassInvariantViolation {
				t.Fatalf("err %v (class %s), want an invalid transition (invariant_violation)", err, workitems.ClassOf(err))
			}
			after, _ := s.Get(ctx, "r")
			if after.State != workitems.StateVerifying || after.Attempt != 1 || len(after.Decisions) != 0 || after.Version != before.Version {
				t.Fatalf("a refused retry changed the item: %s attempt %d, %d decisions, version %d→%d",
					after.State, after.Attempt, len(after.Decisions), before.Version, after.Version)
			}
		})
	}
}

func TestFencedWritesAreRejectedAfterTakeover(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("f"), itemstore.CreateLimits{})
	old, err := s.AcquireLease(ctx, "f", 1, "old", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartAttempt(ctx, old, "old"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(ctx, old, []byte(`{"step":1}`), []byte("h1")); err != nil {
		t.Fatal(err)
	}
	// A live lease of another holder blocks a takeover.
	if _, err := s.AcquireLease(ctx, "f", 1, "new", time.Minute); !errors.Is(err, workitems.ErrLeaseHeld) {
		t.Fatalf("takeover of a live lease: %v, want ErrLeaseHeld", err)
	}
	if err := s.ReleaseLease(ctx, old); err != nil { // as if it expired
		t.Fatal(err)
	}
	nw, err := s.AcquireLease(ctx, "f", 1, "new", time.Minute)
	if err != nil || nw.Epoch != old.Epoch+1 {
		t.Fatalf("takeover: %+v %v", nw, err)
	}
	if _, resumed, err := s.StartAttempt(ctx, nw, "new"); err != nil || !resumed {
		t.Fatalf("new holder resumes: resumed=%v err=%v", resumed, err)
	}
	// Every write of the old holder is refused and changes nothing.
	checks := map[string]error{
		"checkpoint": s.SaveCheckpoint(ctx, old, []byte(`{"step":99}`), []byte("stale")),
		"renew":      s.RenewLease(ctx, old, time.Minute),
	}
	_, checks["exit"] = s.RecordExit(ctx, old, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false)
	_, checks["start"], _ = func() (*workitems.Item, error, bool) {
		it, _, err := s.StartAttempt(ctx, old, "old")
		return it, err, false
	}()
	for name, err := range checks {
		if !errors.Is(err, workitems.ErrLeaseLost) {
			t.Errorf("%s by the old holder: %v, want ErrLeaseLost", name, err)
		}
	}
	state, hist, err := s.LoadCheckpoint(ctx, "f", 1)
	if err != nil || string(state) != `{"step":1}` || len(hist) != 1 || string(hist[0]) != "h1" {
		t.Fatalf("checkpoint after rejected writes: %s %q %v", state, hist, err)
	}
	it, _ := s.Get(ctx, "f")
	if it.State != workitems.StateRunning || it.Current().Epoch != nw.Epoch {
		t.Fatalf("item after rejected writes: %s epoch %d", it.State, it.Current().Epoch)
	}
	// The new holder writes fine.
	if err := s.SaveCheckpoint(ctx, nw, []byte(`{"step":2}`), []byte("h2")); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, nw, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestResolveActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	escalate := func(t *testing.T, s *itemstore.Store, id string) {
		t.Helper()
		_ = s.Create(ctx, newItem(id), itemstore.CreateLimits{})
		f := mustLease(t, s, id, 1)
		_, _, _ = s.StartAttempt(ctx, f, "w")
		_, _ = s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetCostUSD}, workitems.Spend{CostUSD: 5}, "", false)
		if _, err := s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "budget_exhausted", Actor: "verifier"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("retry with input and budget starts a new attempt and keeps spend", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		escalate(t, s, "r")
		it, err := s.Resolve(ctx, "r", workitems.Resolution{Action: "retry", Actor: "alice", Input: "use v2 API",
			Budget: workitems.Budget{CostUSD: 9}})
		if err != nil {
			t.Fatal(err)
		}
		if it.State != workitems.StateQueued || it.Attempt != 2 || it.Spend.CostUSD != 5 || it.Escalation != nil {
			t.Fatalf("after retry: %s attempt %d spend %v", it.State, it.Attempt, it.Spend.CostUSD)
		}
		c := it.Current()
		if c.Condition.Input != "use v2 API" || c.Condition.Budget.CostUSD != 9 || strings.Join(c.Changed, ",") != "input,budget" {
			t.Fatalf("condition: %+v", c.Condition)
		}
		// A double submit must not apply twice.
		if _, err := s.Resolve(ctx, "r", workitems.Resolution{Action: "retry", Actor: "alice", Input: "use v2 API"}); !errors.Is(err, workitems.ErrInvalidTransition) {
			t.Fatalf("second retry: %v", err)
		}
		it, _ = s.Get(ctx, "r")
		if it.Attempt != 2 || len(it.Resolution) != 1 {
			t.Fatalf("double submit applied: attempt %d resolutions %d", it.Attempt, len(it.Resolution))
		}
	})
	t.Run("retry that changes nothing is refused", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		escalate(t, s, "n")
		if _, err := s.Resolve(ctx, "n", workitems.Resolution{Action: "retry", Actor: "bob"}); !errors.Is(err, itemstore.ErrNoChange) {
			t.Fatalf("got %v", err)
		}
		if it, _ := s.Get(ctx, "n"); it.State != workitems.StateEscalated {
			t.Fatalf("refused resolve changed state to %s", it.State)
		}
	})
	t.Run("close and cancel", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		escalate(t, s, "c")
		escalate(t, s, "x")
		if it, err := s.Resolve(ctx, "c", workitems.Resolution{Action: "close", Actor: "carol"}); err != nil || it.State != workitems.StateClosed {
			t.Fatalf("close: %v", err)
		}
		if it, err := s.Resolve(ctx, "x", workitems.Resolution{Action: "cancel", Actor: "carol"}); err != nil || it.State != workitems.StateCancelled || !it.CancelReq {
			t.Fatalf("cancel: %v", err)
		}
		if _, err := s.Resolve(ctx, "x", workitems.Resolution{Action: "close", Actor: "carol"}); !errors.Is(err, workitems.ErrInvalidTransition) {
			t.Fatalf("closing a cancelled item: %v", err)
		}
		if _, err := s.Resolve(ctx, "c", workitems.Resolution{Action: "explode", Actor: "carol"}); err == nil {
			t.Fatal("unknown action accepted")
		}
		if _, err := s.Resolve(ctx, "nope", workitems.Resolution{Action: "close", Actor: "carol"}); !errors.Is(err, workitems.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		esc, _ := s.Escalated(ctx, 0, 0)
		if len(esc) != 0 {
			t.Fatalf("resolved items still escalated: %d", len(esc))
		}
	})
}

func TestSteerQueueDrainsInOrder(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("s"), itemstore.CreateLimits{})
	if err := s.Steer(ctx, "s", "first", "a"); err != nil {
		t.Fatal(err)
	}
	_ = s.Steer(ctx, "s", "second", "a")
	if err := s.Steer(ctx, "s", "  ", "a"); err == nil {
		t.Fatal("empty steer accepted")
	}
	if err := s.Steer(ctx, "missing", "x", "a"); !errors.Is(err, workitems.ErrNotFound) {
		t.Fatalf("steer to a missing item: %v", err)
	}
	got, err := s.PeekSteer(ctx, "s", 0)
	if err != nil || fmt.Sprint(got) != "[first second]" {
		t.Fatalf("peek: %v %v", got, err)
	}
	if got, _ := s.PeekSteer(ctx, "s", 1); fmt.Sprint(got) != "[second]" {
		t.Fatalf("peek from 1: %v", got)
	}
	if got, _ := s.PeekSteer(ctx, "s", 0); len(got) != 2 {
		t.Fatalf("a peek removed input: %v", got)
	}
}

func TestSteerLeavesTheQueueOnlyWithTheCheckpointHoldingIt(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("q"), itemstore.CreateLimits{})
	_ = s.Steer(ctx, "q", "first", "a")
	_ = s.Steer(ctx, "q", "second", "a")
	old, err := s.AcquireLease(ctx, "q", 1, "old", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteCheckpoint(ctx, old, itemstore.CheckpointWrite{State: []byte(`{"input":["first"]}`), SteerTaken: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.PeekSteer(ctx, "q", 0); fmt.Sprint(got) != "[second]" {
		t.Fatalf("after a checkpoint holding one input the queue is %v", got)
	}
	_ = s.ReleaseLease(ctx, old)
	nw, err := s.AcquireLease(ctx, "q", 1, "new", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The fenced-out worker's checkpoint writes nothing and takes nothing from the queue.
	err = s.WriteCheckpoint(ctx, old, itemstore.CheckpointWrite{State: []byte(`{}`), SteerTaken: 1})
	if !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("stale checkpoint: %v, want ErrLeaseLost", err)
	}
	if got, _ := s.PeekSteer(ctx, "q", 0); fmt.Sprint(got) != "[second]" {
		t.Fatalf("a stale checkpoint took steer input: %v", got)
	}
	if err := s.WriteCheckpoint(ctx, nw, itemstore.CheckpointWrite{State: []byte(`{}`), SteerTaken: -1}); err == nil {
		t.Fatal("a negative steer count was accepted")
	}
	if err := s.WriteCheckpoint(ctx, nw, itemstore.CheckpointWrite{State: []byte(`{}`), SteerTaken: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.PeekSteer(ctx, "q", 0); len(got) != 0 {
		t.Fatalf("queue after the second input was checkpointed: %v", got)
	}
}

func TestEventsBlockingReadSeesNewEvent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("e"), itemstore.CreateLimits{})
	first, _ := s.Events(ctx, "e", "", 10, 0)
	done := make(chan []workitems.Event)
	go func() {
		evs, _ := s.Events(ctx, "e", first[len(first)-1].ID, 10, 5*time.Second)
		done <- evs
	}()
	if err := s.Emit(ctx, workitems.Event{Item: "e", Type: workitems.EventStep, Message: "hello"}); err != nil {
		t.Fatal(err)
	}
	evs := <-done
	if len(evs) != 1 || evs[0].Message != "hello" {
		t.Fatalf("blocking read got %+v", evs)
	}
}

func TestListPagesNewestFirstAndFilters(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	for i := range 5 {
		clock.Advance(time.Minute)
		it := newItem(fmt.Sprintf("i%d", i))
		if i%2 == 1 {
			it.Template = "other"
		}
		if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(o itemstore.ListOptions) string {
		items, err := s.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.ID)
		}
		return strings.Join(out, ",")
	}
	for name, tc := range map[string]struct {
		o    itemstore.ListOptions
		want string
	}{
		"first page":         {itemstore.ListOptions{Limit: 2}, "i4,i3"},
		"second page":        {itemstore.ListOptions{Limit: 2, Offset: 2}, "i2,i1"},
		"last page":          {itemstore.ListOptions{Limit: 2, Offset: 4}, "i0"},
		"template":           {itemstore.ListOptions{Template: "other"}, "i3,i1"},
		"template page":      {itemstore.ListOptions{Template: "tmpl", Limit: 2, Offset: 1}, "i2,i0"},
		"state and template": {itemstore.ListOptions{State: workitems.StateQueued, Template: "tmpl", Limit: 1, Offset: 1}, "i2"},
		"past the end":       {itemstore.ListOptions{Offset: 9}, ""},
	} {
		if got := ids(tc.o); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}
