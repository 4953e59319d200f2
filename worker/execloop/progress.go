package execloop

import (
	"context"
	"time"

	"outerloop/proc"
	"outerloop/worker"
	"outerloop/workitems"
)

// WithProgressEvery sets how often a running agent's elapsed time and output tail reach the
// item's events (default proc.DefaultProgressEvery).
func WithProgressEvery(d time.Duration) Option { return func(l *Loop) { l.progressEvery = d } }

// progressTicker ticks on real time (the agent runs in real time) while it runs.
func (r *run) progressTicker() *time.Ticker {
	d := r.l.progressEvery
	if d <= 0 {
		d = proc.DefaultProgressEvery
	}
	return time.NewTicker(d)
}

// progress reports the running agent: elapsed time, its last message and its stderr tail,
// redacted of the run's secrets and of anything that looks like one.
func (r *run) progress(ctx context.Context, p *proc.Process, started time.Time) {
	out := p.Tail()
	if r.st.LastMessage != "" {
		out += "\n" + r.st.LastMessage
	}
	e := worker.ProgressEvent(r.drv.name, nil, r.l.clock.Now().Sub(started), out)
	r.emit(ctx, e.Type, workitems.KindCommandProgress, e.Message, e.Data)
}
