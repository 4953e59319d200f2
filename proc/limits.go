package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Resource limits (Policy.Limits) are enforced per command, by the best mechanism the worker
// has: memory and processes with a cgroup of the command's own (cgroup.go: v2 under a
// delegated group, or v1 where the host has only that) so that they bound the command and
// everything it starts together, else with rlimits (RLIMIT_DATA for memory; RLIMIT_NPROC for
// processes, which the kernel counts per real uid across the host and does not apply to a
// root worker's commands); cpu_time and file_size always with rlimits (RLIMIT_CPU and
// RLIMIT_FSIZE, per process). They take hold before the command runs: the guard starts the
// worker binary again with LimitsArg, which joins the command's cgroups, sets the rlimits and
// then becomes the command (exec), so nothing of it ever runs unlimited. The guard itself
// stays outside, to clean up whatever the limit did.
//
// A command that hits the memory or the processes limit is stopped whole (a memory hog that
// lost one process, or a fork bomb that cannot fork, would otherwise run on to its timeout);
// Result.Limit names the limit that stopped it.

// LimitsArg is the first argument that makes the worker binary place itself under a command's
// limits and exec the command: `outerloop --outerloop-limits KEY=VALUE... -- ARGV...`.
const LimitsArg = "--outerloop-limits"

// LimitMechanism says how a limit is enforced here.
type LimitMechanism string

// The mechanisms.
const (
	MechanismCgroupV2 LimitMechanism = "cgroup v2"
	MechanismCgroupV1 LimitMechanism = "cgroup v1"
	MechanismRlimit   LimitMechanism = "rlimits"
	MechanismNone     LimitMechanism = "none"
)

// DescribeLimits says in one line how each limit is enforced by r, for the start-up log and
// validate.
func (r *Runner) DescribeLimits() string {
	if !r.guarded() {
		return "not enforced (commands run without the guard)"
	}
	var cg, rl []string
	mem, procs := r.Cgroups.mechanisms()
	if mem == MechanismRlimit {
		rl = append(rl, "memory as RLIMIT_DATA")
	} else {
		cg = append(cg, "memory")
	}
	if procs == MechanismRlimit {
		rl = append(rl, "processes as RLIMIT_NPROC (counted per uid across the host, not applied to a root worker's commands)")
	} else {
		cg = append(cg, "processes")
	}
	rl = append(rl, "cpu_time as RLIMIT_CPU", "file_size as RLIMIT_FSIZE")
	out := ""
	if len(cg) > 0 {
		out = fmt.Sprintf("%s (%s), ", r.Cgroups.Version(), strings.Join(cg, ", "))
	}
	out += "rlimits (" + strings.Join(rl, ", ") + ")"
	if r.CgroupsUnavailable != nil && len(cg) < 2 {
		out += "; no cgroup: " + r.CgroupsUnavailable.Error()
	}
	return out
}

// limitsArgv returns the argv prefix that starts argv under l, and the cgroup made for it (nil
// when none). The caller removes the group after the command.
func (r *Runner) limitsArgv(l config.ResourceLimits, argv []string) ([]string, *cmdGroup, error) {
	if l == (config.ResourceLimits{Written: l.Written}) || !r.guarded() {
		return argv, nil, nil
	}
	self := r.Guard[0]
	a := []string{self, LimitsArg}
	g, err := r.Cgroups.newGroup(l)
	if err != nil {
		return nil, nil, err
	}
	mem, procs := r.Cgroups.mechanisms()
	if g != nil {
		for _, d := range g.dirs {
			a = append(a, "cgroup="+d)
		}
	}
	if l.Memory > 0 && mem == MechanismRlimit {
		a = append(a, fmt.Sprintf("data=%d", l.Memory))
	}
	if l.Processes > 0 && procs == MechanismRlimit {
		a = append(a, fmt.Sprintf("nproc=%d", l.Processes))
	}
	if l.CPUTime > 0 {
		a = append(a, fmt.Sprintf("cpu=%d", int64((l.CPUTime+time.Second-1)/time.Second)))
	}
	if l.FileSize > 0 {
		a = append(a, fmt.Sprintf("fsize=%d", l.FileSize))
	}
	return append(append(a, "--"), argv...), g, nil
}

