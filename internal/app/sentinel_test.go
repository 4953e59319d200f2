package app_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
)

// TestASentinelFailoverMidRunLosesNothing runs the system on a redis-sentinel:// URL (one
// primary, one replica, three sentinels, each its own process): items are accepted before and
// after a failover to the replica (SENTINEL FAILOVER while six run), a worker runs them
// throughout, and every accepted item closes.
func TestASentinelFailoverMidRunLosesNothing(t *testing.T) {
	t.Parallel()
	d := redistest.StartSentinel(t)
	repo := t.TempDir()
	green := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.01}
{"Action":"pass","Package":"p","Elapsed":0.02}
`
	if err := os.WriteFile(filepath.Join(repo, "green.json"), []byte(green), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]byte(`
defaults:
  budget: {wall_time: 2m, verify_reserve: 1m}
templates:
  - name: ha
    repo: ` + repo + `
    goal: carry on through a failover
    loop: {kind: script, commands: ["sleep 0.3", "echo done > out.txt"]}
    done_check: {commands: ["cat green.json"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, app.Options{Config: cfg, RedisURL: d.URL(), Workdir: t.TempDir(), Logger: testLogger(t), WaitForRedis: true,
		LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	// Reconcile every 5 s (30 s by default): an enqueue the old primary took in the failover's
	// window and lost with it leaves its item queued without a task, and reconcile repairs it.
	w := worker.NewServer(a.AsynqOpt, a.Handler("ha-worker"), worker.ServerOptions{Queue: a.QueueName(), Concurrency: 2,
		Logger: testLogger(t), ReconcileEvery: 5 * time.Second, RecoverEvery: time.Second})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	var ids []string
	submit := func(n int) {
		for range n {
			// A submit in the failover's window may be refused (the primary is read-only for a
			// moment); a refused one was never accepted. Only accepted ones must close.
			it, err := a.Queue.Submit(ctx, scheduler.Request{Template: "ha"})
			if err != nil {
				t.Logf("submit refused during the failover: %v", err)
				continue
			}
			ids = append(ids, it.ID)
		}
	}
	// Every item closes: a handler that met the failover (a killed connection, the demoted
	// primary's READONLY) is retried (in seconds, not after asynq's backoff: see
	// worker.TestAHandlerFailingOnARedisBlipIsRetriedSoonAndUncounted), and a lost enqueue is
	// repaired by the next reconcile. awaitState gives up only at the test's deadline (on a
	// loaded machine an item took 53 s to start); the time taken is logged.
	closeAll := func() {
		t.Helper()
		for _, id := range ids {
			if it := awaitState(t, a.Store, id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed); it.State != workitems.StateClosed {
				t.Fatalf("%s: %s, want closed", id, it.State)
			}
		}
	}
	submit(4)
	closeAll() // the whole system runs on Sentinel: store, queue, worker
	submit(6)
	d.Failover(t)
	failedOver := time.Now()
	// Replication is asynchronous: an item the old primary took after the replica's promotion
	// and before its own demotion would be lost with it (the README says so). Submit again once
	// the store's client writes to the promoted server; the worker carries on all the while.
	awaitServer(t, a.Redis, d.Replica.Addr)
	submit(6)
	if len(ids) < 12 {
		t.Fatalf("only %d of 16 submits accepted around the failover", len(ids))
	}
	closeAll()
	t.Logf("every item closed %s after the failover", time.Since(failedOver).Round(time.Second))
	// The store now writes to the promoted replica.
	if role, err := a.Redis.Do(ctx, "ROLE").Slice(); err != nil || role[0] != "master" {
		t.Fatalf("role of the server the app writes to: %v %v", role, err)
	}
	t.Logf("%d items accepted around the failover, all closed", len(ids))
}

// awaitServer waits until rdb's commands reach the server at addr (go-redis's failover client
// switches on the sentinels' +switch-master, a moment after they name the new primary).
func awaitServer(t *testing.T, rdb redis.UniversalClient, addr string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	deadline := testwait.Deadline(t)
	for {
		info, err := rdb.Info(context.Background(), "server").Result()
		if err == nil && strings.Contains(info, "tcp_port:"+port+"\r\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's client does not reach %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // which server a pooled client reaches is only visible by asking
	}
}
