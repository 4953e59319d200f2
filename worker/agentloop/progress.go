package agentloop

import (
	"context"
	"time"

	"outerloop/proc"
	"outerloop/worker"
)

// WithProgressEvery sets how often a running shell tool call's elapsed time and output tail
// reach the item's events (default proc.DefaultProgressEvery).
func WithProgressEvery(d time.Duration) Option { return func(l *Loop) { l.progressEvery = d } }

// shellProgress reports a running shell tool call as a progress step event (worker.ProgressEvent:
// bounded, redacted tail).
func (rt *runtime) shellProgress(ctx context.Context) func(time.Duration, string) {
	return func(elapsed time.Duration, out string) {
		if rt.a.Events != nil {
			rt.a.Events.Emit(ctx, worker.ProgressEvent("shell tool", map[string]string{"tool": "shell"}, elapsed, out))
		}
	}
}

// limitEvent records a shell tool call that a sandbox limit stopped (worker.LimitExceeded).
func (rt *runtime) limitEvent(ctx context.Context) func(command string, r proc.Result, p proc.Policy) {
	return func(command string, r proc.Result, p proc.Policy) {
		if ev, ok := worker.LimitExceeded("shell tool call ("+command+")", r, p); ok && rt.a.Events != nil {
			rt.a.Events.Emit(ctx, ev)
		}
	}
}