// cpuGrace is how long a process may run past its cpu_time after SIGXCPU before the kernel
// kills it.
const cpuGrace = 5

// limitsMain joins the cgroups, sets the rlimits and execs the command; it returns only on
// failure, and then runs nothing (a command must never run without the limits it was given).
func limitsMain(args []string) int {
	i := 0
	for ; i < len(args) && args[i] != "--"; i++ {
		k, v, _ := strings.Cut(args[i], "=")
		if err := applyLimit(k, v); err != nil {
			fmt.Fprintf(os.Stderr, "outerloop limits: %s: %v\n", args[i], err)
			return 126
		}
	}
	if i+1 >= len(args) {
		fmt.Fprintln(os.Stderr, "outerloop limits: usage: "+LimitsArg+" KEY=VALUE... -- ARGV...")
		return 125
	}
	argv := args[i+1:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "outerloop limits:", err)
		return 127
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintln(os.Stderr, "outerloop limits: exec:", err)
	return 126
}

func applyLimit(k, v string) error {
	if k == "cgroup" {
		// "0" is the writer itself; in v1 and v2 alike it moves the whole process.
		return os.WriteFile(v+"/cgroup.procs", []byte("0"), 0)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return err
	}
	switch k {
	case "data":
		return unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: n, Max: n})
	case "nproc":
		return unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n})
	case "cpu":
		// SIGXCPU at the limit (its default action ends the process), SIGKILL a little later.
		return unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: n, Max: n + cpuGrace})
	case "fsize":
		return unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: n, Max: n})
	}
	return fmt.Errorf("unknown limit %q", k)
}

// rlimitHit names the rlimit that ended a command, from how it ended: the signal the kernel
// sends at the limit (SIGXCPU, SIGXFSZ), seen directly or as a shell's or bubblewrap's exit
// code 128+signal. A program that ignores SIGXFSZ gets EFBIG instead and exits as it sees fit:
// that is not told apart.
func rlimitHit(l config.ResourceLimits, res Result) workitems.Limit {
	is := func(sig syscall.Signal) bool { return res.Signal == sig || res.ExitCode == 128+int(sig) }
	switch {
	case l.CPUTime > 0 && is(syscall.SIGXCPU):
		return workitems.LimitCPUTime
	case l.FileSize > 0 && is(syscall.SIGXFSZ):
		return workitems.LimitFileSize
	}
	return ""
}

// watchLimits polls the command's cgroup until it exits, and stops the command whole when it
// hit its memory or processes limit. Polled: cgroup v1 has no notification for pids.
func (p *Process) watchLimits() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.exited:
			return
		case <-t.C:
			if l := p.group.hit(); l != "" {
				p.setLimit(l)
				p.Kill()
				return
			}
		}
	}
}

func (p *Process) setLimit(l workitems.Limit) {
	p.limitMu.Lock()
	defer p.limitMu.Unlock()
	if p.limit == "" {
		p.limit = l
	}
}

// Limit returns the limit that stopped the command ("" when none), once Wait returned.
func (p *Process) Limit() workitems.Limit {
	p.limitMu.Lock()
	defer p.limitMu.Unlock()
	return p.limit
}

// SandboxUID and SandboxGID are who commands run as inside the sandbox: not root, and without
// capabilities. Bubblewrap maps them to the worker's own uid and gid outside (the only ones
// an unprivileged user namespace may map), so what a command writes in the workspace belongs
// to the worker on the host, and git inside sees the workspace owned by its own user. A root
// worker's commands are thus root outside the namespace, without its capabilities: run workers
// as an unprivileged user (docs/sandbox-limits.md).
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// sandboxUserArgs are bubblewrap's arguments for the command's user.
func sandboxUserArgs() []string {
	return []string{"--unshare-user", "--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxGID)}
}
