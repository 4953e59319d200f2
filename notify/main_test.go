package notify_test

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/proc"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard()
	goleak.VerifyTestMain(m)
}
