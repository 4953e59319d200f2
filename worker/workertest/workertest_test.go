package workertest_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"outerloop/worker"
	"outerloop/worker/workertest"
	"outerloop/workitems"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The doubles are what the worker hands an inner loop.
var (
	_ worker.Checkpointer = (*workertest.Checkpoints)(nil)
	_ worker.EventSink    = (*workertest.Events)(nil)
)

// TestCheckpointsKeepTheLastStateUntilTheLeaseIsLost saves twice, then is fenced out: the third
// save fails with ErrLeaseLost and changes nothing.
func TestCheckpointsKeepTheLastStateUntilTheLeaseIsLost(t *testing.T) {
	ctx := context.Background()
	c := workertest.NewCheckpoints([]byte("resumed"))
	c.LoseAt = 3
	if st, _, _ := c.Load(ctx); string(st) != "resumed" {
		t.Fatalf("initial state %q", st)
	}
	for _, s := range []string{"one", "two"} {
		if err := c.Save(ctx, []byte(s), []byte("h-"+s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Save(ctx, []byte("three"), []byte("h-three")); !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("third save: %v, want ErrLeaseLost", err)
	}
	st, h, _ := c.Load(ctx)
	if string(st) != "two" || string(c.State()) != "two" || c.Saves() != 2 || len(h) != 2 || string(h[1]) != "h-two" || len(c.History()) != 2 {
		t.Fatalf("after the loss: state %q, %d saves, history %q", st, c.Saves(), h)
	}
}

func TestEventsRecordInOrder(t *testing.T) {
	var e workertest.Events
	for _, k := range []string{"a", "b"} {
		e.Emit(context.Background(), workitems.Event{Type: workitems.EventStep, Data: map[string]string{"kind": k}})
	}
	if got := e.Kinds(); !slices.Equal(got, []string{"a", "b"}) || len(e.All()) != 2 {
		t.Fatalf("kinds %v", got)
	}
}
