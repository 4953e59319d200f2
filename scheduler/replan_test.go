package scheduler_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/workitems/config"
)

// A replan (config reload) starts an added template's schedule and stops a removed one's,
// while an unchanged schedule keeps ticking without a repeated or a missed tick.
func TestReplanAddsAndRemovesSchedules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	onlyTemplate(f.cfg, "every-minute")
	c := fakeclock.New(time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC))
	log := newTickLog()
	replans := make(chan int, 4)
	q := f.newQueue(t, c)
	s, err := scheduler.New(q, scheduler.Options{Clock: c, OnTick: log.add, OnReplan: func(n int) { replans <- n }})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	t.Cleanup(s.Shutdown)
	if r := log.await(t, 1)[0]; r.Item != "every-minute@20261129T100000Z" {
		t.Fatalf("first tick %+v", r)
	}

	// Reload: a second every-minute template is added.
	next, err := config.ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	onlyTemplate(next, "every-minute")
	added := next.Templates[0]
	added.Name = "added"
	next.Templates = append(next.Templates, added)
	q.SetConfig(next)
	if err := s.Replan(next); err != nil {
		t.Fatal(err)
	}
	awaitReplan(t, replans, 2)
	c.BlockUntil(1, nil)
	c.Advance(time.Minute)
	got := items(log.await(t, 2))
	if want := []string{"added@20261129T100100Z", "every-minute@20261129T100100Z"}; !equal(got, want) {
		t.Fatalf("ticks after the reload: %v, want %v", got, want)
	}

	// Reload: every-minute is removed.
	only := &config.Config{Templates: []config.Template{added}}
	q.SetConfig(only)
	if err := s.Replan(only); err != nil {
		t.Fatal(err)
	}
	awaitReplan(t, replans, 1)
	c.BlockUntil(1, nil)
	c.Advance(time.Minute)
	if got := items(log.await(t, 1)); !equal(got, []string{"added@20261129T100200Z"}) {
		t.Fatalf("ticks after removing every-minute: %v", got)
	}
	if _, ok := s.NextRun("every-minute"); ok {
		t.Fatal("a removed template still has a next run")
	}
	select {
	case r := <-log.ch:
		t.Fatalf("unexpected tick %+v", r)
	default:
	}
}

func awaitReplan(t *testing.T, ch <-chan int, want int) {
	t.Helper()
	select {
	case n := <-ch:
		if n != want {
			t.Fatalf("replan with %d schedules, want %d", n, want)
		}
	case <-testwait.After(t):
		t.Fatal("replan not applied")
	}
}

func items(rs []scheduler.TickResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Item)
	}
	sort.Strings(out)
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
