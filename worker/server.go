package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/workitems"
)

// ServerOptions configures a Server.
type ServerOptions struct {
	Queue       string // asynq queue (default "outerloop")
	Concurrency int    // attempts at once (default 2)
	// ShutdownTimeout is how long Shutdown waits for attempts it cancelled after its context
	// ended, and then asynq for those that ignored it before it pushes their tasks back to the
	// queue (default 15s).
	ShutdownTimeout time.Duration
	ReconcileEvery  time.Duration // default 30s; 0 keeps the default, <0 disables
	// RecoverEvery is how often the server looks for attempts whose worker is gone (default 5s;
	// <0 disables). With the handler's LeaseTTL it bounds how soon a crash is recovered.
	RecoverEvery time.Duration
	// DirectRecoveries is how many recovered attempts (found by this server's recovery pass:
	// their worker is gone) it runs at once beside its Concurrency, straight away rather than
	// when a slot of the queue frees up behind new work (default 1; <0 none). The recovery
	// task on the urgent queue stays the durable record: whichever takes the lease first runs.
	DirectRecoveries int
	// TaskCheckInterval is how often an idle server polls its queue (asynq's default: 1s).
	TaskCheckInterval time.Duration
	Logger            *slog.Logger
	// Sweeper removes this host's workspaces of ended items; started and stopped with the server.
	Sweeper *Sweeper
	// Janitor deletes items whose retention passed; started and stopped with the server.
	Janitor *Janitor
	// Fleet grants fleet items their turn (fleet.Admitter's loop); started and stopped with
	// the server.
	Fleet Service
	// Lanes are further namespaces of items this server runs in the same slots, below its own
	// queue in priority (evals: an experiment's runs take what production leaves).
	Lanes []Lane
}

// Lane is a namespace of items apart from production's: its own store (through its Handler),
// its own asynq queue and urgent queue, and its own repair passes. The server routes a task to
// the lane whose queue it came from.
type Lane struct {
	Queue    string
	Handler  *Handler
	Enqueuer Enqueuer // its reconcile and recovery passes (nil: none)
	Sweeper  *Sweeper // its workspaces' sweeper (nil: none)
	Janitor  Service  // its retention pass (nil: none); started and stopped with the server
}

// Service is a background pass a server starts and stops with itself.
type Service interface {
	Start()
	Shutdown()
}

// Server runs attempt tasks from asynq with a graceful shutdown that asynq alone does not give:
// it stops fetching, cancels our own base context so that every loop checkpoints and yields,
// waits for them, and only then stops asynq. A reconcile loop repairs items a crash left
// between the store and the queue.
type Server struct {
	srv      *asynq.Server
	h        *Handler
	enqueuer Enqueuer
	o        ServerOptions
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	direct   chan struct{} // a token per direct recovery running
}

// recoverEacher is an Enqueuer whose recovery pass names each recovery it enqueued
// (scheduler.Queue.RecoverEach).
type recoverEacher interface {
	RecoverEach(ctx context.Context, each func(item string, attempt int)) (int, error)
}

