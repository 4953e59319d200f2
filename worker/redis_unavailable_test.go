package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// TestAHandlerFailingOnARedisBlipIsRetriedSoonAndUncounted: the errors a handler gets from the
// store while Redis restarts or fails over (here real ones: a refused connection, a replica's
// READONLY) retry the task after RedisBlipRetryDelay and do not count against MaxRetry; other
// failures keep asynq's backoff and count.
func TestAHandlerFailingOnARedisBlipIsRetriedSoonAndUncounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	task := asynq.NewTask(workitems.TaskTypeAttempt, nil)

	// A port nobody listens on: what a worker meets while Redis is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: down, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	_, refused := itemstore.NewStore(rdb, "t:").Get(ctx, "it")

	// A replica: what a worker meets on the demoted primary in a failover's window.
	primary := redistest.Start(t)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := redistest.Start(t, "--replicaof", host, port)
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rr.Close() })
	_, readOnly := itemstore.NewStore(rr, "t:").AcquireLease(ctx, "it", 1, "w", time.Minute)

	for name, err := range map[string]error{"refused": refused, "read-only": readOnly} {
		if err == nil {
			t.Fatalf("%s: the store call did not fail", name)
		}
		if d := retryDelay(3, err, task); d != RedisBlipRetryDelay {
			t.Errorf("%s (%v): retried after %s, want %s", name, err, d, RedisBlipRetryDelay)
		}
		if isFailure(err) {
			t.Errorf("%s (%v): counted as a failure", name, err)
		}
	}
	other := errors.New("worker: verify it attempt 1: the done check could not start")
	if d := retryDelay(0, other, task); d < 15*time.Second {
		t.Errorf("a real failure retried after %s, want asynq's backoff (15 s or more)", d)
	}
	if !isFailure(other) || !isFailure(context.Canceled) {
		t.Error("a real failure or a cancel is not counted")
	}
}

// TestAWorkspaceWhoseRecordFailsOnARedisOutageIsHandedBackNotFailed: preparing a new attempt's
// workspace, the clone succeeds and the store's write of its base meets Redis down (a real
// server, stopped): the error is marked as Redis being unavailable, so the handler hands the
// task back and the attempt resumes rather than failing as not_found. A repository that cannot
// be read stays the attempt's error, with Redis up.
func TestAWorkspaceWhoseRecordFailsOnARedisOutageIsHandedBackNotFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	store := itemstore.NewStore(rdb, "t:")
	it, fence := runningAttempt(t, store)
	h := NewHandler(HandlerOptions{Store: store, Workspaces: &Workspaces{Root: t.TempDir(), Deployment: "t"}})
	cp := &fencedCheckpointer{store: store, fence: fence, meter: NewMeter(workitems.Budget{}, workitems.Spend{}, nil), obs: nopObserver{}}
	log := slog.New(slog.DiscardHandler)

	_, _, err := h.workspace(ctx, it, &config.Template{Name: "t", Repo: filepath.Join(t.TempDir(), "missing")}, fence, cp, false, nil, log)
	if err == nil || storeUnavailable(err) {
		t.Fatalf("a missing repository: %v, want the attempt's error, not Redis unavailable", err)
	}
	srv.Stop()
	_, _, err = h.workspace(ctx, it, &config.Template{Name: "t", Repo: sourceRepo(t, 2, 1)}, fence, cp, false, nil, log)
	if !storeUnavailable(err) {
		t.Fatalf("the base's record during an outage: %v, want it marked as Redis unavailable", err)
	}
	if d := retryDelay(0, fmt.Errorf("worker: set up attempt: %w", err), asynq.NewTask(workitems.TaskTypeAttempt, nil)); d != RedisBlipRetryDelay {
		t.Errorf("handed back for %s, want %s", d, RedisBlipRetryDelay)
	}
}

// TestAForgeOutageIsTheAttemptsFailureNotARedisBlip: an HTTP client's refused connection (a
// forge or a model provider down: a *url.Error, which is a net.Error) keeps asynq's backoff and
// counts against MaxRetry; only Redis's own errors are retried at once and uncounted.
func TestAForgeOutageIsTheAttemptsFailureNotARedisBlip(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = http.Get("http://" + addr + "/api/v1/repos/acme/calc/pulls")
	if err == nil {
		t.Fatal("the request to a closed port succeeded")
	}
	wrapped := fmt.Errorf("worker: deliver it attempt 1: %w", err)
	if redisUnavailable(wrapped) {
		t.Fatalf("%v is taken for Redis being down", wrapped)
	}
	if d := retryDelay(0, wrapped, asynq.NewTask(workitems.TaskTypeAttempt, nil)); d < 15*time.Second || !isFailure(wrapped) {
		t.Errorf("a forge outage: retried after %s, counted %v; want asynq's backoff and counted", d, isFailure(wrapped))
	}
}

// TestAnAttemptStoppedWhileItsWorkspaceIsPreparedIsAbortedNotFailed: a shutdown (or a lost
// lease) that cancels the attempt as it is set up (here before its first store read; the
// workspace's preparation takes the same check) ends the loop as aborted, which the handler
// turns into a yield; it is neither a transient error nor the attempt's failure (not_found).
func TestAnAttemptStoppedWhileItsWorkspaceIsPreparedIsAbortedNotFailed(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	it, fence := runningAttempt(t, store)
	loops := NewRegistry()
	ran := false
	loops.Register("script", InnerLoopFunc(func(context.Context, *Attempt) workitems.Exit { ran = true; return workitems.Exit{} }))
	h := NewHandler(HandlerOptions{Store: store, Loops: loops, Workspaces: &Workspaces{Root: t.TempDir(), Deployment: "t"}})
	runCtx, cancel := context.WithCancelCause(ctx)
	cancel(ErrYield) // the shutdown came first
	tmpl := &config.Template{Name: "t", Repo: sourceRepo(t, 2, 1), Loop: config.Loop{Kind: "script"}}
	r := h.runLoop(runCtx, it, tmpl, fence, false, slog.New(slog.DiscardHandler))
	if r.exit.Reason != workitems.ExitAborted || ran {
		t.Fatalf("exit %+v (loop ran: %v), want aborted before the loop", r.exit, ran)
	}
}

// runningAttempt creates item "it" and starts its first attempt under worker "w".
func runningAttempt(t *testing.T, store *itemstore.Store) (*workitems.Item, *itemstore.Fence) {
	t.Helper()
	ctx := context.Background()
	if err := store.Create(ctx, &workitems.Item{ID: "it", Template: "t", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	fence, err := store.AcquireLease(ctx, "it", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	it, _, err := store.StartAttempt(ctx, fence, "w")
	if err != nil {
		t.Fatal(err)
	}
	return it, fence
}
