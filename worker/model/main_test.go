package model_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind (a stream reader, a blocked
// script step, an idle timer).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Keep-alive connections of http.DefaultTransport (providers built with a nil client)
		// outlive the tests by design.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
