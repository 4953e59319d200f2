package console_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind (live streams, the browser's
// readers, the worker).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
