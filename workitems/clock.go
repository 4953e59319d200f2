package workitems

import "time"

// Clock is the one source of time for core code; tests inject a fake one and move it.
type Clock interface {
	Now() time.Time
	// After delivers the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After wraps time.After.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
