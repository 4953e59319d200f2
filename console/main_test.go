package console_test

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/proc"
)

// TestMain checks that no test leaves goroutines behind (live streams, the browser's
// readers, the worker).
func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	goleak.VerifyTestMain(m)
}
