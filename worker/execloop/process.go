package execloop

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// scrubEnv builds the agent's environment: PATH, HOME and TMPDIR, the names the template passes
// through, and extra (the provider key and the agent's own settings), nothing else. lookup is
// the worker's environment.
func scrubEnv(lookup func(string) (string, bool), names []string, extra map[string]string) []string {
	seen := map[string]bool{}
	var env []string
	add := func(k, v string) {
		if seen[k] {
			return
		}
		seen[k] = true
		env = append(env, k+"="+v)
	}
	// extra first: what outerloop sets on purpose wins over a passed-through value.
	for _, k := range sortedKeys(extra) {
		add(k, extra[k])
	}
	for _, k := range append([]string{"PATH", "HOME", "TMPDIR"}, names...) {
		if v, ok := lookup(k); ok {
			add(k, v)
		}
	}
	return env
}

// lookPath resolves bin against the PATH of env (not the worker's own), relative to dir for
// paths with a slash.
func lookPath(bin, dir string, env []string) (string, error) {
	if strings.Contains(bin, "/") {
		p := bin
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, bin)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not in PATH: %w", bin, exec.ErrNotFound)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", p, os.ErrPermission)
	}
	return nil
}

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

// killTree stops the agent's process group and every descendant (so none can fork while we
// look), kills them all, and waits until each has exited. The leader itself is left for
// cmd.Wait to reap. It returns the pids it killed.
func killTree(root int, wait time.Duration) []int {
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
	deadline := time.Now().Add(wait)
	for _, fd := range fds {
		ms := int(time.Until(deadline).Milliseconds())
		if ms > 0 {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		}
		_ = unix.Close(fd)
	}
	return pids
}

// exitCode returns the process exit status, -1 when killed by a signal or not run.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
