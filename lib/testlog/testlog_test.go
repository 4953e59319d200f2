package testlog_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"outerloop/lib/testlog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBufferKeepsEveryConcurrentWrite writes from many goroutines while reading (the race
// detector checks the locking) and finds every line whole.
func TestBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b testlog.Buffer
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				fmt.Fprintf(&b, "line %d-%d\n", i, j)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("%d lines, want 1000", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(seen) != 1000 || !seen["line 19-49"] {
		t.Fatalf("lines lost or torn: %d distinct", len(seen))
	}
}
