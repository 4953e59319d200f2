package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// BenchmarkHistory reads the first page (20) of a template's history from stores that hold 1k
// and 10k items of that template (and as many of another), against the plain first page of all
// items (List, as GET /api/items) in the same store: History reads only its page, so it stays
// flat as the store grows. Items are made through Store.Create.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			f := newFixture(b)
			c := fakeclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
			q := f.newQueue(b, c)
			for i := range n {
				for _, tmpl := range []string{"manual-only", "limited"} {
					it := &workitems.Item{ID: fmt.Sprintf("%s@%06d", tmpl, i), Template: tmpl, Goal: "g",
						Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 1}
					if err := f.store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.Run("history", func(b *testing.B) {
				for b.Loop() {
					if h, err := q.History(ctx, "manual-only", 0, 20); err != nil || len(h.Items) != 20 {
						b.Fatal(len(h.Items), err)
					}
				}
			})
			b.Run("baseline_list_first_page", func(b *testing.B) {
				for b.Loop() {
					if items, err := f.store.List(ctx, itemstore.ListOptions{Limit: 20}); err != nil || len(items) != 20 {
						b.Fatal(len(items), err)
					}
				}
			})
		})
	}
}
