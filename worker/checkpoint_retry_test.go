package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/redistest"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// logSink records log lines and signals the first one containing a word.
type logSink struct {
	mu    sync.Mutex
	lines []string
	word  string
	hit   chan struct{}
	once  sync.Once
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.lines = append(s.lines, r.Message)
	s.mu.Unlock()
	if strings.Contains(r.Message, s.word) {
		s.once.Do(func() { close(s.hit) })
	}
	return nil
}
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }

// TestACheckpointWriteWaitsOutARedisOutage stops Redis while a loop writes its checkpoint: the
// write is retried with backoff (the loop pauses) and lands once Redis is back from its AOF,
// under the same fence; the attempt is not ended.
func TestACheckpointWriteWaitsOutARedisOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	store := itemstore.NewStore(rdb, "t:")
	ctx := context.Background()
	fence, err := store.AcquireLease(ctx, "it", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{word: "checkpoint write failed", hit: make(chan struct{})}
	meter := NewMeter(workitems.Budget{}, workitems.Spend{}, nil)
	cp := &fencedCheckpointer{store: store, fence: fence, meter: meter, obs: nopObserver{}, log: slog.New(sink)}
	srv.Stop()
	done := make(chan error, 1)
	go func() { done <- cp.Save(ctx, []byte(`{"next":3}`)) }()
	select {
	case <-sink.hit: // the write failed and is being retried
	case err := <-done:
		t.Fatalf("the write ended during the outage: %v", err)
	}
	srv.Restart(t)
	if err := <-done; err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	state, _, err := cp.Load(ctx)
	if err != nil || string(state) != `{"next":3}` {
		t.Fatalf("checkpoint after the outage: %s %v", state, err)
	}
}

// TestACheckpointWriteOfAFencedOutExecutionEndsAtOnce: a lost lease is not retried.
func TestACheckpointWriteOfAFencedOutExecutionEndsAtOnce(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	ctx := context.Background()
	old, err := store.AcquireLease(ctx, "it", 1, "a", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Del(ctx, env.Prefix+"lease:it:1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AcquireLease(ctx, "it", 1, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	cp := &fencedCheckpointer{store: store, fence: old, meter: NewMeter(workitems.Budget{}, workitems.Spend{}, nil), obs: nopObserver{}}
	if err := cp.Save(ctx, []byte(`{}`)); !errors.Is(err, workitems.ErrLeaseLost) {
		t.Fatalf("fenced-out write: %v, want ErrLeaseLost", err)
	}
}

// TestACheckpointWriteStopsWithItsAttempt: a write being retried ends when the attempt's
// context does (shutdown, cancel, the heartbeat's lost lease), saying so.
func TestACheckpointWriteStopsWithItsAttempt(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	store := itemstore.NewStore(rdb, "t:")
	fence, err := store.AcquireLease(context.Background(), "it", 1, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{word: "checkpoint write failed", hit: make(chan struct{})}
	cp := &fencedCheckpointer{store: store, fence: fence, meter: NewMeter(workitems.Budget{}, workitems.Spend{}, nil), obs: nopObserver{}, log: slog.New(sink)}
	srv.Stop()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Save(ctx, []byte(`{}`)) }()
	select {
	case <-sink.hit:
	case err := <-done:
		t.Fatalf("the write ended before retrying: %v", err)
	}
	cancel(ErrYield)
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrYield) {
		t.Fatalf("stopped write: %v, want the cancellation and its cause", err)
	}
}

func TestCheckpointRetryDelayBacksOffToACap(t *testing.T) {
	t.Parallel()
	if d := CheckpointRetryDelay(1); d < 90*time.Millisecond || d > 110*time.Millisecond {
		t.Fatalf("first delay %s", d)
	}
	for n := 1; n < 20; n++ {
		if d := CheckpointRetryDelay(n); d > 5500*time.Millisecond {
			t.Fatalf("delay %d: %s over the cap", n, d)
		}
	}
}
