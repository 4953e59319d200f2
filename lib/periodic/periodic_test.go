package periodic

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/lib/testlog"
)

// TestALoopPassesNowThenEveryIntervalAndStopsWithShutdown: the first pass runs at Start, the
// next only once the clock moved Every; a failed pass is logged and the loop goes on; Shutdown
// returns after the loop ended and no pass runs after it.
func TestALoopPassesNowThenEveryIntervalAndStopsWithShutdown(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	passes := make(chan int, 10)
	n := 0
	logs := &testlog.Buffer{}
	l := &Loop{Every: time.Minute, Clock: clock, Logger: slog.New(slog.NewTextHandler(logs, nil)), What: "test pass failed",
		Pass: func(context.Context) error {
			n++
			passes <- n
			if n == 2 {
				return errors.New("boom")
			}
			return nil
		}}
	l.Start()
	l.Start() // a second Start of a running loop does nothing
	if got := <-passes; got != 1 {
		t.Fatalf("first pass %d", got)
	}
	clock.BlockUntil(1, nil) // the loop waits on the clock
	if n := clock.Waiters(); n != 1 {
		t.Fatalf("%d loops wait on the clock, want one", n)
	}
	select {
	case p := <-passes:
		t.Fatalf("pass %d ran before the clock moved", p)
	default:
	}
	clock.Advance(time.Minute)
	if got := <-passes; got != 2 {
		t.Fatalf("second pass %d", got)
	}
	clock.BlockUntil(1, nil)
	clock.Advance(time.Minute)
	if got := <-passes; got != 3 {
		t.Fatalf("third pass %d", got)
	}
	clock.BlockUntil(1, nil)
	l.Shutdown()
	clock.Advance(time.Hour)
	select {
	case p := <-passes:
		t.Fatalf("pass %d ran after Shutdown", p)
	default:
	}
	if out := logs.String(); !strings.Contains(out, "test pass failed") || !strings.Contains(out, "boom") {
		t.Errorf("the failed pass was not logged: %q", out)
	}
}
