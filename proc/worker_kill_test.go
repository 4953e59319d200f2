package proc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/workitems/config"
)

// markEnv names the variable every process of the kill test's commands inherits: the test
// finds them in the process table by it (/proc/PID/environ), whatever they exec.
const markEnv = "OUTERLOOP_PROCTEST_MARK"

// loopStep is one step of the fake worker's loop: it records its pid, forks (into its group
// and into a session of its own), has a member stopped for a while (as job control or a
// debugger would), writes output to the worker's pipe, and forks again late, so that a kill
// lands while the guard starts, while the command forks, while a member is stopped and while
// it writes. Its long sleeps end only when the step kills them: one left is an orphan.
const loopStep = `echo $$ >> pids; sleep 30 & s=$!; setsid sleep 30 & z=$!; kill -STOP $s; seq 2000; sleep 0.05; kill -CONT $s; kill $s $z; wait; sh -c 'echo $$ >> pids; seq 500; sleep 0.03'`

// stepLoop is the fake worker of the kill test: two goroutines (a worker's concurrency) run
// loopStep through r one after another, with mark in the commands' environment, until the
// worker is killed.
func stepLoop(r *proc.Runner, dir, mark string) int {
	env := append(proc.BaseEnv(), markEnv+"="+mark)
	// As a worker's commands: under the default limits, in cgroups where this process can make them.
	r.Cgroups, _ = proc.ProbeCgroups()
	limits, err := config.SandboxLimits{}.Resolve()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				r.Run(context.Background(), proc.Spec{Command: loopStep, Dir: dir, Env: env, Key: "item/1", Policy: proc.Policy{Limits: limits}})
			}
		})
	}
	wg.Wait()
	return 3
}

// TestNoCommandOutlivesAWorkerKilledAtARandomMoment starts a worker process running two
// command loops, SIGKILLs it at a random moment (the commands start, fork and write all the
// time, so the kill meets every phase: the guard starting, the command forking, the command
// writing), and checks from the host's process table that no process of its commands is left
// (polled: the guards kill on their own; until the test's deadline). Ten kills per sandbox mode; OUTERLOOP_LONG=1 runs a hundred.
func TestNoCommandOutlivesAWorkerKilledAtARandomMoment(t *testing.T) {
	kills := 10
	if os.Getenv("OUTERLOOP_LONG") == "1" {
		kills = 100
	}
	for _, mode := range []proc.Mode{proc.ModeOff, proc.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == proc.ModeBwrap {
				proctest.Runner(t, mode) // skips where bubblewrap cannot start
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 23))
			survivors, killsWithSurvivors := 0, 0
			for i := range kills {
				mark := fmt.Sprintf("k%d.%d", i, time.Now().UnixNano())
				dir := t.TempDir()
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "OUTERLOOP_PROCTEST_WORKER="+string(mode), markEnv+"="+mark,
					"OUTERLOOP_PROCTEST_RECORDS="+filepath.Join(dir, ".proc"))
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// The first command has recorded its pid: the loops run.
				proctest.WaitFor(t, "the first command to record its pid", func() bool { _, err := os.Stat(filepath.Join(dir, "pids")); return err == nil })
				time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond) // the random moment of death
				_ = cmd.Process.Signal(syscall.SIGKILL)
				_ = cmd.Wait()
				// Observation, not synchronisation: the guards kill asynchronously and tell nobody.
				left := proctest.Lingering(t, func() []int { return proctest.ProcessesWithEnv(markEnv + "=" + mark + "\x00") })
				if len(left) > 0 {
					survivors += len(left)
					killsWithSurvivors++
					t.Errorf("kill %d: %d processes outlived the worker (waited until the test's deadline): %s", i+1, len(left), proctest.Describe(left))
					for _, p := range left {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
			}
			t.Logf("%s: %d kills, %d with survivors, %d surviving processes", mode, kills, killsWithSurvivors, survivors)
		})
	}
}
