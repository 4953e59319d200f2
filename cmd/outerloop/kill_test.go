package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/workitems"
)

// TestKilledWorkerIsResumedByAnotherFromItsCheckpoint kills a worker process with SIGKILL in
// the middle of an attempt. asynq re-delivers the task to a second worker process once the dead
// one's lease runs out (about a minute: asynq's recoverer), which resumes after the last
// checkpointed step; the item closes and nothing is lost or run twice.
func TestKilledWorkerIsResumedByAnotherFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	runs := filepath.Join(logDir, "runs.log")
	tmpl := `  - name: resumable
    repo: REPO
    goal: survive a crash
    loop:
      kind: script
      commands:
        - "echo c1 >> ` + runs + `"
        - "if [ -f ` + logDir + `/MARK ]; then echo c2-again >> ` + runs + `; else touch ` + logDir + `/MARK; echo $$ > ` + logDir + `/pgid; echo c2-start >> ` + runs + `; touch ` + logDir + `/READY; sleep 120; fi"
        - "` + sample.FixCommand + `; echo c3 >> ` + runs + `"
    done_check: {commands: ["go test -json ./..."]}
`
	cfg, _ := setup(t, tmpl)
	c := newCLI(t, cfg)
	a := c.start("worker", "--id", "A")
	out, e, code := c.run("enqueue", "resumable")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	id := enqueuedID(t, out)
	waitFile(t, filepath.Join(logDir, "READY"))
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	// The script's own process group outlives a SIGKILLed worker, as it would in production;
	// stop it so the test leaves nothing behind.
	if b, err := os.ReadFile(filepath.Join(logDir, "pgid")); err == nil {
		if pg, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
	}
	s := c.store()
	mid, _ := s.Get(t.Context(), id)
	if mid.State != workitems.StateRunning || mid.Current().Epoch != 1 {
		t.Fatalf("after the kill: %s epoch %d", mid.State, mid.Current().Epoch)
	}
	c.start("worker", "--id", "B")
	it := awaitState(t, s, id, 4*time.Minute, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 {
		t.Fatalf("want closed in one attempt, got %s after %d", it.State, len(it.Attempts))
	}
	at := it.Attempts[0]
	if at.Resumes < 1 || !strings.HasPrefix(at.Worker, "B/") || at.Epoch < 2 {
		t.Fatalf("the attempt must be resumed by B under a newer epoch: worker %s epoch %d resumes %d", at.Worker, at.Epoch, at.Resumes)
	}
	b, _ := os.ReadFile(runs)
	if got := strings.Join(strings.Fields(string(b)), " "); got != "c1 c2-start c2-again c3" {
		t.Fatalf("command runs %q: c1 must not run again, c2 resumes, c3 once", got)
	}
	if at.Spend.Steps != 3 {
		t.Fatalf("steps across the crash: %d", at.Spend.Steps)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond) // a file a child process creates has no event to await
	}
}
