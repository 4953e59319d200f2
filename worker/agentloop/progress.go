package agentloop

import (
	"context"
	"time"

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