// NewServer returns a Server for h.
func NewServer(r asynq.RedisConnOpt, h *Handler, o ServerOptions) *Server {
	if o.Queue == "" {
		o.Queue = "outerloop"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 2
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 15 * time.Second
	}
	if o.ReconcileEvery == 0 {
		o.ReconcileEvery = 30 * time.Second
	}
	if o.RecoverEvery == 0 {
		o.RecoverEvery = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	srv := asynq.NewServer(r, asynq.Config{
		Concurrency: o.Concurrency,
		// Recoveries and wakes first (workitems.UrgentQueue), then new work; a lane's below.
		Queues:            queuePriorities(o),
		StrictPriority:    true,
		ShutdownTimeout:   o.ShutdownTimeout,
		TaskCheckInterval: o.TaskCheckInterval,
		Logger:            asynqLogger{o.Logger},
		LogLevel:          asynq.WarnLevel,
		IsFailure:         isFailure,
		RetryDelayFunc:    retryDelay,
	})
	if o.DirectRecoveries == 0 {
		o.DirectRecoveries = 1
	}
	return &Server{srv: srv, h: h, enqueuer: h.o.Enqueuer, o: o, direct: make(chan struct{}, max(o.DirectRecoveries, 0))}
}

// queuePriorities are the asynq queues a server serves and their strict priorities: its own
// urgent queue, each lane's urgent queue, its own queue, each lane's queue.
func queuePriorities(o ServerOptions) map[string]int {
	n := len(o.Lanes)
	m := map[string]int{workitems.UrgentQueue(o.Queue): 2*n + 2, o.Queue: n + 1}
	for i, l := range o.Lanes {
		m[workitems.UrgentQueue(l.Queue)] = 2*n + 1 - i
		m[l.Queue] = n - i
	}
	return m
}

// handlerFor is the handler of the queue a task came from: a lane's, or the server's own.
func (s *Server) handlerFor(ctx context.Context) *Handler {
	if q, ok := asynq.GetQueueName(ctx); ok {
		for _, l := range s.o.Lanes {
			if q == l.Queue || q == workitems.UrgentQueue(l.Queue) {
				return l.Handler
			}
		}
	}
	return s.h
}

// handlers returns the server's handler and its lanes'.
func (s *Server) handlers() []*Handler {
	hs := []*Handler{s.h}
	for _, l := range s.o.Lanes {
		hs = append(hs, l.Handler)
	}
	return hs
}

// Start starts processing.
func (s *Server) Start() error {
	mux := asynq.NewServeMux()
	mux.HandleFunc(workitems.TaskTypeAttempt, func(ctx context.Context, t *asynq.Task) error {
		return s.handlerFor(ctx).ProcessTask(ctx, t)
	})
	mux.HandleFunc(workitems.TaskTypeWake, func(ctx context.Context, t *asynq.Task) error {
		return s.handlerFor(ctx).ProcessWake(ctx, t)
	})
	if err := s.srv.Start(mux); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.o.Janitor != nil {
		s.o.Janitor.Start()
	}
	if s.o.Sweeper != nil {
		s.o.Sweeper.Start()
	}
	if s.o.Fleet != nil {
		s.o.Fleet.Start()
	}
	s.repair(ctx, s.enqueuer, true)
	for _, l := range s.o.Lanes {
		if l.Sweeper != nil {
			l.Sweeper.Start()
		}
		if l.Janitor != nil {
			l.Janitor.Start()
		}
		s.repair(ctx, l.Enqueuer, false)
	}
	return nil
}

// repair starts the reconcile and recovery passes of one namespace's enqueuer; direct says
// whether its recoveries may run at once beside the concurrency (the server's own only).
func (s *Server) repair(ctx context.Context, e Enqueuer, direct bool) {
	if e == nil {
		return
	}
	if s.o.ReconcileEvery > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.reconcile(ctx, e)
		}()
	}
	if s.o.RecoverEvery > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.recoverLost(ctx, e, direct)
		}()
	}
}

// isFailure says which handler outcomes count against a task's MaxRetry. A yield, a held
// lease, a crash (asynq's lease expired: the worker died or lost Redis) and Redis being
// unavailable for a moment are not the attempt's fault, so crash recovery is never capped by
// the retry count.
func isFailure(err error) bool {
	return !errors.Is(err, ErrYield) && !errors.Is(err, workitems.ErrLeaseHeld) && !errors.Is(err, asynq.ErrLeaseExpired) &&
		!redisUnavailable(err)
}

