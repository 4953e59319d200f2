package worker

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/internal/redistest"
	"outerloop/workitems"
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
	_, refused := workitems.NewStore(rdb, "t:").Get(ctx, "it")

	// A replica: what a worker meets on the demoted primary in a failover's window.
	primary := redistest.Start(t)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica := redistest.Start(t, "--replicaof", host, port)
	rr := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rr.Close() })
	_, readOnly := workitems.NewStore(rr, "t:").AcquireLease(ctx, "it", 1, "w", time.Minute)

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
