package agentloop

import (
	"context"
	"testing"
	"time"

	"outerloop/lib/redistest"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// BenchmarkStepRedis is BenchmarkStep with the worker's real checkpointer on a real Redis:
// one transition plus one fenced checkpoint write (Lua: epoch check, state, history append).
// Compare with BenchmarkRawRedisRoundTrip from the same run (see BENCHMARKS.md).
func BenchmarkStepRedis(b *testing.B) {
	env := redistest.New(b)
	store := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	if err := store.Create(ctx, &workitems.Item{ID: "bench", Template: "t"}, itemstore.CreateLimits{}); err != nil {
		b.Fatal(err)
	}
	f, err := store.AcquireLease(ctx, "bench", 1, "bench", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	meter := worker.NewMeter(workitems.Budget{}, workitems.Spend{}, nil)
	benchStep(b, worker.NewFencedCheckpointer(store, f, meter, nil))
}

// BenchmarkRawRedisRoundTrip is the baseline: one SET round trip of a checkpoint-sized value.
func BenchmarkRawRedisRoundTrip(b *testing.B) {
	env := redistest.New(b)
	ctx := context.Background()
	val := make([]byte, 600)
	b.ReportAllocs()
	for b.Loop() {
		if err := env.Client.Set(ctx, env.Prefix+"raw", val, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
