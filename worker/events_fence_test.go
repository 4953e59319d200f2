package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"outerloop/workitems"
)

// TestALoopsEventsStopAtTheTakeover: the sink the handler gives a loop writes its events under
// the attempt's fence, so once another execution took the attempt over, the old execution's
// step events are dropped instead of landing in the item's log beside the new holder's.
func TestALoopsEventsStopAtTheTakeover(t *testing.T) {
	t.Parallel()
	st, _, old := heartbeatFixture(t, "sink-fenced")
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sinkA := &storeSink{store: st, fence: old, item: old.Item, attempt: old.Attempt, log: log}
	sinkA.Emit(ctx, workitems.Event{Message: "A before"})
	if err := st.ReleaseLease(ctx, old); err != nil {
		t.Fatal(err)
	}
	newer, err := st.AcquireLease(ctx, old.Item, 1, "B", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sinkB := &storeSink{store: st, fence: newer, item: old.Item, attempt: 1, log: log}
	sinkA.Emit(ctx, workitems.Event{Message: "A after the takeover"})
	sinkB.Emit(ctx, workitems.Event{Message: "B"})
	evs, err := st.Events(ctx, old.Item, "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range evs {
		if e.Type == workitems.EventStep {
			steps = append(steps, e.Message)
		}
	}
	if len(steps) != 2 || steps[0] != "A before" || steps[1] != "B" {
		t.Fatalf("step events %q, want A's before the takeover and B's", steps)
	}
}
