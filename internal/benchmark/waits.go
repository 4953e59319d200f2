package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/fakeclock"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// WaitFigures is what n waiting items cost, measured against an idle worker in the same run.
type WaitFigures struct {
	Items int
	// Goroutines and heap in use with an idle worker running, before and after n items were
	// parked in waiting.
	GoroutinesIdle, GoroutinesParked int
	HeapIdle, HeapParked             uint64
	// Redis commands of one poll round with nothing due, and of one round with every item due
	// (their CI still pending: each is read and postponed), per due item.
	IdleRoundCommands int64
	DueRoundCommands  int64
	DueRoundItems     int
	DueRound          time.Duration
}

// counter counts the commands a client sends (pipelined ones one by one).
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

const waitsConfig = `
waits: {poll_rate: 1000}
templates:
  - name: waits-bench
    goal: wait for CI
    loop: {kind: script, commands: ["true"]}
    budget: {wall_time: 5m}
    done_check:
      ci: {provider: webhook, repo: acme/bench, required: [test], wait: 1h}
`

// Waits parks n items in waiting for CI next to an idle worker (asynq server, concurrency 4)
// and measures goroutines, heap and the Redis commands of poll rounds.
func Waits(ctx context.Context, e Env, n int, progress io.Writer) (WaitFigures, error) {
	f := WaitFigures{Items: n}
	cfg, err := config.ParseConfig([]byte(waitsConfig))
	if err != nil {
		return f, err
	}
	tmpl, _ := cfg.Template("waits-bench")
	clock := fakeclock.New(wall.Now().UTC())
	prefix := fmt.Sprintf("%swaits%d:", e.Prefix, wall.Now().UnixNano())
	store := itemstore.NewStore(e.Redis, prefix, itemstore.WithClock(clock))
	ci := verify.NewRedisCIStore(e.Redis, prefix, time.Hour, clock)
	judge := &waits.Judge{Verifier: verify.New(verify.WithClock(clock), verify.WithCI(string(workitems.CIProviderWebhook), ci))}

	log := slog.New(slog.DiscardHandler)
	loops := worker.NewRegistry()
	loops.Register(workitems.LoopScript, noopLoop)
	h := worker.NewHandler(worker.HandlerOptions{Store: store, Config: cfg, Loops: loops, Verifier: closeVerifier{}, Logger: log})
	w := worker.NewServer(e.Asynq, h, worker.ServerOptions{Queue: e.Queue + "-waits", Concurrency: 4, ReconcileEvery: -1, RecoverEvery: -1, Logger: log})
	if err := w.Start(); err != nil {
		return f, err
	}
	defer w.Shutdown(context.WithoutCancel(ctx))
	settle := func() (int, uint64) {
		runtime.GC()
		time.Sleep(100 * time.Millisecond) // let the server's loops reach their idle waits before counting
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapInuse
	}
	f.GoroutinesIdle, f.HeapIdle = settle()
	fmt.Fprintf(progress, "parking %d items in waiting next to an idle worker\n", n)
	local := workitems.Decision{Outcome: workitems.OutcomeClose, Rule: workitems.RuleAllGreen, Reasons: []string{"green"}}
	for i := range n {
		id := fmt.Sprintf("waits-bench@%06d", i)
		it := &workitems.Item{ID: id, Template: tmpl.Name, Goal: "g", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "bench"},
			Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 3}
		if err := store.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			return f, err
		}
		fence, err := store.AcquireLease(ctx, id, 1, "bench", time.Minute)
		if err != nil {
			return f, err
		}
		if _, _, err := store.StartAttempt(ctx, fence, "bench"); err != nil {
			return f, err
		}
		if _, err := store.RecordExit(ctx, fence, workitems.Exit{Reason: workitems.ExitCompleted}, workitems.Spend{}, "", false); err != nil {
			return f, err
		}
		sha := fmt.Sprintf("%040d", i)
		del := &workitems.Delivery{Mode: workitems.DeliverBranch, Outcome: workitems.DeliveryPushed, Commit: sha, PushedSHA: sha, At: clock.Now()}
		d := judge.AfterPush(ctx, tmpl, it, 1, local, del, "")
		if _, err := store.RecordDelivery(ctx, fence, d, nil, del, nil); err != nil {
			return f, err
		}
		_ = store.ReleaseLease(ctx, fence)
	}
	f.GoroutinesParked, f.HeapParked = settle()

	// The poller reads through its own client, counted.
	rdb, ok := e.Asynq.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return f, fmt.Errorf("benchmark: the asynq connection gives no go-redis client")
	}
	defer rdb.Close()
	cnt := &counter{}
	rdb.AddHook(cnt)
	pstore := itemstore.NewStore(rdb, prefix, itemstore.WithClock(clock))
	pjudge := &waits.Judge{Verifier: verify.New(verify.WithClock(clock), verify.WithCI(string(workitems.CIProviderWebhook), verify.NewRedisCIStore(rdb, prefix, time.Hour, clock)))}
	p := &waits.Poller{Store: pstore, Judge: pjudge, Waker: noWake{}, Config: func() *config.Config { return cfg }, Clock: clock, Batch: n}
	// A first round dials and loads the claim script: what a poller pays once, not per round.
	if _, err := p.Round(ctx); err != nil {
		return f, err
	}
	cnt.n.Store(0)
	if _, err := p.Round(ctx); err != nil {
		return f, err
	}
	f.IdleRoundCommands = cnt.n.Swap(0)
	clock.Advance(workitems.DefaultFirstPoll)
	start := wall.Now()
	due, err := p.Round(ctx)
	if err != nil {
		return f, err
	}
	f.DueRound, f.DueRoundItems, f.DueRoundCommands = wall.Now().Sub(start), due, cnt.n.Swap(0)
	return f, nil
}

type noWake struct{}

func (noWake) EnqueueWake(context.Context, string, int64, workitems.WakeReason) error { return nil }

var _ waits.Waker = noWake{}
