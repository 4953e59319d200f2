// Package benchmark measures outerloop's overhead against its baselines in the same run: a
// fenced checkpoint write against a raw Redis round trip, and a whole item (create, enqueue,
// lease, start, a no-op loop, exit, decision) against a raw asynq task (enqueue, process).
// `outerloop bench` and the Go benchmarks both call it.
package benchmark

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Env is where benchmarks run: a Redis client and an isolated prefix and queue.
type Env struct {
	Redis  redis.UniversalClient
	Asynq  asynq.RedisConnOpt
	Prefix string
	Queue  string
}

// RawRoundTrip times one SET of a checkpoint-sized value.
func RawRoundTrip(b *testing.B, e Env) {
	ctx := context.Background()
	val := make([]byte, 600)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Redis.Set(ctx, e.Prefix+"bench:raw", val, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// CheckpointWrite times one fenced checkpoint write (Lua: epoch check, state, history append).
func CheckpointWrite(b *testing.B, e Env) {
	ctx := context.Background()
	store := itemstore.NewStore(e.Redis, e.Prefix)
	id := fmt.Sprintf("bench-ckpt-%d", wall.Now().UnixNano())
	if err := store.Create(ctx, &workitems.Item{ID: id, Template: "bench"}, itemstore.CreateLimits{}); err != nil {
		b.Fatal(err)
	}
	f, err := store.AcquireLease(ctx, id, 1, "bench", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	state, entry := make([]byte, 500), make([]byte, 100)
	b.ReportAllocs()
	for b.Loop() {
		if err := store.SaveCheckpoint(ctx, f, state, entry); err != nil {
			b.Fatal(err)
		}
	}
}

// RawAsynq times one asynq task: enqueue and process by a no-op handler (concurrency 4).
func RawAsynq(b *testing.B, e Env) {
	q := e.Queue + "-raw"
	var done atomic.Int64
	finished := make(chan struct{}, 1)
	target := int64(b.N)
	srv := asynq.NewServer(e.Asynq, asynq.Config{Concurrency: 4, Queues: map[string]int{q: 1}, LogLevel: asynq.ErrorLevel,
		TaskCheckInterval: 10 * time.Millisecond})
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(context.Context, *asynq.Task) error {
		if done.Add(1) == target {
			finished <- struct{}{}
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	c := asynq.NewClient(e.Asynq)
	defer c.Close()
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.Enqueue(asynq.NewTask("bench", []byte(`{}`)), asynq.Queue(q), asynq.TaskID(fmt.Sprintf("raw-%d-%d", wall.Now().UnixNano(), i))); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
}

const benchConfig = `
defaults:
  budget: {wall_time: 10m}
templates:
  - name: bench
    goal: nothing
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

// closeVerifier closes every item: the benchmark measures our machinery, not a test run.
type closeVerifier struct{}

func (closeVerifier) Verify(context.Context, verify.Request) (verify.Result, error) {
	return verify.Result{Decision: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: workitems.RuleChecksPassed, Actor: workitems.ActorVerifierName}}, nil
}
func (closeVerifier) Check(context.Context, *config.Template, string) (bool, string, error) {
	return true, "", nil
}

func (closeVerifier) Judge(_ context.Context, j verify.Judgement) workitems.Decision {
	if j.Local != nil {
		return *j.Local
	}
	return workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: j.Precondition.Rule, Actor: workitems.ActorVerifierName}
}

// noopLoop does one step and completes, with a checkpoint like every real loop.
var noopLoop = worker.InnerLoopFunc(func(ctx context.Context, a *worker.Attempt) workitems.Exit {
	_ = a.Meter.Add(workitems.Spend{Steps: 1})
	if err := a.Checkpoints.Save(ctx, []byte(`{"next":1}`)); err != nil {
		return workitems.Exit{Reason: workitems.ExitAborted, Message: err.Error()}
	}
	return workitems.Exit{Reason: workitems.ExitCompleted}
})

// Item times one outerloop item end to end with a no-op loop (concurrency 4): create with
// limits, enqueue, lease, start, checkpoint, exit, decision (close), release.
func Item(b *testing.B, e Env) {
	cfg, err := config.ParseConfig([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("%sbench%d:", e.Prefix, wall.Now().UnixNano())
	store := itemstore.NewStore(e.Redis, prefix)
	client := asynq.NewClient(e.Asynq)
	defer client.Close()
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: e.Queue + "-ol"})
	loops := worker.NewRegistry()
	loops.Register(workitems.LoopScript, noopLoop)
	var done atomic.Int64
	finished := make(chan struct{}, 1)
	target := int64(b.N)
	obs := countClose{n: &done, target: target, ch: finished}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := worker.NewHandler(worker.HandlerOptions{Store: store, Config: cfg, Loops: loops, Verifier: closeVerifier{},
		Enqueuer: q, Workspaces: &worker.Workspaces{Root: b.TempDir()}, Observer: obs, Logger: log})
	w := worker.NewServer(e.Asynq, h, worker.ServerOptions{Queue: e.Queue + "-ol", Concurrency: 4, ReconcileEvery: -1, Logger: log,
		TaskCheckInterval: 10 * time.Millisecond})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Shutdown(context.Background())
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := q.Submit(ctx, scheduler.Request{Template: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	<-finished
}

type countClose struct {
	n      *atomic.Int64
	target int64
	ch     chan struct{}
}

func (countClose) AttemptStarted(string, string) {}
func (countClose) AttemptFinished(string, string, workitems.ExitReason, time.Duration, int64, string) {
}
func (countClose) AddSpend(string, string, workitems.Spend, string)              {}
func (countClose) AddModelSpend(string, string, string, workitems.Spend, string) {}
func (countClose) SetRunningCost(string, string, string, float64)                {}
func (countClose) Delivery(string, workitems.DeliveryOutcome, string)            {}
func (countClose) ClearRunningCost(string)                                       {}
func (c countClose) Decision(string, workitems.ActorKind, workitems.Outcome, workitems.RuleName, string) {
	if c.n.Add(1) == c.target {
		c.ch <- struct{}{}
	}
}
func (countClose) CheckpointWrite(time.Duration)      {}
func (countClose) NetworkRefused(string, string, int) {}

// Result is one measured pair.
type Result struct {
	Name, Baseline           string
	NsPerOp, BaselineNsPerOp float64
}

// Ratio is ours over the baseline.
func (r Result) Ratio() float64 { return r.NsPerOp / r.BaselineNsPerOp }

// Run measures both pairs with testing.Benchmark, interleaved so load affects both alike.
func Run(e Env, progress io.Writer) []Result {
	measure := func(name string, f func(*testing.B, Env)) float64 {
		fmt.Fprintf(progress, "  measuring %s…\n", name)
		r := testing.Benchmark(func(b *testing.B) { f(b, e) })
		return float64(r.T.Nanoseconds()) / float64(max(r.N, 1))
	}
	return []Result{
		{Name: "fenced checkpoint write", Baseline: "raw Redis SET", NsPerOp: measure("checkpoint write", CheckpointWrite),
			BaselineNsPerOp: measure("raw Redis SET", RawRoundTrip)},
		{Name: "outerloop item (no-op loop)", Baseline: "raw asynq task", NsPerOp: measure("outerloop item", Item),
			BaselineNsPerOp: measure("raw asynq task", RawAsynq)},
	}
}
