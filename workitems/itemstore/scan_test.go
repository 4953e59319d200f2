package itemstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// TestScanStateWalksOldestFirstThroughTies pages through a state whose items share creation
// times (several created in the same millisecond): each is seen exactly once, oldest first,
// whatever the page size.
func TestScanStateWalksOldestFirstThroughTies(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	clock := fakeclock.New(time.UnixMilli(1_000_000))
	s := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	var want []string
	for i := range 7 {
		if i%3 == 0 { // groups of three share a creation time
			clock.Advance(time.Second)
		}
		id := fmt.Sprintf("s%d", i)
		if err := s.Create(ctx, newItem(id), itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	for _, page := range []int{1, 2, 3, 100} {
		var got []string
		err := s.ScanState(ctx, workitems.StateQueued, page, func(items []*workitems.Item) error {
			for _, it := range items {
				got = append(got, it.ID)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("page %d: scanned %v, want each once oldest first %v", page, got, want)
		}
	}
	var none int
	if err := s.ScanState(ctx, workitems.StateRunning, 2, func(items []*workitems.Item) error { none += len(items); return nil }); err != nil || none != 0 {
		t.Fatalf("an empty state: %d items, %v", none, err)
	}
}
