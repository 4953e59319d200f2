package proc

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// parentDeathSignal is what the kernel sends the guard when the worker dies
// (PR_SET_PDEATHSIG). Not SIGKILL: the guard must live on to kill what the command started.
const parentDeathSignal = syscall.SIGUSR2

// ignoredParentDeath is the guard's line when a parent-death signal came while the worker lives.
const ignoredParentDeath = "outerloop guard: parent-death signal while the worker lives (a worker thread exited); carrying on"

// surviveWorkerDeath makes the guard live through the signals that its worker's death sends
// it as a side effect, whose default action would end it before it killed the command:
//
//   - SIGHUP: once the worker is dead, the guard's process group is orphaned, and the kernel
//     sends SIGHUP and SIGCONT to every member of an orphaned group that has a stopped member,
//     the guard included. Members are stopped by the guard itself (it stops what it kills, so
//     nothing forks meanwhile: the first killed member's exit sends it), by the worker's own
//     kill (killed in the middle of it), or by the command. The guard died of it, mid-kill, and
//     what it had not killed yet ran on, unconfined: outside a sandbox nothing else kills it.
//   - SIGPIPE: the guard's stdout and stderr are pipes to the worker; a write after the worker's
//     death (the parent-death line) would end a Go program on fd 1 or 2.
//
// They are caught, not ignored: the command gets back their default actions at exec. It
// returns the channel to stop.
func surviveWorkerDeath() chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP, syscall.SIGPIPE)
	return c
}

// parentDeath asks the kernel to signal the guard when the worker (pid worker) that started it
// dies, and returns a channel closed when it has. The signal is sent when the parent THREAD
// exits, which in a Go worker may be one of its threads ending while the worker lives on: the
// channel is closed only once the guard's parent is no longer the worker (it was reparented to
// a subreaper or init). A worker dead before the request shows the same way: the check after
// it compares with the pid the worker gave, not with a parent read when it may already have
// been init.
func parentDeath(worker int) <-chan struct{} {
	dead := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, parentDeathSignal) // before the request: the default action would kill the guard
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0, 0, 0); err != nil {
		signal.Stop(sig)
		return dead // never closed: the control pipe's EOF still tells
	}
	ppid := worker
	go func() {
		if os.Getppid() == ppid {
			for range sig {
				if os.Getppid() != ppid {
					break
				}
				// Said on the command's stderr (the guard's): rare, and worth seeing there.
				fmt.Fprintln(os.Stderr, ignoredParentDeath)
			}
		}
		signal.Stop(sig)
		close(dead)
	}()
	return dead
}

// killDescendants SIGKILLs every descendant of pid it finds through /proc/PID/task/*/children,
// without reading all of /proc: the quick first pass when the worker died. Whatever forked in
// between, or left the tree, the full pass (killAllButMe) finds.
func killDescendants(pid int) {
	seen := map[int]bool{pid: true}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(p) {
			if !seen[c] {
				seen[c] = true
				_ = syscall.Kill(c, syscall.SIGKILL)
				queue = append(queue, c)
			}
		}
	}
}

// childrenOf lists pid's children from /proc/PID/task/TID/children of each of its threads.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
