package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"outerloop/workitems"
)

// DefaultShutdownTimeout bounds a long-running command's whole stop after SIGTERM: a supervisor
// (systemd's 90 s, a container runtime's grace period) that sees it exceed this would SIGKILL
// the process anyway, without a word about what was still stopping.
const DefaultShutdownTimeout = 60 * time.Second

// stopper runs a process's shutdown in named stages and bounds it: when it is still stopping
// after the hard deadline, the stages still running are logged, every goroutine's stack is
// written out (the hang is then diagnosable from the log alone) and the process exits 1. A
// second SIGINT or SIGTERM during the shutdown exits at once, as an operator who repeats the
// signal means.
type stopper struct {
	log   *slog.Logger
	stack io.Writer       // goroutine dump at the deadline (stderr)
	exit  func(code int)  // os.Exit; tests observe it
	clock workitems.Clock // times the stages (real: see Start's watchdog)

	mu      sync.Mutex
	running []string // stages under way, in start order
	timer   *time.Timer
}

func newStopper(log *slog.Logger) *stopper {
	return &stopper{log: log, stack: os.Stderr, exit: os.Exit, clock: clock}
}

// arm starts the hard deadline d (≤ 0: DefaultShutdownTimeout) and the watch for a second
// signal. It is called once the shutdown begins and stays armed until the process
// ends: it also bounds what runs after the stages (the config watch, closing Redis).
func (s *stopper) arm(d time.Duration) {
	if d <= 0 {
		d = DefaultShutdownTimeout
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		return
	}
	// Real time, not the app's clock: this is a watchdog over the process itself, and a test's
	// fake clock must not be able to hold it off.
	s.timer = time.AfterFunc(d, func() { s.expire(d) })
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		s.log.Error("second signal during shutdown: exiting now", "signal", sig.String(), "still_stopping", s.stages())
		s.exit(1)
	}()
}

func (s *stopper) expire(d time.Duration) {
	s.log.Error("shutdown did not finish in time: exiting; what was still stopping is below, with every goroutine's stack on stderr",
		"shutdown_timeout", d.String(), "still_stopping", s.stages())
	_ = pprof.Lookup("goroutine").WriteTo(s.stack, 2)
	s.exit(1)
}

// stage runs one named step of the shutdown, logging it when it took long.
func (s *stopper) stage(name string, f func()) {
	s.mu.Lock()
	s.running = append(s.running, name)
	s.mu.Unlock()
	t0 := s.clock.Now()
	defer func() {
		s.mu.Lock()
		if i := slices.Index(s.running, name); i >= 0 {
			s.running = slices.Delete(s.running, i, i+1)
		}
		s.mu.Unlock()
		if d := s.clock.Now().Sub(t0); d > time.Second {
			s.log.Info("shutdown stage done", "stage", name, "took", d.Round(time.Millisecond).String())
		}
	}()
	f()
}

func (s *stopper) stages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.running)
}
