package itemstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// TestARetriedCheckpointWriteIsAppliedOnce: a write retried with its token (its reply was lost
// after Redis ran it) appends its history once and takes its steer input once; the next write,
// with a new token, appends again; a write without a token is not deduplicated.
func TestARetriedCheckpointWriteIsAppliedOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_ = s.Create(ctx, newItem("tok"), itemstore.CreateLimits{})
	for _, in := range []string{"a", "b", "c"} {
		_ = s.Steer(ctx, "tok", in, "t")
	}
	f, err := s.AcquireLease(ctx, "tok", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	first := itemstore.CheckpointWrite{State: []byte(`{"next":1}`), History: [][]byte{[]byte("step 1")}, SteerTaken: 1,
		Token: itemstore.CheckpointToken(f, 1), Charge: &itemstore.Charge{Template: "tmpl", Spend: workitems.Spend{CostUSD: 0.5}}}
	var charged []itemstore.Charged
	for range 3 { // the write and two retries of it
		c, err := s.WriteChargedCheckpoint(ctx, f, first)
		if err != nil {
			t.Fatal(err)
		}
		charged = append(charged, c)
	}
	hist := func() string {
		_, h, err := s.LoadCheckpoint(ctx, "tok", 1)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q", h)
	}
	if got := hist(); got != `["step 1"]` {
		t.Fatalf("history after a write and two retries of it: %s, want one entry", got)
	}
	if got, _ := s.PeekSteer(ctx, "tok", 0); fmt.Sprint(got) != "[b c]" {
		t.Fatalf("steer queue after a write taking one input and two retries: %v, want [b c]", got)
	}
	if charged[0].Delta.CostUSD != 0.5 || charged[1].Delta.CostUSD != 0 || charged[2].Total.CostUSD != 0.5 {
		t.Fatalf("charges of the write and its retries: %+v, want 0.5 once", charged)
	}
	second := itemstore.CheckpointWrite{State: []byte(`{"next":2}`), History: [][]byte{[]byte("step 2")}, Token: itemstore.CheckpointToken(f, 2)}
	if err := s.WriteCheckpoint(ctx, f, second); err != nil {
		t.Fatal(err)
	}
	if got := hist(); got != `["step 1" "step 2"]` {
		t.Fatalf("history after the next write: %s", got)
	}
	if st, _, _ := s.LoadCheckpoint(ctx, "tok", 1); string(st) != `{"next":2}` {
		t.Fatalf("state after the next write: %s", st)
	}
	// A retry of the first write arriving after the second would be a writer bug; what must
	// hold is that an untokened write (the benchmark's, an older caller's) appends every time.
	plain := itemstore.CheckpointWrite{State: []byte(`{}`), History: [][]byte{[]byte("x")}}
	for range 2 {
		if err := s.WriteCheckpoint(ctx, f, plain); err != nil {
			t.Fatal(err)
		}
	}
	if got := hist(); got != `["step 1" "step 2" "x" "x"]` {
		t.Fatalf("history after two untokened writes: %s", got)
	}
	// The token of another execution (a new epoch) is a different write.
	_ = s.ReleaseLease(ctx, f)
	g, err := s.AcquireLease(ctx, "tok", 1, "w2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if itemstore.CheckpointToken(g, 1) == itemstore.CheckpointToken(f, 1) {
		t.Fatalf("two executions share token %s", itemstore.CheckpointToken(g, 1))
	}
}
