package itemstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// indexFixture: six items over two templates, in several states, with distinct spends.
func indexFixture(t *testing.T) (*itemstore.Store, *redistest.Env, func(itemstore.ListOptions) string) {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	// id: template, end state, cost
	plan := []struct {
		tmpl  string
		state workitems.State
		cost  float64
	}{
		{"a", workitems.StateCancelled, 0.3}, {"b", workitems.StateRunning, 2}, {"a", workitems.StateRunning, 0.1},
		{"a", workitems.StateCancelled, 5}, {"b", workitems.StateCancelled, 1}, {"a", workitems.StateQueued, 0},
	}
	for i, p := range plan {
		clock.Advance(time.Minute)
		it := newItem(fmt.Sprintf("i%d", i))
		it.Template = p.tmpl
		if err := s.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, it.ID, nil, func(it *workitems.Item) ([]workitems.Event, error) {
			it.Spend.CostUSD = p.cost
			if p.state == workitems.StateQueued {
				return nil, nil
			}
			return nil, it.SetState(p.state)
		}); err != nil {
			t.Fatal(err)
		}
	}
	return s, env, func(o itemstore.ListOptions) string {
		t.Helper()
		items, err := s.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.ID)
		}
		return strings.Join(out, ",")
	}
}

var indexCases = map[string]struct {
	o    itemstore.ListOptions
	want string
}{
	"newest":                    {itemstore.ListOptions{}, "i5,i4,i3,i2,i1,i0"},
	"oldest page":               {itemstore.ListOptions{Sort: itemstore.SortOldest, Limit: 2, Offset: 1}, "i1,i2"},
	"spend":                     {itemstore.ListOptions{Sort: itemstore.SortSpend}, "i3,i1,i4,i0,i2,i5"},
	"state":                     {itemstore.ListOptions{State: workitems.StateCancelled}, "i4,i3,i0"},
	"state page":                {itemstore.ListOptions{State: workitems.StateCancelled, Limit: 1, Offset: 1}, "i3"},
	"state oldest":              {itemstore.ListOptions{State: workitems.StateCancelled, Sort: itemstore.SortOldest}, "i0,i3,i4"},
	"state by spend":            {itemstore.ListOptions{State: workitems.StateRunning, Sort: itemstore.SortSpend}, "i1,i2"},
	"template":                  {itemstore.ListOptions{Template: "a"}, "i5,i3,i2,i0"},
	"template by spend":         {itemstore.ListOptions{Template: "a", Sort: itemstore.SortSpend, Limit: 2}, "i3,i0"},
	"state and template":        {itemstore.ListOptions{State: workitems.StateCancelled, Template: "a"}, "i3,i0"},
	"state, template and spend": {itemstore.ListOptions{State: workitems.StateCancelled, Template: "a", Sort: itemstore.SortSpend}, "i3,i0"},
	"a state with none":         {itemstore.ListOptions{State: workitems.StateFailed}, ""},
	"past the end":              {itemstore.ListOptions{State: workitems.StateCancelled, Offset: 3}, ""},
}

