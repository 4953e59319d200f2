package benchmark

import (
	"testing"

	"outerloop/internal/redistest"
)

func env(b *testing.B) Env {
	e := redistest.New(b)
	return Env{Redis: e.Client, Asynq: redistest.AsynqOpt(b), Prefix: e.Prefix, Queue: e.Queue}
}

// Run the pairs together: go test -bench . -run XXX ./internal/benchmark/
func BenchmarkRawRedisRoundTrip(b *testing.B) { RawRoundTrip(b, env(b)) }
func BenchmarkCheckpointWrite(b *testing.B)   { CheckpointWrite(b, env(b)) }
func BenchmarkRawAsynqTask(b *testing.B)      { RawAsynq(b, env(b)) }
func BenchmarkOuterloopItem(b *testing.B)     { Item(b, env(b)) }

// TestItemBenchmarkCompletes runs the end-to-end pair once as a test so that a broken benchmark
// fails CI instead of hanging the next person's `bench`.
func TestItemBenchmarkCompletes(t *testing.T) {
	e := redistest.New(t)
	en := Env{Redis: e.Client, Asynq: redistest.AsynqOpt(t), Prefix: e.Prefix, Queue: e.Queue}
	for _, f := range []func(*testing.B, Env){Item, RawAsynq} {
		r := testing.Benchmark(func(b *testing.B) { f(b, en) })
		if r.N < 1 {
			t.Fatal("benchmark did not run")
		}
	}
}
