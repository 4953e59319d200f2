package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// GuardArg is the first argument that makes the worker binary (or a test binary) act as a
// guard: `outerloop --outerloop-guard CTLFD:WORKERPID -- ARGV...`. It looks like a flag so that
// a test binary whose TestMain forgot MaybeGuard refuses it (unknown flag) instead of running
// its tests.
const GuardArg = "--outerloop-guard"

// MaybeGuard runs the guard and exits when the process was started as one; otherwise it
// returns at once. Call it first thing in main (and in TestMain of packages whose tests run a
// guarded Runner).
func MaybeGuard() {
	if len(os.Args) > 1 && os.Args[1] == GuardArg {
		os.Exit(guardMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == BridgeArg { // the same binary, inside the sandbox (egress.go)
		os.Exit(bridgeMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == LimitsArg {
		os.Exit(limitsMain(os.Args[2:])) // returns only when the command could not start
	}
}

// GuardArgv returns the argv prefix that starts this binary as a guard.
func GuardArgv() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("proc: guard binary: %w", err)
	}
	return []string{exe, GuardArg}, nil
}

// guardMain is the guard: it leads the command's process group (the worker started it with
// Setpgid), is the child subreaper of everything the command starts (so a process that leaves
// the group by setsid still reparents to it), waits for the worker's go, runs the command, and
// kills every process of the group and every descendant when the command's leader exits or
// when its pipe to the worker closes (the worker cancelled, or died) or the worker dies (the
// parent-death signal). It exits as the command did.
func guardMain(args []string) int {
	// First of all, before anything of the command exists: the signals its worker's death
	// brings must not kill the guard before it has killed the command (guard_death.go).
	survive := surviveWorkerDeath()
	defer signal.Stop(survive)
	// The command's leader is started from this thread with a parent-death signal: locked, the
	// thread lives as long as the guard, so the leader is killed when the guard dies (even of
	// SIGKILL), and only then.
	runtime.LockOSThread()
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "outerloop guard: usage: "+GuardArg+" CTLFD[:WORKERPID] -- ARGV...")
		return 125
	}
	fdArg, workerArg, _ := strings.Cut(args[0], ":")
	fd, err := strconv.Atoi(fdArg)
	if err != nil || fd < 3 {
		fmt.Fprintln(os.Stderr, "outerloop guard: bad control fd", args[0])
		return 125
	}
	worker := os.Getppid() // an older worker does not say its pid
	if workerArg != "" {
		if worker, err = strconv.Atoi(workerArg); err != nil || worker < 1 {
			fmt.Fprintln(os.Stderr, "outerloop guard: bad worker pid", args[0])
			return 125
		}
	}
	unix.CloseOnExec(fd)
	ctl := os.NewFile(uintptr(fd), "ctl")
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	dead := parentDeath(worker)
	var b [1]byte
	if n, _ := ctl.Read(b[:]); n != 1 {
		return 125 // the worker went away before the command was recorded: run nothing
	}
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	var extra []*os.File
	for i := 3; i < fd; i++ {
		extra = append(extra, os.NewFile(uintptr(i), "extra"))
	}
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "outerloop guard:", err)
		return 127
	}
	// Our copies would keep the command's pipes open after it closes them.
	for _, f := range extra {
		_ = f.Close()
	}
	_ = os.Stdin.Close()
	// The worker's death (or its close of the pipe) is learnt twice: the pipe's EOF and the
	// parent-death signal. Either kills the command's leader first, in one call (it is what
	// writes, most often), then what it started, then every process of the group.
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // by pidfd: never another process that took a reused pid
			killDescendants(os.Getpid())
			killAllButMe(time.Second)
		})
	}
	go func() {
		_, _ = io.Copy(io.Discard, ctl) // returns at EOF: the worker closed its end or died
		stop()
	}()
	go func() {
		<-dead
		stop()
	}()
	err = cmd.Wait()
	killAllButMe(5 * time.Second)
	reapAll()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGXFSZ {
				// The Go runtime ignores these (the rlimits' signals, limits.go): say it as a
				// shell would.
				return 128 + int(ws.Signal())
			}
			// Die the same way, so the worker sees the signal.
			_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			signal.Stop(survive) // a SIGHUP must end the guard now
			signalSelf(ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 127
	}
	return 0
}

// killAllButMe kills every process of the guard's group and every descendant of it, except
// the guard, pass after pass until a pass finds none alive: a process forked between a pass's
// look and its stop shows in the next one (stopped processes fork no more). It gives up after
// 10 passes (no sane command forks that fast) or once wait has passed.
func killAllButMe(wait time.Duration) {
	me := os.Getpid()
	deadline := realTime.Now().Add(wait)
	for range 10 {
		procs := scanProcs()
		zombie := map[int]bool{}
		for _, p := range procs {
			zombie[p.pid] = p.zombie
		}
		var left []int
		for _, pid := range treeOf(me, procs) {
			if pid != me && !zombie[pid] {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || realTime.Now().After(deadline) {
			return
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range left {
			waitGone(pid, deadline)
		}
	}
}

// waitGone waits until pid has exited (zombie or reaped) or the deadline passed.
func waitGone(pid int, deadline time.Time) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if ms := int(deadline.Sub(realTime.Now()).Milliseconds()); ms > 0 {
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
	}
}

// reapAll reaps every child the guard inherited as subreaper (all were killed).
func reapAll() {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil && err != unix.EINTR {
			return // ECHILD: none left
		}
	}
}

// signalSelf dies of sig. The Go runtime turns a fatal signal into its own exit by that signal
// on its signal thread, a moment after the kill returns: give it that moment before falling back
// to SIGKILL (for a signal the runtime would survive), or the worker would see "killed".
func signalSelf(sig syscall.Signal) {
	_ = syscall.Kill(os.Getpid(), sig)
	if sig != syscall.SIGKILL {
		time.Sleep(time.Second)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}
