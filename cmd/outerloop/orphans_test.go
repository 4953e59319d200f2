package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/proc/proctest"
)

// stepsOf returns the live processes whose environment places them in a workspace under
// workDir: every process a worker with that work dir started for an item (its guards, the
// limits helper, bubblewrap and the commands, whatever they exec), seen as host processes.
func stepsOf(workDir string) []int {
	return proctest.ProcessesWithEnv("OUTERLOOP_WORKSPACE=" + workDir + string(os.PathSeparator))
}

// orphanStep is a step that records its pid, forks into its group and into a session of its
// own, has a member stopped for a while (as job control or a debugger would) and writes output
// to the worker's pipe. Its long sleeps end only when the step kills them: one left running is
// an orphan.
const orphanStep = `echo $$ >> pids; sleep 30 & s=$!; setsid sleep 30 & z=$!; kill -STOP $s; seq 2000; sleep 0.1; kill -CONT $s; kill $s $z; wait; echo %d > step.txt`

// TestNoStepOutlivesItsSIGKILLedWorker runs real worker processes on a private Redis with
// steps that fork, stop a member and write output all the time, SIGKILLs a worker at a random
// moment while its steps run (so the kill meets a guard starting, a step forking, a member
// stopped, a step writing), and checks from the host's process table that no process started
// for its items is left (polled: the guards kill on their own; until the test's deadline): in
// both sandbox modes. Ten kills per mode;
// OUTERLOOP_LONG=1 runs a hundred.
func TestNoStepOutlivesItsSIGKILLedWorker(t *testing.T) {
	t.Parallel()
	kills := 10
	if os.Getenv("OUTERLOOP_LONG") == "1" {
		kills = 100
	}
	for _, mode := range []string{"off", "bwrap"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "bwrap" {
				if out, err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
					t.Skipf("bubblewrap does not start here: %v %s", err, out)
				}
			}
			c := newChaos(t, 1, "0", 3*time.Second) // the deployment: its Redis, binary and repo
			var cmds []string
			for k := 1; k <= 8; k++ {
				cmds = append(cmds, strconv.Quote(fmt.Sprintf(orphanStep, k)))
			}
			body := "defaults:\n  max_attempts: 3\n  budget: {wall_time: 10m, verify_reserve: 1m}\ntemplates:\n" +
				"  - name: chaos\n    repo: " + filepath.Join(filepath.Dir(c.cfg), "repo") + "\n    goal: survive\n    sandbox: {mode: " + mode + "}\n" +
				"    loop:\n      kind: script\n      commands: [" + strings.Join(cmds, ", ") + "]\n" +
				"    done_check: {commands: [\"cat green.json\"]}\n"
			if err := os.WriteFile(c.cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			var dirs []string
			t.Cleanup(func() { // whatever a failure left
				for _, d := range dirs {
					for _, p := range stepsOf(d) {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
			})
			c.enqueue(2*kills + 4)
			for range 2 {
				dirs = append(dirs, c.startWorker().dir)
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 23))
			survivors, killsWithSurvivors := 0, 0
			for i := range kills {
				// A worker whose steps run (observed, bounded), then the random moment of death.
				var w *chaosWorker
				for began, deadline := time.Now(), testwait.Deadline(t); w == nil; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("kill %d: no worker ran a step within %s", i+1, time.Since(began).Round(time.Second))
					}
					c.mu.Lock()
					var running []*chaosWorker
					for _, w := range c.workers {
						if len(stepsOf(w.dir)) > 0 {
							running = append(running, w)
						}
					}
					c.mu.Unlock()
					sort.Slice(running, func(a, b int) bool { return running[a].id < running[b].id })
					if len(running) > 0 {
						w = running[rng.IntN(len(running))]
					}
				}
				time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
				c.kill(w) // SIGKILL, then reaped
				// Observation, not synchronisation: the guards kill on their own and tell nobody.
				left := proctest.Lingering(t, func() []int { return stepsOf(w.dir) })
				if len(left) > 0 {
					survivors += len(left)
					killsWithSurvivors++
					t.Errorf("kill %d (worker %s): %d processes of its steps outlived it (waited until the test's deadline): %s", i+1, w.id, len(left), proctest.Describe(left))
					for _, p := range left {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
				dirs = append(dirs, c.startWorker().dir)
			}
			t.Logf("sandbox %s: %d kills of a worker running steps, %d left processes behind, %d processes survived", mode, kills, killsWithSurvivors, survivors)
		})
	}
}
