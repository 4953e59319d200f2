package publish

import (
	"testing"

	"go.uber.org/goleak"

	"outerloop/lib/giteatest"
	"outerloop/proc"
)

// The runner re-executes this binary as its guard; the package's Gitea (giteatest.Shared) is
// stopped before goleak looks.
func TestMain(m *testing.M) {
	proc.MaybeGuard()
	giteatest.Main(m, func() error { return goleak.Find() })
}
