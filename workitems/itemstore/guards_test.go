package itemstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/redistest"
	"outerloop/workitems"
)

// TestEachNamedTransitionAgainstEveryState runs every named store operation on an item in
// each state (river's "DoesNotCompleteARunningJob" style). From the sources listed here it moves
// the item; from any other state it is refused with a *RefusedError naming the operation and
// the state (MarkQueued: a silent no-op), and every key of the store — the item record, the
// state and template indexes, the event streams — is byte for byte what it was.
func TestEachNamedTransitionAgainstEveryState(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	ctx := context.Background()
	type op struct {
		name  string
		op    workitems.Op
		moves map[workitems.State]workitems.State // allowed source → resulting state
		noop  bool                                // refusal is silent (nil error, nothing changed)
		run   func(s *Store, id string, f *Fence) error
	}
	base := workitems.WorkspaceBase{Kind: workitems.BaseKind("git"), Commit: "c0ffee", Tree: "7ree"}
	ops := []op{
		// StartAttempt starts a queued attempt (OpStart) or resumes a running or verifying one
		// (OpResume); it is refused as OpStart.
		{"StartAttempt", workitems.OpStart, map[workitems.State]workitems.State{workitems.StateQueued: workitems.StateRunning, workitems.StateRunning: workitems.StateRunning, workitems.StateVerifying: workitems.StateVerifying}, false,
			func(s *Store, id string, f *Fence) error { _, _, err := s.StartAttempt(ctx, f, "w"); return err }},
		{"RecordWorkspace", workitems.OpRecordWorkspace, map[workitems.State]workitems.State{workitems.StateRunning: workitems.StateRunning}, false,
			func(s *Store, id string, f *Fence) error { _, err := s.RecordWorkspace(ctx, f, base, ""); return err }},
		{"RecordExit", workitems.OpExit, map[workitems.State]workitems.State{workitems.StateRunning: workitems.StateVerifying}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 1}, "", false)
				return err
			}},
		{"RecordDecision", workitems.OpDecide, map[workitems.State]workitems.State{workitems.StateVerifying: workitems.StateClosed}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.RecordDecision(ctx, f, workitems.Decision{Outcome: workitems.OutcomeClose, Actor: "verifier"}, nil)
				return err
			}},
		{"RecordDelivery", workitems.OpDecide, map[workitems.State]workitems.State{workitems.StateVerifying: workitems.StateEscalated}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.RecordDelivery(ctx, f, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "r", Actor: "verifier"}, nil, nil, nil)
				return err
			}},
		{"Wake", workitems.OpWake, map[workitems.State]workitems.State{workitems.StateWaiting: workitems.StateClosed}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.Wake(ctx, id, 1, workitems.WakePoll, workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "checks_passed", Actor: "verifier"}, nil)
				return err
			}},
		{"MarkQueued", workitems.OpMarkQueued, map[workitems.State]workitems.State{workitems.StateRetryWait: workitems.StateQueued}, true,
			func(s *Store, id string, f *Fence) error { _, err := s.MarkQueued(ctx, id, 1); return err }},
		{"ResolveClose", workitems.OpResolveClose, map[workitems.State]workitems.State{workitems.StateEscalated: workitems.StateClosed}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, workitems.Resolution{Action: workitems.ResolveClose, Actor: "p"})
				return err
			}},
		{"ResolveRetry", workitems.OpResolveRetry, map[workitems.State]workitems.State{workitems.StateWaiting: workitems.StateQueued, workitems.StateEscalated: workitems.StateQueued}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, workitems.Resolution{Action: workitems.ResolveRetry, Actor: "p", Input: "try the other fix"})
				return err
			}},
		{"ResolveCancel", workitems.OpCancel, map[workitems.State]workitems.State{workitems.StateQueued: workitems.StateCancelled, workitems.StateRunning: workitems.StateCancelled, workitems.StateVerifying: workitems.StateCancelled,
			workitems.StateWaiting: workitems.StateCancelled, workitems.StateRetryWait: workitems.StateCancelled, workitems.StateEscalated: workitems.StateCancelled}, false,
			func(s *Store, id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, workitems.Resolution{Action: workitems.ResolveCancel, Actor: "p"})
				return err
			}},
		{"Fail", workitems.OpFail, map[workitems.State]workitems.State{workitems.StateQueued: workitems.StateFailed, workitems.StateRunning: workitems.StateFailed, workitems.StateVerifying: workitems.StateFailed, workitems.StateWaiting: workitems.StateFailed}, false,
			func(s *Store, id string, f *Fence) error { _, err := s.Fail(ctx, id, nil, "template gone"); return err }},
	}
	for _, o := range ops {
		// The operation's sources come from the one edge table; this test's list is the spec.
		want := []workitems.State{}
		for _, st := range workitems.AllStates() {
			if _, ok := o.moves[st]; ok {
				want = append(want, st)
			}
		}
		got := o.op.Sources()
		if o.op == workitems.OpStart {
			got = append(got, workitems.OpResume.Sources()...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the edge table gives sources %v, want %v", o.op, got, want)
		}
		for _, from := range workitems.AllStates() {
			to, allowed := o.moves[from]
			verb := "DoesNot" + o.name
			if allowed {
				verb = o.name + "s"
			}
			t.Run(fmt.Sprintf("%s an item %s", verb, from), func(t *testing.T) {
				t.Parallel()
				id := "it"
				s := NewStore(env.Client, fmt.Sprintf("%s%s-%s:", env.Prefix, o.name, from))
				it := &workitems.Item{ID: id, Template: "tmpl", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "t"},
					Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
				if err := s.Create(ctx, it, CreateLimits{}); err != nil {
					t.Fatal(err)
				}
				// Seed the state directly: the operation under test is the only edge taken.
				if _, err := s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
					it.State = from
					if from == workitems.StateWaiting {
						it.Wait = &workitems.Wait{Kind: workitems.WaitCI, Seq: 1, Attempt: 1, SHA: "5ha", Forge: "f", Repo: "o/r", PR: 7}
					}
					return nil, nil
				}); err != nil {
					t.Fatal(err)
				}
				f, err := s.AcquireLease(ctx, id, 1, "w", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				before := dumpKeys(t, env.Client, s.Prefix())
				err = o.run(s, id, f)
				got, gerr := s.Get(ctx, id)
				if gerr != nil {
					t.Fatal(gerr)
				}
				if allowed {
					if err != nil || got.State != to {
						t.Fatalf("from %s: state %s err %v, want %s", from, got.State, err, to)
					}
					return
				}
				var refused *workitems.RefusedError
				switch {
				case o.noop && err != nil:
					t.Fatalf("from %s: %v, want a silent no-op", from, err)
				case !o.noop && (!errors.As(err, &refused) || refused.Op != o.op || refused.State != from):
					t.Fatalf("from %s: %v, want a *RefusedError of %s in %s", from, err, o.op, from)
				case !o.noop && !errors.Is(err, workitems.ErrInvalidTransition):
					t.Fatalf("from %s: %v does not match ErrInvalidTransition", from, err)
				}
				if after := dumpKeys(t, env.Client, s.Prefix()); after != before {
					t.Fatalf("a refused %s changed the store:\nbefore:\n%s\nafter:\n%s", o.name, before, after)
				}
			})
		}
	}
}