// retryDelay is when asynq tries a task again: soon after a yield, a held lease or a Redis
// blip (RedisBlipRetryDelay), at once after a crash (no backoff: a crash is not the attempt's fault, and the attempt lease, not
// this delay, keeps two executions apart), and with asynq's backoff after a real failure.
func retryDelay(n int, err error, t *asynq.Task) time.Duration {
	switch {
	case errors.Is(err, ErrYield):
		return time.Second
	case errors.Is(err, workitems.ErrLeaseHeld):
		return 5 * time.Second
	case errors.Is(err, asynq.ErrLeaseExpired):
		return 0
	case redisUnavailable(err):
		return RedisBlipRetryDelay
	}
	return asynq.DefaultRetryDelayFunc(n, err, t)
}

// recoverLost runs the recovery passes (Enqueuer.Recover) of e until ctx ends.
func (s *Server) recoverLost(ctx context.Context, e Enqueuer, direct bool) {
	clock := s.h.o.Clock
	pass := e.Recover
	if re, ok := e.(recoverEacher); ok && direct && cap(s.direct) > 0 {
		pass = func(ctx context.Context) (int, error) { return re.RecoverEach(ctx, s.takeDirect) }
	}
	for {
		if n, err := pass(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("recovery pass failed", "err", err)
		} else if n > 0 {
			s.o.Logger.Info("recovery pass enqueued lost attempts", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(s.o.RecoverEvery):
		}
	}
}

// takeDirect runs a recovered attempt here at once when a direct-recovery token is free; else
// its recovery task waits on the urgent queue for a slot.
func (s *Server) takeDirect(item string, attempt int) {
	if s.h.base.Err() != nil {
		return // shutting down: the queued recovery is for the next worker
	}
	select {
	case s.direct <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-s.direct }()
		s.h.ProcessRecovered(item, attempt)
	}()
}

func (s *Server) reconcile(ctx context.Context, e Enqueuer) {
	clock := s.h.o.Clock
	for {
		if n, err := e.Reconcile(ctx, s.o.ReconcileEvery); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("reconcile failed", "err", err)
		} else if n > 0 {
			s.o.Logger.Info("reconcile re-enqueued items", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(s.o.ReconcileEvery):
		}
	}
}

// Shutdown stops the server gracefully: no new tasks, running loops checkpoint and yield (their
// tasks are retried by asynq and resume from the checkpoint), then asynq stops. It waits for the
// attempts until ctx ends; what they still do then (a done check or a delivery finishing) is
// cancelled and their tasks handed back as yielded, to resume where the store says. It returns
// within ctx's deadline plus about twice ShutdownTimeout even when a handler ignores that.
func (s *Server) Shutdown(ctx context.Context) {
	s.srv.Stop() // no new tasks
	hs := s.handlers()
	for _, h := range hs {
		h.Yield()
	}
	var late []*Handler
	for _, h := range hs {
		if err := h.Wait(ctx); err != nil {
			s.o.Logger.Warn("attempts still running at shutdown: cancelling what they do and handing their tasks back to the queue",
				"err", err, "attempts", h.Running())
			h.Abandon()
			late = append(late, h)
		}
	}
	if len(late) > 0 {
		wctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
		for _, h := range late {
			if err := h.Wait(wctx); err != nil {
				s.o.Logger.Error("attempts ignore their cancellation: asynq hands their tasks back", "err", err, "attempts", h.Running())
			}
		}
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	if s.o.Janitor != nil {
		s.o.Janitor.Shutdown()
	}
	if s.o.Sweeper != nil {
		s.o.Sweeper.Shutdown()
	}
	if s.o.Fleet != nil {
		s.o.Fleet.Shutdown()
	}
	for _, l := range s.o.Lanes {
		if l.Sweeper != nil {
			l.Sweeper.Shutdown()
		}
		if l.Janitor != nil {
			l.Janitor.Shutdown()
		}
	}
	s.srv.Shutdown()
}

// asynqLogger routes asynq's logs to slog.
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Error(args ...any) { a.l.Error(fmt.Sprint(args...), "component", "asynq") }
func (a asynqLogger) Fatal(args ...any) {
	a.l.Error(fmt.Sprint(args...), "component", "asynq", "fatal", true)
}
