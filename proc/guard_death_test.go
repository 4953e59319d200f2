package proc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/proc"
	"outerloop/proc/proctest"
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
	proctest.WaitFor(t, "the command's running file", func() bool { _, err := os.Stat(filepath.Join(dir, "running")); return err == nil })
	// What the kernel sends when the starting thread exits (the guard leads the group).
	if err := syscall.Kill(p.Pgid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, "the command to carry on after the signal", func() bool { return strings.Contains(p.Tail(), "carrying on") })
	if _, err := wr.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil || !strings.HasSuffix(p.Tail(), "carrying on\ngot go\n") {
		t.Fatalf("the command after a parent-death signal while the worker lives: %v, output %q (want it to run to its end)", err, p.Tail())
	}
}

// TestAWorkerDyingWhileItsCommandHasAStoppedProcessLeavesNothing: when the worker dies, the
// guard's process group is orphaned, and the kernel sends SIGHUP (then SIGCONT) to an orphaned
// group that has a stopped member, the guard included; the guard stops members itself while it
// kills them. The guard must outlive that SIGHUP and kill everything, the processes outside
// its group (setsid) too.
func TestAWorkerDyingWhileItsCommandHasAStoppedProcessLeavesNothing(t *testing.T) {
	marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OUTERLOOP_PROCTEST_WORKER="+string(proc.ModeOff),
		"OUTERLOOP_PROCTEST_RECORDS="+filepath.Join(dir, ".proc"),
		"OUTERLOOP_PROCTEST_CMD=sleep "+marker+" & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; kill -STOP $p; setsid sleep "+marker+" & echo started > "+dir+"/ready; wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	proctest.WaitFor(t, "the command's ready file", func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil })
	proctest.WaitFor(t, "two processes of the command", func() bool { return len(proctest.Processes(marker)) >= 2 })
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	proctest.WaitNoProcess(t, marker)
}

// TestTheCommandKeepsTheDefaultActionsOfTheSignalsTheGuardSurvives: the guard catches SIGHUP
// and SIGPIPE (its worker's death sends them); its command must still die of them as usual,
// and a command killed by SIGHUP is reported so.
func TestTheCommandKeepsTheDefaultActionsOfTheSignalsTheGuardSurvives(t *testing.T) {
	guard, _ := proc.GuardArgv()
	r := &proc.Runner{Mode: proc.ModeOff, Guard: guard}
	dir := t.TempDir()
	res := r.Run(context.Background(), proc.Spec{Command: "grep SigIgn /proc/self/status", Dir: dir, Env: proc.BaseEnv()})
	f := strings.Fields(res.Tail)
	if res.ExitCode != 0 || len(f) != 2 {
		t.Fatalf("the command's status: %+v", res)
	}
	ign, err := strconv.ParseUint(f[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGPIPE} {
		if ign&(1<<(s-1)) != 0 {
			t.Errorf("the command ignores %v (SigIgn %s)", s, f[1])
		}
	}
	if res := r.Run(context.Background(), proc.Spec{Command: "kill -HUP $$", Dir: dir, Env: proc.BaseEnv()}); res.Signal != syscall.SIGHUP {
		t.Fatalf("a command killed by SIGHUP: %+v", res)
	}
}

// TestTheCommandsLeaderDiesWithItsGuard: the leader carries a parent-death signal (SIGKILL)
// tied to the guard, so a guard killed outright (SIGKILL, the OOM killer) does not leave its
// command's leader running until the worker notices.
func TestTheCommandsLeaderDiesWithItsGuard(t *testing.T) {
	guard, _ := proc.GuardArgv()
	r := &proc.Runner{Mode: proc.ModeOff, Guard: guard}
	marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
	p, err := r.Start(context.Background(), proc.Spec{Argv: []string{"sleep", marker}, Dir: t.TempDir(), Env: proc.BaseEnv()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Kill(); _ = p.Wait() }()
	// The guard (its argv names the marker too) and the sleep.
	proctest.WaitFor(t, "the guard and its sleep", func() bool { return len(proctest.Processes(marker)) == 2 })
	if err := syscall.Kill(p.Pgid(), syscall.SIGKILL); err != nil { // the guard leads the group
		t.Fatal(err)
	}
	proctest.WaitNoProcess(t, marker)
}
