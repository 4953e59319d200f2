package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const capYAML = `
defaults:
  budget: {wall_time: 10m}
forges:
  gitea: {kind: gitea, base_url: "https://gitea.example.com"}
templates:
  - name: fix-ci
    max_per_hour: 2
    goal: make main green
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - {forge: gitea, event: check_failed, repo: acme/payments, branch: main}
`

func shaN(i int) string { return fmt.Sprintf("%040x", i+1) }

func TestMaxPerHourCapsTheForgesTriggersAndCountsOnlyItemsMade(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(capYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	clock := fakeclock.New(time.Date(2026, 12, 7, 10, 30, 0, 0, time.UTC))
	replica := func() *scheduler.Triggers {
		c := asynq.NewClient(redistest.AsynqOpt(t))
		t.Cleanup(func() { _ = c.Close() })
		q := scheduler.NewQueue(store, c, nil, cfg, scheduler.QueueOptions{Queue: env.Queue, Clock: clock})
		return scheduler.NewTriggers(q, q.Config, nil)
	}
	fired := &firings{}
	a, b := replica().WithObserver(fired), replica().WithObserver(fired)

	// Six commits fail at once on two replicas: two items, four capped.
	var wg sync.WaitGroup
	for i := range 6 {
		tr := a
		if i%2 == 1 {
			tr = b
		}
		wg.Go(func() { mustTrigger(t, tr, failing(shaN(i), "main", "ci/test")) })
	}
	wg.Wait()
	its, err := store.List(context.Background(), itemstore.ListOptions{Template: "fix-ci"})
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != 2 {
		t.Fatalf("%d items, want 2 (max_per_hour: 2)", len(its))
	}
	count := func(r workitems.TriggerResult) int {
		fired.mu.Lock()
		defer fired.mu.Unlock()
		n := 0
		for _, g := range fired.got {
			if g == "fix-ci/forge/"+string(r) {
				n++
			}
		}
		return n
	}
	if count(workitems.TriggerMade) != 2 || count(workitems.TriggerCapped) != 4 {
		t.Errorf("firings %v, want 2 made and 4 capped", fired.got)
	}
	// A repeat of a made item is a duplicate, not capped.
	for i := range 6 {
		if workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/payments", shaN(i)) == its[0].ID {
			mustTrigger(t, a, failing(shaN(i), "main", "ci/test"))
		}
	}
	if count(workitems.TriggerDeduplicated) != 1 {
		t.Errorf("firings %v, want the repeat deduplicated", fired.got)
	}

	// The next hour has room again.
	clock.Advance(time.Hour)
	mustTrigger(t, a, failing(shaN(100), "main", "ci/test"))
	if count(workitems.TriggerMade) != 3 {
		t.Errorf("firings %v, want a third item made in the next hour", fired.got)
	}
}

func TestSubmitTriggeredSaysCapped(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(capYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	q := scheduler.NewQueue(store, c, nil, cfg, scheduler.QueueOptions{Queue: env.Queue})
	ctx := context.Background()
	for i := range 3 {
		_, err := q.SubmitTriggered(ctx, scheduler.Request{Template: "fix-ci", ID: fmt.Sprintf("fix-ci@t-%d", i)}, workitems.TriggerSourceAPI)
		if want := i == 2; errors.Is(err, scheduler.ErrTriggerCapped) != want {
			t.Fatalf("submit %d: %v (capped wanted: %v)", i, err, want)
		}
	}
	// A repeat of an item made is ErrExists, not capped, though the hour is full.
	if _, err := q.SubmitTriggered(ctx, scheduler.Request{Template: "fix-ci", ID: "fix-ci@t-0"}, workitems.TriggerSourceAPI); !errors.Is(err, workitems.ErrExists) {
		t.Fatalf("repeat: %v, want ErrExists", err)
	}
}
