package agentloop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A running shell tool call reports its elapsed time and the tail of its output while it runs.
func TestARunningShellCallReportsItsOutputTail(t *testing.T) {
	t.Parallel()
	tb, dir := newTestToolbox(t)
	seen := make(chan string, 1)
	tb.progressEvery = 20 * time.Millisecond
	tb.progress = func(elapsed time.Duration, out string) {
		if strings.Contains(out, "halfway") && elapsed > 0 {
			select {
			case seen <- out:
			default:
			}
		}
	}
	done := make(chan toolResult, 1)
	go func() {
		done <- tb.shell(t.Context(), `{"command":"echo halfway; while [ ! -f GO ]; do sleep 0.05; done; echo end"}`)
	}()
	select {
	case <-seen:
	case <-time.After(time.Minute): // a bound on a broken build, not a synchronisation
		t.Fatal("no progress with the call's output within a minute")
	}
	if err := os.WriteFile(filepath.Join(dir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.failed || !strings.Contains(res.out, "end") {
		t.Fatalf("shell result %+v", res)
	}
}
