package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/lib/fakeclock"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
)

// resumableScript runs three commands; the second blocks the first time (touching READY) and is
// quick when run again, so a test can stop a worker in the middle of it.
func resumableScript(logDir string) string {
	log := filepath.Join(logDir, "runs.log")
	return fmt.Sprintf(`
  - name: resumable
    repo: REPO
    goal: survive a shutdown
    sandbox: {mode: off}   # the steps log to a file outside the workspace, shared across executions
    loop:
      kind: script
      commands:
        - "echo c1 >> %[1]s"
        - "if [ -f %[2]s/MARK ]; then echo c2-again >> %[1]s; else touch %[2]s/MARK; echo c2-start >> %[1]s; touch %[2]s/READY; sleep 60; fi"
        - "%[3]s; echo c3 >> %[1]s"
    done_check: {commands: ["go test -json ./..."]}
`, log, logDir, sample.FixCommand)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond) // a file a child process creates has no event to await
	}
}

func runsLog(t *testing.T, dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
	return strings.Join(strings.Fields(string(b)), " ")
}

func TestGracefulShutdownCheckpointsAndAnotherWorkerResumes(t *testing.T) {
	t.Parallel()
	repo, logDir := sampleRepo(t), t.TempDir()
	cfg := testConfig(t, repo, strings.Replace(resumableScript(logDir), "REPO", repo, 1))
	s := open(t, cfg, workitems.SystemClock{})
	w1 := s.Worker(1, "w1")
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "resumable"})
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(logDir, "READY"))
	w1.Shutdown(context.Background())

	mid, _ := s.Store.Get(context.Background(), it.ID)
	if mid.State != workitems.StateRunning {
		t.Fatalf("after shutdown the attempt must stay running (resumable), got %s", mid.State)
	}
	if got := runsLog(t, logDir); got != "c1 c2-start" {
		t.Fatalf("runs before resume: %q", got)
	}
	s.startWorker(t, "w2")
	done := awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	if done.State != workitems.StateClosed || len(done.Attempts) != 1 || done.Attempts[0].Resumes != 1 {
		t.Fatalf("want closed in one resumed attempt: %s attempts=%d resumes=%d", done.State, len(done.Attempts), done.Attempts[0].Resumes)
	}
	// Command 1 finished before the shutdown and is not run again; command 2 was interrupted
	// and runs again; nothing ran twice at once.
	if got := runsLog(t, logDir); got != "c1 c2-start c2-again c3" {
		t.Fatalf("runs: %q", got)
	}
	if done.Attempts[0].Spend.Steps != 3 {
		t.Fatalf("steps across the resume: %d", done.Attempts[0].Spend.Steps)
	}
}

func TestAWorkerWhoseLeaseWasTakenOverWritesNothing(t *testing.T) {
	t.Parallel()
	repo, logDir := sampleRepo(t), t.TempDir()
	cfg := testConfig(t, repo, strings.Replace(resumableScript(logDir), "REPO", repo, 1))
	s := open(t, cfg, workitems.SystemClock{})
	ctx := context.Background()
	// No worker server runs here: the handlers are called directly, as asynq would twice.
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "resumable"})
	if err != nil {
		t.Fatal(err)
	}
	// Worker A's clock is frozen: its heartbeat never renews, so its 300ms lease runs out, as in
	// a long GC pause or a network partition.
	frozen := fakeclock.New(time.Now())
	a := worker.NewHandler(worker.HandlerOptions{Store: s.Store, Config: s.Config, Loops: s.Loops,
		Verifier: s.Verifier, Evidence: s.Judge, Workspaces: s.Workspaces, Clock: frozen,
		LeaseTTL: 300 * time.Millisecond, WorkerID: "A", Logger: testLogger(t)})
	aDone := make(chan error, 1)
	go func() { aDone <- a.Process(ctx, it.ID, 1) }()
	waitFile(t, filepath.Join(logDir, "READY"))

	b := s.Handler("B")
	bDone := make(chan error, 1)
	go func() {
		for {
			err := b.Process(ctx, it.ID, 1)
			if err == nil || !strings.Contains(err.Error(), "lease held") {
				bDone <- err
				return
			}
			time.Sleep(50 * time.Millisecond) // asynq's retry delay, in small
		}
	}()
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	closed, _ := s.Store.Get(ctx, it.ID)
	if closed.State != workitems.StateClosed {
		t.Fatalf("B should close the item, got %s", closed.State)
	}
	// Now A wakes up: its renewal finds a newer epoch, it stops and writes nothing.
	frozen.Advance(time.Second)
	if err := <-aDone; err != nil {
		t.Fatalf("A should stop quietly, got %v", err)
	}
	after, _ := s.Store.Get(ctx, it.ID)
	if after.Version != closed.Version || after.State != workitems.StateClosed {
		t.Fatalf("A changed the item after losing its lease: version %d→%d", closed.Version, after.Version)
	}
	evs, _ := s.Store.Events(ctx, it.ID, "", 1000, 0)
	var lost bool
	for _, e := range evs {
		if e.Type == workitems.EventLeaseLost && strings.HasPrefix(e.Actor, "A/") {
			lost = true
		}
	}
	if !lost {
		t.Fatal("A's lease loss is not in the event log")
	}
	if got := runsLog(t, logDir); got != "c1 c2-start c1 c2-again c3" && got != "c1 c2-start c2-again c3" {
		t.Fatalf("runs: %q", got)
	}
}

func TestCancellingARunningItemStopsItsProcessAndWritesNothingMore(t *testing.T) {
	t.Parallel()
	repo, logDir := sampleRepo(t), t.TempDir()
	cfg := testConfig(t, repo, strings.Replace(resumableScript(logDir), "REPO", repo, 1))
	s := open(t, cfg, workitems.SystemClock{})
	s.startWorker(t, "w1")
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "resumable"})
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(logDir, "READY"))
	cancelled, err := s.Queue.Resolve(ctx, it.ID, workitems.Resolution{Action: "cancel", Actor: "carol"})
	if err != nil || cancelled.State != workitems.StateCancelled {
		t.Fatalf("cancel: %v %v", cancelled, err)
	}
	// The worker notices at its next heartbeat, kills the command and releases the lease.
	deadline, stop := context.WithDeadline(ctx, testwait.Deadline(t))
	defer stop()
	evs, err := s.Store.WaitFor(deadline, it.ID, func(*workitems.Item) bool {
		ep, _ := s.Store.Epoch(ctx, it.ID, 1)
		f, err := s.Store.AcquireLease(ctx, it.ID, 1, "probe", time.Second)
		if err != nil || f.Epoch != ep+1 {
			return false
		}
		_ = s.Store.ReleaseLease(ctx, f)
		return true
	})
	if err != nil {
		t.Fatalf("the worker never let go of the cancelled attempt: %v", err)
	}
	after, _ := s.Store.Get(ctx, it.ID)
	if after.State != workitems.StateCancelled || after.Version != evs.Version || after.Current().Exit != nil {
		t.Fatalf("the worker wrote after the cancel: state %s, exit %+v", after.State, after.Current().Exit)
	}
	if got := runsLog(t, logDir); got != "c1 c2-start" {
		t.Fatalf("runs after cancel: %q", got)
	}
}
