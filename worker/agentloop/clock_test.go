package agentloop

import (
	"net/http"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/worker"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestTheInjectedClockDrivesRetryAfterAndTheRetryWait runs the default provider against a real
// HTTP server that answers 429 with a Retry-After date 30 s after the fake clock's now: the delay
// is read against the injected clock (the real clock is a year past it, so it would see a date in
// the past and fall back to the default back-off), and the retry waits on that clock, so the
// second request is sent only once the test moves it.
func TestTheInjectedClockDrivesRetryAfterAndTheRetryWait(t *testing.T) {
	// Not parallel: the default factory reads the key from the process environment.
	t.Setenv(modeltest.KeyEnv, modeltest.Key)
	h := newHarness(t)
	clock := fakeclock.New(time.Date(2025, 11, 29, 10, 0, 0, 0, time.UTC))
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.RateLimited(clock.Now().Add(30*time.Second).Format(http.TimeFormat)), modeltest.Text("done"))
	a := h.attempt()
	a.Config = &config.Config{Providers: map[string]config.ProviderConfig{"scripted": srv.Config()}}
	a.Meter = worker.NewMeter(h.budget, workitems.Spend{}, clock)
	l := New(WithClock(clock), WithJitter(func() float64 { return 1 }))

	done := make(chan workitems.Exit, 1)
	ended := make(chan struct{})
	go func() { done <- l.Run(t.Context(), a); close(ended) }()
	// Two waiters: the wall-time deadline and the retry wait.
	if !clock.BlockUntil(2, ended) {
		t.Fatalf("the loop ended without waiting on the clock: %+v, events %v", <-done, h.ev.kinds())
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests before the clock moved; want 1", n)
	}
	ev := h.ev.of(string(workitems.KindStreamError))
	if len(ev) != 1 || ev[0].Data["delay"] != "30s" {
		t.Fatalf("stream_error events %+v; want one with delay 30s (Retry-After read on the injected clock)", ev)
	}
	clock.Advance(29 * time.Second)
	if n := clock.Waiters(); n != 2 {
		t.Fatalf("%d waiters 29 s into a 30 s retry wait; want the deadline and the retry still waiting", n)
	}
	clock.Advance(time.Second)
	ex := <-done
	if ex.Reason != workitems.ExitCompleted || len(srv.Requests()) != 2 {
		t.Fatalf("exit %+v after %d requests", ex, len(srv.Requests()))
	}
}
