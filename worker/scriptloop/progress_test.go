package scriptloop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/worker"
	"outerloop/worker/workertest"
	"outerloop/workitems"
)

// progressSink hands progress events to the test as they are emitted.
type progressSink struct {
	mu       sync.Mutex
	evs      []workitems.Event
	progress chan workitems.Event
}

func (s *progressSink) Emit(_ context.Context, e workitems.Event) {
	s.mu.Lock()
	s.evs = append(s.evs, e)
	s.mu.Unlock()
	if workitems.EventKind(e.Data["kind"]) == workitems.KindCommandProgress {
		select {
		case s.progress <- e:
		default:
		}
	}
}

// A running command's elapsed time and the bounded, redacted tail of its output reach the
// events while it runs, and stop with it.
func TestARunningCommandReportsItsElapsedTimeAndOutputTail(t *testing.T) {
	t.Parallel()
	token := "ghp_" + strings.Repeat("a1B2", 9)
	cmd := `for i in $(seq 1 30); do echo "line $i"; done; echo "using ` + token + `"; while [ ! -f GO ]; do sleep 0.05; done; echo finished`
	a := attempt(t, []string{cmd}, &workertest.Checkpoints{})
	sink := &progressSink{progress: make(chan workitems.Event, 1)}
	a.Events = sink
	done := make(chan workitems.Exit, 1)
	go func() { done <- (Loop{ProgressEvery: 50 * time.Millisecond}).Run(context.Background(), a) }()

	var e workitems.Event
	for !strings.Contains(e.Data["tail"], "using") {
		select {
		case e = <-sink.progress:
		case <-testwait.After(t): // a bound on a broken build, not a synchronisation
			t.Fatal("no progress event with the command's output by the test's deadline")
		}
	}
	tail := e.Data["tail"]
	if lines := strings.Split(tail, "\n"); len(lines) > worker.LiveTailLines+1 || strings.Contains(tail, "line 1\n") || !strings.Contains(tail, "line 30") {
		t.Errorf("tail is not the last %d lines:\n%s", worker.LiveTailLines, tail)
	}
	if strings.Contains(tail, token) || strings.Contains(e.Message, token) || !strings.Contains(tail, "[redacted GitHub token]") {
		t.Errorf("the token is not redacted: %q / %q", tail, e.Message)
	}
	if e.Data["elapsed"] == "" || !strings.HasPrefix(e.Message, "command 1 of 1 running for ") || e.Data["index"] != "1" {
		t.Errorf("progress event %+v", e)
	}
	if err := os.WriteFile(filepath.Join(a.Workspace, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if exit := <-done; exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var finishedAt int = -1
	for i, ev := range sink.evs {
		if ev.Data["kind"] == "command_finished" {
			finishedAt = i
		}
		if finishedAt >= 0 && workitems.EventKind(ev.Data["kind"]) == workitems.KindCommandProgress {
			t.Errorf("a progress event after the command finished: %+v", ev)
		}
	}
	if finishedAt < 0 {
		t.Fatal("no command_finished event")
	}
}
