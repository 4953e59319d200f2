package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/lib/testwait"
	"outerloop/workitems"
)

// TestKilledWorkerIsResumedByAnotherFromItsCheckpoint kills a worker process with SIGKILL in
// the middle of an attempt (the script loop's real-process kill test). A second worker process
// takes the attempt over once the dead one's lease runs out (seconds: the workers' 3 s lease and
// the recover pass). The second worker has a work dir of its own, as on another host: it has
// neither the workspace nor the mirror, so it makes the mirror, recreates the recorded base,
// applies the checkpoint's stored diff and resumes after the last checkpointed step. The item
// closes with the same tree as an uninterrupted run, nothing is lost or run twice, and the dead
// worker's step is stopped by its guard.
func TestKilledWorkerIsResumedByAnotherFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	runs := filepath.Join(logDir, "runs.log")
	tmpl := `  - name: resumable
    repo: REPO
    goal: survive a crash
` + resumableLoop(logDir) + `    done_check: {commands: ["go test -json ./..."]}
`
	cfg, repo := setup(t, tmpl)
	gitCommitAll(t, repo) // a git source: each worker keeps a bare mirror of it in its work dir
	c := newCLI(t, cfg)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := c.start("--workdir", dirA, "worker", "--id", "A", "--lease-ttl", killLease)
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
	child := readPID(t, filepath.Join(logDir, "pgid"))
	s := c.store()
	mid, _ := s.Get(t.Context(), id)
	if mid.State != workitems.StateRunning || mid.Current().Epoch != 1 || mid.Current().Base == nil {
		t.Fatalf("after the kill: %s epoch %d base %+v", mid.State, mid.Current().Epoch, mid.Current().Base)
	}
	c.start("--workdir", dirB, "worker", "--id", "B", "--lease-ttl", killLease)
	it := awaitState(t, s, id, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 {
		t.Fatalf("want closed in one attempt, got %s after %d", it.State, len(it.Attempts))
	}
	at := it.Attempts[0]
	if at.Resumes < 1 || !strings.HasPrefix(at.Worker, "B/") || at.Epoch < 2 {
		t.Fatalf("the attempt must be resumed by B under a newer epoch: worker %s epoch %d resumes %d", at.Worker, at.Epoch, at.Resumes)
	}
	awaitGone(t, child) // A's step 2 was stopped by its guard: it never writes "two" into A's workspace
	b, _ := os.ReadFile(runs)
	if got := strings.Join(strings.Fields(string(b)), " "); got != "c1 c2-start c2-again c3" {
		t.Fatalf("command runs %q: c1 must not run again, c2 resumes, c3 once", got)
	}
	if at.Spend.Steps != 3 {
		t.Fatalf("steps across the crash: %d", at.Spend.Steps)
	}
	evs, _ := s.Events(t.Context(), id, "", 1000, 0)
	restored := 0
	for _, e := range evs {
		if e.Type == workitems.EventWorkspaceRestored && e.Data["from"] == "snapshot" && strings.HasPrefix(e.Actor, "B") {
			restored++
		}
		if e.Type == workitems.EventAttemptRestarted {
			t.Fatalf("the attempt started over: %s", e.Message)
		}
	}
	if restored != 1 || at.Base.Commit != mid.Current().Base.Commit {
		t.Fatalf("B must restore the checkpointed tree at the recorded base: %d restores, base %.12s vs %.12s",
			restored, at.Base.Commit, mid.Current().Base.Commit)
	}
	if _, err := os.Stat(filepath.Join(dirB, "mirrors")); err != nil {
		t.Fatal("B made no mirror of its own")
	}
	// The same template run once, uninterrupted (MARK exists: step 2 does not block), by B.
	out, e, code = c.run("enqueue", "resumable")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	single := awaitState(t, s, enqueuedID(t, out), workitems.StateClosed, workitems.StateEscalated)
	st := single.Attempts[0]
	if single.State != workitems.StateClosed || st.ExitSnapshot == nil || at.ExitSnapshot == nil ||
		st.ExitSnapshot.Tree != at.ExitSnapshot.Tree || st.ExitSnapshot.Bytes != at.ExitSnapshot.Bytes {
		t.Fatalf("the resumed attempt's result %+v differs from a single run's %+v", at.ExitSnapshot, st.ExitSnapshot)
	}
}

// resumableLoop is the script loop of the script kill tests: step 1 is quick and checkpointed;
// step 2 blocks (after writing a partial file that must not survive) the first time it runs,
// recording its pid in logDir/pgid and touching logDir/READY, and is quick once logDir/MARK
// exists; step 3 fixes the sample. Every start is logged to logDir/runs.log.
func resumableLoop(logDir string) string {
	runs := filepath.Join(logDir, "runs.log")
	return `    sandbox: {mode: off}   # the steps log to files outside the workspace
    loop:
      kind: script
      commands:
        - "echo c1 >> ` + runs + `; echo one > step1.txt"
        - "if [ -f ` + logDir + `/MARK ]; then echo c2-again >> ` + runs + `; else touch ` + logDir + `/MARK; echo $$ > ` + logDir + `/pgid; echo c2-start >> ` + runs + `; echo half > partial.txt; touch ` + logDir + `/READY; sleep 120; fi; echo two > step2.txt"
        - "test -f step1.txt && ` + sample.FixCommand + ` && echo c3 >> ` + runs + `"
`
}

// gitCommitAll makes dir a git repository with everything in it committed.
func gitCommitAll(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "sample"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
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
		time.Sleep(20 * time.Millisecond) // a file a child process creates has no event to await
	}
}