// TestEveryEdgeHasOneOperation checks the labelled table: Transition accepts exactly its
// state-changing edges, and every operation has at least one edge.
func TestEveryEdgeHasOneOperation(t *testing.T) {
	t.Parallel()
	seen := map[[2]workitems.State]workitems.Op{}
	for _, e := range workitems.Edges() {
		if e.From == e.To {
			if _, err := workitems.Transition(e.From, e.To); err == nil {
				t.Errorf("Transition accepts the state-keeping edge %s of %s", e.From, e.Op)
			}
			continue
		}
		if _, err := workitems.Transition(e.From, e.To); err != nil {
			t.Errorf("edge %s→%s of %s refused by Transition: %v", e.From, e.To, e.Op, err)
		}
		if prev, ok := seen[[2]workitems.State{e.From, e.To}]; ok {
			t.Errorf("edge %s→%s labelled twice: %s and %s", e.From, e.To, prev, e.Op)
		}
		seen[[2]workitems.State{e.From, e.To}] = e.Op
	}
	for _, op := range workitems.AllOps() {
		if len(op.Sources()) == 0 {
			t.Errorf("operation %s has no edge", op)
		}
	}
}

// TestAFencedOutWorkerWritesNoEvent: once another execution took the attempt over, EmitFenced
// with the old fence writes nothing to the item's or the deployment's log and says why.
func TestAFencedOutWorkerWritesNoEvent(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	ctx := context.Background()
	s := NewStore(env.Client, env.Prefix)
	it := &workitems.Item{ID: "ev", Template: "tmpl", Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "t"}}
	if err := s.Create(ctx, it, CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	old, err := s.AcquireLease(ctx, "ev", 1, "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EmitFenced(ctx, old, workitems.Event{Type: workitems.EventStep, Attempt: 1, Message: "A's step while it holds the lease"}); err != nil {
		t.Fatalf("the holder's event: %v", err)
	}
	if err := s.ReleaseLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(ctx, "ev", 1, "B", time.Minute); err != nil {
		t.Fatal(err)
	}
	before := dumpKeys(t, env.Client, env.Prefix)
	err = s.EmitFenced(ctx, old, workitems.Event{Type: workitems.EventStep, Attempt: 1, Message: "A's step after B took over"})
	if !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("fenced-out event: %v, want ErrLeaseLost", err)
	}
	if after := dumpKeys(t, env.Client, env.Prefix); after != before {
		t.Fatalf("a fenced-out event changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	evs, err := s.Events(ctx, "ev", "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range evs {
		if e.Type == workitems.EventStep {
			steps = append(steps, e.Message)
		}
	}
	if !slices.Equal(steps, []string{"A's step while it holds the lease"}) {
		t.Fatalf("step events %q", steps)
	}
}

// dumpKeys renders every key under prefix with its type and value, sorted, so two dumps are
// equal exactly when nothing under the prefix changed (TTLs are not compared).
func dumpKeys(t *testing.T, c *redis.Client, prefix string) string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		typ, err := c.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, k).Result()
			sort.Strings(m)
			v = m
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %v\n", strings.TrimPrefix(k, prefix), typ, v)
	}
	return b.String()
}
