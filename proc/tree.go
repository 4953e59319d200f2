package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procInfo is one line of /proc/PID/stat that matters here.
type procInfo struct {
	pid, ppid, pgid int
	zombie          bool
}

// scanProcs reads every process's parent and group from /proc.
func scanProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// comm may hold spaces and parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgid, _ := strconv.Atoi(f[2])
	return procInfo{pid: pid, ppid: ppid, pgid: pgid, zombie: f[0] == "Z" || f[0] == "X"}, true
}

// treeOf returns the live processes in group pgid and every descendant of root (agents may
// start commands in sessions of their own, outside our group).
func treeOf(root int, procs []procInfo) []int {
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	in := map[int]bool{}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		if in[pid] {
			return
		}
		in[pid] = true
		out = append(out, pid)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	walk(root)
	for _, p := range procs {
		if p.pgid == root && !p.zombie {
			walk(p.pid)
		}
	}
	return out
}

// KillTree stops the agent's process group and every descendant (so none can fork while we
// look), kills them all, and waits until each has exited. The leader itself is left for
// cmd.Wait to reap. It returns the pids it killed.
func KillTree(root int, wait time.Duration) []int {
	stopped := map[int]bool{}
	_ = syscall.Kill(-root, syscall.SIGSTOP)
	// Repeat until no new process shows up: one that forked before its parent stopped.
	for range 10 {
		grew := false
		for _, pid := range treeOf(root, scanProcs()) {
			if !stopped[pid] {
				stopped[pid] = true
				grew = true
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if !grew {
			break
		}
	}
	var pids []int
	var fds []int
	for pid := range stopped {
		pids = append(pids, pid)
		if pid != root {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				fds = append(fds, fd)
			}
		}
	}
	_ = syscall.Kill(-root, syscall.SIGKILL)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// A pidfd polls readable once its process has exited (zombie or reaped).
	deadline := realTime.Now().Add(wait)
	for _, fd := range fds {
		ms := int(deadline.Sub(realTime.Now()).Milliseconds())
		if ms > 0 {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		}
		_ = unix.Close(fd)
	}
	return pids
}
