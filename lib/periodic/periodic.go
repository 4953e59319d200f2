// Package periodic runs a background pass now and then at an interval until stopped: the shape
// of every janitor and sweeper (a pass, a warning when it fails, the next one after Every on
// the injected clock), written once.
package periodic

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Clock is what a Loop waits on (workitems.Clock satisfies it).
type Clock interface {
	After(d time.Duration) <-chan time.Time
}

// Loop runs Pass now and then every Every until Shutdown. A failed pass is logged as What and
// the next one runs on time.
type Loop struct {
	Every  time.Duration
	Clock  Clock
	Logger *slog.Logger
	What   string // "retention pass failed", …
	Pass   func(ctx context.Context) error

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts the loop; starting a running loop does nothing.
func (l *Loop) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			if err := l.Pass(ctx); err != nil && ctx.Err() == nil {
				l.Logger.Warn(l.What, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-l.Clock.After(l.Every):
			}
		}
	}()
}

// Shutdown stops the loop and waits for a pass under way; the loop may be started again.
func (l *Loop) Shutdown() {
	l.mu.Lock()
	cancel := l.cancel
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.wg.Wait()
}
