package proc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/worker/proc"
	"outerloop/worker/proc/proctest"
)

// TestAGuardIgnoresAParentDeathSignalWhileItsWorkerLives: the kernel sends the parent-death
// signal when the worker THREAD that forked the guard exits, which a Go worker's threads may do
// while the worker lives on. The guard checks that its parent is still the worker and lets the
// command run to its end.
func TestAGuardIgnoresAParentDeathSignalWhileItsWorkerLives(t *testing.T) {
	guard, _ := proc.GuardArgv()
	r := &proc.Runner{Mode: proc.ModeOff, Guard: guard}
	dir := t.TempDir()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	p, err := r.Start(context.Background(), proc.Spec{Command: "touch running; read line; echo got $line", Dir: dir, Env: proc.BaseEnv(), Stdin: rd})
	if err != nil {
		t.Fatal(err)
	}
	// The command runs: the guard has asked for its parent-death signal.
	proctest.WaitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "running")); return err == nil }, 10*time.Second)
	// What the kernel sends when the starting thread exits (the guard leads the group).
	if err := syscall.Kill(p.Pgid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, func() bool { return strings.Contains(p.Tail(), "carrying on") }, 10*time.Second)
	if _, err := wr.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil || !strings.HasSuffix(p.Tail(), "carrying on\ngot go\n") {
		t.Fatalf("the command after a parent-death signal while the worker lives: %v, output %q (want it to run to its end)", err, p.Tail())
	}
}
