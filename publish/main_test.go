package publish

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/proc"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	goleak.VerifyTestMain(m)
}
