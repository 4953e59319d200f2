package execloop_test

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/proc"
	"outerloop/proc/proctest"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	proctest.Main()
	goleak.VerifyTestMain(m)
}
