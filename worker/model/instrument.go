package model

import (
	"context"
	"errors"
	"time"

	"outerloop/workitems"
)

// Observe receives one model request's latency and error class ("" on success).
type Observe func(provider string, d time.Duration, errClass string)

// Instrument wraps p so that every Stream call is measured (metrics.Metrics.ModelRequest fits
// Observe). A request cancelled by us is not observed: it says nothing about the provider.
func Instrument(p Provider, observe Observe) Provider {
	if observe == nil {
		return p
	}
	return instrumented{p: p, observe: observe, clock: workitems.SystemClock{}}
}

type instrumented struct {
	p       Provider
	observe Observe
	// clock is real: latency is elapsed wall time, which a test's fake clock would report as zero.
	clock workitems.Clock
}

func (i instrumented) Name() string { return i.p.Name() }

func (i instrumented) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	start := i.clock.Now()
	resp, err := i.p.Stream(ctx, req, onDelta)
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return resp, err
	}
	class := ""
	if err != nil {
		class = string(workitems.ClassOf(err))
	}
	i.observe(i.p.Name(), i.clock.Now().Sub(start), class)
	return resp, err
}
