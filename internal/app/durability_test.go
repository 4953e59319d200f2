package app_test

import (
	"context"
	"testing"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// TestRedisCrashWithAOFLosesNoAcceptedItem accepts items, kills Redis with SIGKILL (AOF on,
// fsync always), starts it again on the same data, and has a worker close every item.
func TestRedisCrashWithAOFLosesNoAcceptedItem(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	repo := sampleRepo(t)
	cfg := testConfig(t, repo, "")
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: srv.URL(), Workdir: t.TempDir(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx := context.Background()
	var ids []string
	for range 3 {
		it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "fix"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.ID)
	}
	srv.Restart(t)
	for _, id := range ids {
		if _, err := a.Store.Get(ctx, id); err != nil {
			t.Fatalf("accepted item %s lost in the crash: %v", id, err)
		}
	}
	pending, err := a.Inspector().ListPendingTasks(a.QueueName())
	if err != nil || len(pending) != 3 {
		t.Fatalf("asynq tasks after the crash: %d %v", len(pending), err)
	}
	w := a.Worker(3, "after-crash")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	for _, id := range ids {
		if it := awaitState(t, a.Store, id, workitems.StateClosed, workitems.StateEscalated); it.State != workitems.StateClosed {
			t.Fatalf("%s: %s", id, it.State)
		}
	}
}
