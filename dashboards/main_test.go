package dashboards

import (
	"testing"

	"outerloop/worker/proc"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	m.Run()
}
