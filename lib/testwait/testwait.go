// Package testwait gives the bound of a test's wait for a condition when the bound exists only
// to stop a hung test. It is derived from the test binary's own deadline (go test -timeout), not
// from how long the condition usually takes: on a loaded machine a condition that takes a
// second when idle can take a minute, and a fixed bound then fails a test whose behaviour is
// right. A wait that reaches the bound still fails the test itself, before the binary's
// deadline panics it, so its message can say what was awaited.
package testwait

import (
	"testing"
	"time"
)

// NoDeadline is how long a wait may last when the test binary has no deadline (-timeout 0) or
// the test cannot tell it (a benchmark).
const NoDeadline = 10 * time.Minute

// Deadline returns when a wait of test t gives up: shortly before the binary's deadline (a tenth
// of the time left, at most a minute, is kept for the failure to be reported and the cleanups to
// run), or NoDeadline from now.
func Deadline(t testing.TB) time.Time {
	now := time.Now()
	d, ok := binaryDeadline(t)
	if !ok {
		return now.Add(NoDeadline)
	}
	return d.Add(-min(d.Sub(now)/10, time.Minute))
}

// Left returns the time from now to Deadline(t): the duration to give a bound that takes one.
func Left(t testing.TB) time.Duration { return time.Until(Deadline(t)) }

// After returns a channel that receives at Deadline(t), for a select that waits on an event.
func After(t testing.TB) <-chan time.Time { return time.After(Left(t)) }

func binaryDeadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