func TestEveryFilterAndOrderReadsItsPageFromAnIndex(t *testing.T) {
	t.Parallel()
	s, _, ids := indexFixture(t)
	for name, tc := range indexCases {
		if got := ids(tc.o); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
	ctx := context.Background()
	for o, want := range map[itemstore.ListOptions]int{{}: 6, {State: workitems.StateCancelled}: 3, {Template: "b"}: 2,
		{State: workitems.StateRunning, Template: "a"}: 1} {
		if n, err := s.Count(ctx, o); err != nil || n != want {
			t.Errorf("count %+v: %d, %v, want %d", o, n, err, want)
		}
	}
	if _, err := s.List(ctx, itemstore.ListOptions{Sort: "cheapest"}); err == nil || !strings.Contains(err.Error(), "cheapest") {
		t.Fatalf("unknown sort: %v", err)
	}
}

func TestMigrateIndexesBuildsTheOrderedIndexesOfAnOlderStore(t *testing.T) {
	t.Parallel()
	s, env, ids := indexFixture(t)
	ctx := context.Background()
	// Turn the store into what version 1 wrote: unordered state sets, no ordered indexes.
	var ix []string
	it := env.Client.Scan(ctx, 0, env.Prefix+"ix:*", 1000).Iterator()
	for it.Next(ctx) {
		ix = append(ix, it.Val())
	}
	if len(ix) == 0 {
		t.Fatal("no ordered indexes to remove")
	}
	env.Client.Del(ctx, append(ix, env.Prefix+"index_version")...)
	env.Client.SAdd(ctx, env.Prefix+"state:cancelled", "i0", "i3", "i4")
	if cur, err := s.IndexesCurrent(ctx); err != nil || cur {
		t.Fatalf("an old store reads as current: %v, %v", cur, err)
	}
	if got := ids(itemstore.ListOptions{State: workitems.StateCancelled}); got != "" {
		t.Fatalf("before migrating the state index is empty, got %s", got)
	}
	n, err := s.MigrateIndexes(ctx, 4) // two batches
	if err != nil || n != 6 {
		t.Fatalf("migrated %d, %v", n, err)
	}
	for name, tc := range indexCases {
		if got := ids(tc.o); got != tc.want {
			t.Errorf("after migrating, %s: %s, want %s", name, got, tc.want)
		}
	}
	if env.Client.Exists(ctx, env.Prefix+"state:cancelled").Val() != 0 {
		t.Error("the old state set is left behind")
	}
	if cur, err := s.IndexesCurrent(ctx); err != nil || !cur {
		t.Fatalf("after migrating: current %v, %v", cur, err)
	}
	// Retention finds migrated ended items too.
	due, err := s.DueForDeletion(ctx, config.Retention{}, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	if err != nil || len(due) != 3 {
		t.Fatalf("due after migrating: %v, %v", due, err)
	}
}

func TestEscalationsArePagedOldestFirst(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	env := redistest.New(t)
	s := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock))
	ctx := context.Background()
	for i := range 5 {
		clock.Advance(time.Minute)
		id := fmt.Sprintf("e%d", i)
		if err := s.Create(ctx, newItem(id), itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
			it.Escalation = &workitems.Escalation{At: clock.Now(), Reason: "test"}
			return nil, it.SetState(workitems.StateEscalated)
		}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Escalated(ctx, 1, 2)
	if err != nil || len(page) != 2 || page[0].ID != "e1" || page[1].ID != "e2" {
		t.Fatalf("page 2 of 2: %v, %v", page, err)
	}
	if n, _ := s.EscalatedCount(ctx); n != 5 {
		t.Fatalf("count %d", n)
	}
}

// RecentEnded reads outcomes from the per-template state indexes alone: newest first by
// creation across the ended and escalated states, open items left out, at most n, nothing for
// a template without any.
func TestRecentEndedReadsTheStateIndexesNewestFirst(t *testing.T) {
	t.Parallel()
	s, _, _ := indexFixture(t)
	ctx := context.Background()
	show := func(rs []itemstore.Recent) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID+":"+string(r.State)+"@"+r.CreatedAt.Format("15:04"))
		}
		return strings.Join(out, ",")
	}
	got, err := s.RecentEnded(ctx, []string{"a", "b", "none"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if a := show(got["a"]); a != "i3:cancelled@00:04,i0:cancelled@00:01" {
		t.Errorf("template a: %s", a)
	}
	if b := show(got["b"]); b != "i4:cancelled@00:05" {
		t.Errorf("template b: %s", b)
	}
	if _, ok := got["none"]; ok || len(got) != 2 {
		t.Errorf("templates with outcomes: %v", got)
	}
	one, err := s.RecentEnded(ctx, []string{"a"}, 1)
	if err != nil || show(one["a"]) != "i3:cancelled@00:04" {
		t.Errorf("n=1: %v %v", one, err)
	}
}
