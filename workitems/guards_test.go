package workitems

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"outerloop/internal/redistest"
)

// TestEachNamedTransitionAgainstEveryState runs every named store operation on an item in
// each state (river's "DoesNotCompleteARunningJob" style): it moves the item only from the
// sources listed here, and from any other state it is refused (or, for MarkQueued, a no-op)
// and leaves the item as it was.
func TestEachNamedTransitionAgainstEveryState(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	s := NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	type op struct {
		name  string
		moves map[State]State // allowed source → resulting state
		noop  bool            // refusal is silent (nil error, nothing changed)
		run   func(id string, f *Fence) error
	}
	ops := []op{
		{"StartAttempt", map[State]State{StateQueued: StateRunning, StateRunning: StateRunning, StateVerifying: StateVerifying}, false,
			func(id string, f *Fence) error { _, _, err := s.StartAttempt(ctx, f, "w"); return err }},
		{"RecordExit", map[State]State{StateRunning: StateVerifying}, false,
			func(id string, f *Fence) error {
				_, err := s.RecordExit(ctx, f, Exit{Reason: ExitCompleted}, Spend{}, "", false)
				return err
			}},
		{"RecordDecision", map[State]State{StateVerifying: StateClosed}, false,
			func(id string, f *Fence) error {
				_, err := s.RecordDecision(ctx, f, Decision{Outcome: OutcomeClose, Actor: "verifier"}, nil)
				return err
			}},
		{"MarkQueued", map[State]State{StateRetryWait: StateQueued}, true,
			func(id string, f *Fence) error { _, err := s.MarkQueued(ctx, id, 1); return err }},
		{"ResolveClose", map[State]State{StateEscalated: StateClosed}, false,
			func(id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, Resolution{Action: ResolveClose, Actor: "p"})
				return err
			}},
		{"ResolveRetry", map[State]State{StateEscalated: StateQueued}, false,
			func(id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, Resolution{Action: ResolveRetry, Actor: "p", Input: "try the other fix"})
				return err
			}},
		{"ResolveCancel", map[State]State{StateQueued: StateCancelled, StateRunning: StateCancelled, StateVerifying: StateCancelled,
			StateRetryWait: StateCancelled, StateEscalated: StateCancelled}, false,
			func(id string, f *Fence) error {
				_, err := s.Resolve(ctx, id, Resolution{Action: ResolveCancel, Actor: "p"})
				return err
			}},
		{"Fail", map[State]State{StateQueued: StateFailed, StateRunning: StateFailed, StateVerifying: StateFailed}, false,
			func(id string, f *Fence) error { _, err := s.Fail(ctx, id, nil, "template gone"); return err }},
	}
	for _, o := range ops {
		for _, from := range AllStates() {
			to, allowed := o.moves[from]
			verb := "Does not " + o.name
			if allowed {
				verb = o.name + "s"
			}
			t.Run(fmt.Sprintf("%s an item %s", verb, from), func(t *testing.T) {
				t.Parallel()
				id := o.name + "-" + string(from)
				it := &Item{ID: id, Template: "tmpl", Goal: "g", Origin: Origin{Kind: OriginManual, Actor: "t"},
					Budget: Budget{WallTime: Duration(time.Minute)}, MaxAttempts: 3}
				if err := s.Create(ctx, it, CreateLimits{}); err != nil {
					t.Fatal(err)
				}
				// Seed the state directly: the operation under test is the only edge taken.
				if _, err := s.Update(ctx, id, nil, func(it *Item) ([]Event, error) { it.State = from; return nil, nil }); err != nil {
					t.Fatal(err)
				}
				f, err := s.AcquireLease(ctx, id, 1, "w", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				err = o.run(id, f)
				got, gerr := s.Get(ctx, id)
				if gerr != nil {
					t.Fatal(gerr)
				}
				switch {
				case allowed && (err != nil || got.State != to):
					t.Fatalf("from %s: state %s err %v, want %s", from, got.State, err, to)
				case !allowed && got.State != from:
					t.Fatalf("from %s the item moved to %s", from, got.State)
				case !allowed && o.noop && err != nil:
					t.Fatalf("from %s: %v, want a silent no-op", from, err)
				case !allowed && !o.noop && !errors.Is(err, ErrInvalidTransition) && !errors.Is(err, ErrStale):
					t.Fatalf("from %s: %v, want ErrInvalidTransition or ErrStale", from, err)
				}
			})
		}
	}
}
