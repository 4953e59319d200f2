package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// janitorFixture makes items through the store's own transitions, each with a real workspace.
type janitorFixture struct {
	t     *testing.T
	env   *redistest.Env
	st    *itemstore.Store
	clock *fakeclock.Clock
	w     *Workspaces
	src   string
}

func newJanitorFixture(t *testing.T) *janitorFixture {
	env := redistest.New(t)
	clock := fakeclock.New(time.Now())
	return &janitorFixture{t: t, env: env, clock: clock,
		st:  itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock)),
		w:   &Workspaces{Root: t.TempDir(), Deployment: env.Prefix},
		src: sourceRepo(t, 3, 1)}
}

// make creates an item, runs its attempt in a workspace and ends it as fate says: "closed",
// "escalated", "failed", "cancelled" or "open".
func (f *janitorFixture) make(ctx context.Context, id, fate string) {
	t, st := f.t, f.st
	t.Helper()
	if err := st.Create(ctx, &workitems.Item{ID: id, Template: "t", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	fence, err := st.AcquireLease(ctx, id, 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.StartAttempt(ctx, fence, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.w.Prepare(ctx, id, 1, f.src); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteCheckpoint(ctx, fence, itemstore.CheckpointWrite{State: []byte("{}"),
		Snapshot: &workitems.Snapshot{WorkspaceSnapshot: workitems.WorkspaceSnapshot{Tree: "t1"}}}); err != nil {
		t.Fatal(err)
	}
	decide := func(o workitems.Outcome) {
		if _, err := st.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{CostUSD: 0.5}, "", false); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordDecision(ctx, fence, workitems.Decision{Outcome: o, Rule: "test", Actor: "test"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	switch fate {
	case "closed":
		decide(workitems.OutcomeClose)
	case "escalated":
		decide(workitems.OutcomeEscalate)
	case "failed":
		if _, err := st.Fail(ctx, id, fence, "broken"); err != nil {
			t.Fatal(err)
		}
	case "cancelled":
		if _, err := st.Resolve(ctx, id, workitems.Resolution{Action: "cancel", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

// keysOf lists the Redis keys under the test's prefix that name id.
func (f *janitorFixture) keysOf(ctx context.Context, id string) []string {
	var out []string
	it := f.env.Client.Scan(ctx, 0, f.env.Prefix+"*"+id+"*", 1000).Iterator()
	for it.Next(ctx) {
		out = append(out, it.Val())
	}
	return out
}

// indexed reports whether any ordered index or set still lists id.
func (f *janitorFixture) indexed(ctx context.Context, id string) []string {
	var in []string
	it := f.env.Client.Scan(ctx, 0, f.env.Prefix+"*", 1000).Iterator()
	for it.Next(ctx) {
		k := it.Val()
		switch f.env.Client.Type(ctx, k).Val() {
		case "zset":
			if _, err := f.env.Client.ZScore(ctx, k, id).Result(); err == nil {
				in = append(in, k)
			}
		case "set":
			if f.env.Client.SIsMember(ctx, k, id).Val() {
				in = append(in, k)
			}
		}
	}
	return in
}

func TestTheJanitorDeletesItemsPastTheirRetentionWithKeysIndexesAndWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newJanitorFixture(t)
	for _, fate := range []string{"closed", "cancelled", "failed", "escalated", "open"} {
		f.make(ctx, fate+"@1", fate)
	}
	r := config.Retention{Closed: workitems.Duration(time.Hour), Failed: workitems.Duration(2 * time.Hour)}
	j := NewJanitor(JanitorOptions{Store: f.st, Retention: r, Workspaces: f.w, Clock: f.clock, Logger: slog.New(slog.DiscardHandler)})

	f.clock.Advance(59 * time.Minute)
	if got, err := j.Run(ctx, false); err != nil || len(got) != 0 {
		t.Fatalf("within every retention: removed %v, %v", got, err)
	}
	f.clock.Advance(2 * time.Minute)
	dry, err := j.Run(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if ids := removedIDs(dry); !slices.Equal(ids, []string{"cancelled@1", "closed@1"}) {
		t.Fatalf("dry run lists %v, want the closed and the cancelled item", ids)
	}
	if _, err := f.st.Get(ctx, "closed@1"); err != nil {
		t.Fatalf("a dry run deleted: %v", err)
	}
	got, err := j.Run(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if ids := removedIDs(got); !slices.Equal(ids, []string{"cancelled@1", "closed@1"}) {
		t.Fatalf("removed %v, want the closed and the cancelled item", ids)
	}
	for _, id := range []string{"closed@1", "cancelled@1"} {
		if ks := f.keysOf(ctx, id); len(ks) > 0 {
			t.Errorf("%s: keys left: %v", id, ks)
		}
		if in := f.indexed(ctx, id); len(in) > 0 {
			t.Errorf("%s: still in indexes %v", id, in)
		}
		if n := len(f.w.Attempts(id)); n != 0 {
			t.Errorf("%s: %d workspaces left", id, n)
		}
	}
	for _, id := range []string{"failed@1", "escalated@1", "open@1"} {
		if _, err := f.st.Get(ctx, id); err != nil {
			t.Errorf("%s was deleted before its time: %v", id, err)
		}
	}

	f.clock.Advance(time.Hour)
	got, _ = j.Run(ctx, false)
	if ids := removedIDs(got); !slices.Equal(ids, []string{"failed@1"}) {
		t.Fatalf("after 2h removed %v, want the failed item", ids)
	}
	// Without retention.escalated an escalation waits for a person for ever.
	f.clock.Advance(365 * 24 * time.Hour)
	if got, _ := j.Run(ctx, false); len(got) != 0 {
		t.Fatalf("a year on, removed %v; escalated and open items stay", removedIDs(got))
	}
	st, _ := f.st.Stats(ctx)
	if st.Items["t"][workitems.StateClosed] != 0 || st.Items["t"][workitems.StateEscalated] != 1 || st.Items["t"][workitems.StateRunning] != 1 {
		t.Fatalf("counts after deletion: %v", st.Items["t"])
	}
	r.Escalated = workitems.Duration(24 * time.Hour)
	j = NewJanitor(JanitorOptions{Store: f.st, Retention: r, Workspaces: f.w, Clock: f.clock, Logger: slog.New(slog.DiscardHandler)})
	got, _ = j.Run(ctx, false)
	if ids := removedIDs(got); !slices.Equal(ids, []string{"escalated@1"}) {
		t.Fatalf("with retention.escalated removed %v", ids)
	}
	if _, err := f.st.Get(ctx, "open@1"); err != nil {
		t.Fatalf("an open item is never deleted: %v", err)
	}
}

func TestTheJanitorKeepsAnEscalationResolvedAndEscalatedAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newJanitorFixture(t)
	f.make(ctx, "e@1", "escalated")
	r := config.Retention{Escalated: workitems.Duration(time.Hour)}
	f.clock.Advance(2 * time.Hour)
	due, err := f.st.DueForDeletion(ctx, r, f.clock.Now(), 0)
	if err != nil || len(due) != 1 {
		t.Fatalf("due %v, %v", due, err)
	}
	// A person retries and the new attempt escalates again between the janitor's read and its
	// delete: the new escalation starts its retention again.
	if _, err := f.st.Update(ctx, "e@1", nil, func(it *workitems.Item) ([]workitems.Event, error) {
		it.Escalation.At = f.clock.Now()
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	err = f.st.DeleteIfDue(ctx, "e@1", func(it *workitems.Item) bool { return itemstore.RetentionDue(it, due[0], r, f.clock.Now()) })
	if err == nil || !strings.Contains(err.Error(), "not due") {
		t.Fatalf("delete of a fresh escalation: %v, want ErrNotDue", err)
	}
	if _, err := f.st.Get(ctx, "e@1"); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionKeepsRedisMemoryAndWorkspaceDiskBounded runs a deployment for 12 simulated hours,
// 4 items an hour, with a 3h retention: once the first items age out, the keys and bytes the
// deployment holds in Redis and the workspace disk stop growing.
func TestRetentionKeepsRedisMemoryAndWorkspaceDiskBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newJanitorFixture(t)
	j := NewJanitor(JanitorOptions{Store: f.st, Retention: config.Retention{Closed: workitems.Duration(3 * time.Hour),
		Failed: workitems.Duration(3 * time.Hour)}, Workspaces: f.w, Clock: f.clock, Logger: slog.New(slog.DiscardHandler)})
	type sample struct {
		keys  int
		bytes int64
		disk  int64
	}
	var samples []sample
	for hour := range 12 {
		for i := range 4 {
			fate := []string{"closed", "failed", "cancelled", "closed"}[i]
			f.make(ctx, fmt.Sprintf("h%02d-%d@1", hour, i), fate)
		}
		f.clock.Advance(time.Hour)
		if _, err := j.Run(ctx, false); err != nil {
			t.Fatal(err)
		}
		s := sample{disk: diskUsage(f.w.Root)}
		it := f.env.Client.Scan(ctx, 0, f.env.Prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			if it.Val() == f.env.Prefix+"events" || f.env.Client.TTL(ctx, it.Val()).Val() > 0 {
				continue // the deployment-wide log is capped by MAXLEN, daily cost keys expire
			}
			s.keys++
			s.bytes += f.env.Client.MemoryUsage(ctx, it.Val()).Val()
		}
		samples = append(samples, s)
	}
	// From hour 3 on, every hour holds the items of the last 2 hours: the same key count, and
	// bytes and disk within a small margin of the first steady hour (sets and zsets of similar
	// sizes take similar memory; git objects of identical workspaces the same disk).
	steady := samples[3]
	for h, s := range samples[3:] {
		if s.keys != steady.keys {
			t.Errorf("hour %d: %d keys, steady state has %d (all: %v)", h+3, s.keys, steady.keys, samples)
		}
		if s.bytes > steady.bytes*3/2 {
			t.Errorf("hour %d: %d bytes in Redis, steady state %d (all: %v)", h+3, s.bytes, steady.bytes, samples)
		}
		if s.disk > steady.disk*3/2 {
			t.Errorf("hour %d: %d bytes of workspaces, steady state %d (all: %v)", h+3, s.disk, steady.disk, samples)
		}
	}
	// Those made 3h ago reached their retention this instant; the last 2 hours' 8 are kept.
	if n, _ := f.st.Count(ctx, itemstore.ListOptions{}); n != 8 {
		t.Fatalf("%d items kept, want the last 2 hours' 8", n)
	}
	if ents, _ := os.ReadDir(f.w.deploymentDir()); len(ents) > 8 {
		t.Fatalf("%d item directories in the work dir, want ≤ 8", len(ents))
	}
}

func removedIDs(rs []Removed) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}
