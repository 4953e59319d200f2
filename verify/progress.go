package verify

import (
	"context"
	"time"
)

// CommandProgress receives a running done-check command's elapsed time and the tail of its
// output so far (unredacted: the receiver redacts what it records), every few seconds until it
// ends, so a long check does not look hung.
type CommandProgress func(command string, elapsed time.Duration, out string)

type progressKey struct{}

type progressValue struct {
	fn    CommandProgress
	every time.Duration
}

// WithCommandProgress returns a context under which the verifier reports its running commands
// to fn every `every` (≤ 0: the runner's default). It travels in the context, as
// net/http/httptrace's hooks do, because it is an observer of a call, not one of its inputs.
func WithCommandProgress(ctx context.Context, fn CommandProgress, every time.Duration) context.Context {
	return context.WithValue(ctx, progressKey{}, progressValue{fn: fn, every: every})
}

func progressFrom(ctx context.Context) (progressValue, bool) {
	v, ok := ctx.Value(progressKey{}).(progressValue)
	return v, ok && v.fn != nil
}
