package publish

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/lib/redistest"
)

// The ledger's cost per publish against its baseline, raw Redis on the same server: a read is
// one HGETALL of a hash of at most MaxPushedKept+2 fields, a recorded push one script.
func BenchmarkBranchLedger(b *testing.B) {
	env := redistest.New(b)
	ledger := NewRedisBranches(env.Client, env.Prefix, time.Hour, nil)
	ctx := context.Background()
	k := BranchKey{Forge: "tea", Repo: "acme/calc", Branch: "outerloop/bump"}
	for i := range MaxPushedKept {
		if err := ledger.Pushing(ctx, k, fmt.Sprintf("%040x", i)); err != nil {
			b.Fatal(err)
		}
	}
	raw := env.Prefix + "bench:raw"
	for i := range MaxPushedKept {
		env.Client.HSet(ctx, raw, fmt.Sprintf("p:%040x", i), i)
	}
	b.Run("read/raw-hgetall", func(b *testing.B) {
		for b.Loop() {
			if err := env.Client.HGetAll(ctx, raw).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read/ledger", func(b *testing.B) {
		for b.Loop() {
			if _, err := ledger.Branch(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("push/raw-hset", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := env.Client.HSet(ctx, raw, fmt.Sprintf("p:%040x", i%MaxPushedKept), i).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("push/ledger", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := ledger.Pushing(ctx, k, fmt.Sprintf("%040x", i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
