package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/notify"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// BenchmarkEscalation measures the store's escalate transition (RecordDecision) on real Redis
// without the outbox hook (baseline) and with it queueing to two sinks, in the same run: the
// cost of the notification riding in the transition's MULTI.
func BenchmarkEscalation(b *testing.B) {
	for _, withHook := range []bool{false, true} {
		name := "baseline"
		if withHook {
			name = "with-outbox-2-sinks"
		}
		b.Run(name, func(b *testing.B) {
			cfg, err := config.ParseConfig([]byte(`
notify:
  sinks:
    hook: {kind: webhook, url: "https://hooks.example.com", secret_env: X}
    chat: {kind: slack, url: "https://chat.example.com"}
defaults:
  budget: {wall_time: 10m}
templates:
  - name: nightly
    goal: g
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`))
			if err != nil {
				b.Fatal(err)
			}
			env := redistest.New(b)
			clock := fakeclock.New(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
			opts := []itemstore.StoreOption{itemstore.WithClock(clock)}
			if withHook {
				ob := notify.NewOutbox(env.Client, env.Prefix, cfg, clock, nil)
				opts = append(opts, itemstore.WithTransitionHook(ob.TransitionHook()))
			}
			st := itemstore.NewStore(env.Client, env.Prefix, opts...)
			ctx := context.Background()
			fences := make([]*itemstore.Fence, b.N)
			for i := range b.N {
				id := fmt.Sprintf("nightly@%d", i)
				if err := st.Create(ctx, &workitems.Item{ID: id, Template: "nightly", Goal: "g", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
					b.Fatal(err)
				}
				f, err := st.AcquireLease(ctx, id, 1, "w", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := st.StartAttempt(ctx, f, "w"); err != nil {
					b.Fatal(err)
				}
				if _, err := st.RecordExit(ctx, f, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
					b.Fatal(err)
				}
				fences[i] = f
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := st.RecordDecision(ctx, fences[i], workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "r", Summary: "s"}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
