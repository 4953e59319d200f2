package proc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// limited returns the limits of written, resolved over the defaults.
func limited(t *testing.T, written config.SandboxLimits) config.ResourceLimits {
	t.Helper()
	l, err := written.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// cgroupRunner is a sandboxed runner with cgroups, or the test is skipped where this process
// cannot make them (not root, no delegation).
func cgroupRunner(t *testing.T) *proc.Runner {
	t.Helper()
	r := proctest.Runner(t, proc.ModeBwrap)
	if r.Cgroups == nil || r.Cgroups.Memory == "" || r.Cgroups.Pids == "" {
		t.Skipf("no memory and pids cgroups here: %v", r.CgroupsUnavailable)
	}
	return r
}

// runLimited runs command in a fresh workspace under l, bounded by a minute.
func runLimited(t *testing.T, r *proc.Runner, l config.ResourceLimits, command string) proc.Result {
	t.Helper()
	ws := t.TempDir()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	res := r.Run(ctx, proc.Spec{Command: command, Dir: ws, Env: proc.BaseEnv(), Policy: proc.Policy{Workspace: ws, Limits: l}, Key: "item/1"})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	t.Logf("exit %d signal %v limit %q after %s; output: %s", res.ExitCode, res.Signal, res.Limit, res.Duration.Round(time.Millisecond), res.Tail)
	return res
}

// assertNoGroupsLeft fails t when a command group of this process is left in r's cgroups.
func assertNoGroupsLeft(t *testing.T, r *proc.Runner) {
	t.Helper()
	for _, dir := range []string{r.Cgroups.Memory, r.Cgroups.Pids} {
		left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("outerloop-%d-*", os.Getpid())))
		if len(left) > 0 {
			t.Errorf("command groups left: %v", left)
		}
	}
}

func TestAForkBombIsStoppedAtTheProcessesLimit(t *testing.T) {
	r := cgroupRunner(t)
	marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { proctest.AssertNoProcess(t, marker) })
	res := runLimited(t, r, limited(t, config.SandboxLimits{Processes: "256"}),
		`i=0; while [ $i -lt 2000 ]; do sleep `+marker+` & i=$((i+1)); done; wait`)
	if res.Limit != workitems.LimitProcesses {
		t.Fatalf("limit %q, want processes", res.Limit)
	}
	if res.ExitCode == 0 || res.TimedOut {
		t.Fatalf("the command should have been stopped by the limit: %+v", res)
	}
	proctest.AssertNoProcess(t, marker)
	assertNoGroupsLeft(t, r)
}

func TestAMemoryHogIsStoppedAtTheMemoryLimit(t *testing.T) {
	r := cgroupRunner(t)
	// dd reads its whole block into memory: 1.5 GiB.
	res := runLimited(t, r, limited(t, config.SandboxLimits{Memory: "256MiB"}), `dd if=/dev/zero of=/dev/null bs=1500M count=1`)
	if res.Limit != workitems.LimitMemory {
		t.Fatalf("limit %q, want memory", res.Limit)
	}
	if res.ExitCode == 0 {
		t.Fatalf("the command should have failed: %+v", res)
	}
	assertNoGroupsLeft(t, r)
}

func TestAWriteBeyondTheFileSizeLimitEndsTheCommand(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	res := runLimited(t, r, limited(t, config.SandboxLimits{FileSize: "1MiB"}), `head -c 20M /dev/zero > big`)
	if res.Limit != workitems.LimitFileSize {
		t.Fatalf("limit %q, want file_size", res.Limit)
	}
}

func TestARunawayLoopIsStoppedAtTheCPUTimeLimit(t *testing.T) {
	r := proctest.Runner(t, proc.ModeOff)
	res := runLimited(t, r, limited(t, config.SandboxLimits{CPUTime: "1s"}), `while :; do :; done`)
	if res.Limit != workitems.LimitCPUTime {
		t.Fatalf("limit %q, want cpu_time", res.Limit)
	}
}

func TestACommandWithinItsLimitsNamesNone(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	res := runLimited(t, r, limited(t, config.SandboxLimits{Memory: "256MiB", Processes: "64", FileSize: "1MiB"}),
		`head -c 100K /dev/zero > small && sleep 0.1 & wait; echo fine`)
	if res.Limit != "" || res.ExitCode != 0 || !strings.Contains(res.Tail, "fine") {
		t.Fatalf("a command within its limits should end normally: %+v", res)
	}
}

func TestWithoutCgroupsMemoryIsBoundedByRlimit(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	r.Cgroups = nil
	res := runLimited(t, r, limited(t, config.SandboxLimits{Memory: "256MiB"}), `dd if=/dev/zero of=/dev/null bs=1500M count=1`)
	if res.ExitCode == 0 {
		t.Fatalf("tail should have run out of memory under RLIMIT_DATA: %+v", res)
	}
	if !strings.Contains(r.DescribeLimits(), "RLIMIT_DATA") {
		t.Errorf("describe %q should name RLIMIT_DATA", r.DescribeLimits())
	}
}

func TestSandboxedCommandsRunAsAnUnprivilegedUidOwningTheWorkspace(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	ws := t.TempDir()
	res := r.Run(context.Background(), proc.Spec{Command: `id -u; id -g; echo x > made; git init -q . && git status --short made`,
		Dir: ws, Env: proc.BaseEnv(), Timeout: 30 * time.Second, Policy: proc.Policy{Workspace: ws}})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %+v", res)
	}
	if f := strings.Fields(res.Tail); len(f) < 2 || f[0] != fmt.Sprint(proc.SandboxUID) || f[1] != fmt.Sprint(proc.SandboxGID) {
		t.Fatalf("uid and gid inside: %q, want %d %d", res.Tail, proc.SandboxUID, proc.SandboxGID)
	}
	if !strings.Contains(res.Tail, "?? made") {
		t.Errorf("git inside should accept the workspace as its own: %q", res.Tail)
	}
	fi, err := os.Stat(filepath.Join(ws, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		t.Errorf("a file made inside is owned by %d:%d on the host, want the worker's %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
}

func TestDescribeSaysWhichMechanismEnforcesTheLimits(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	d := r.Describe()
	t.Log(d)
	if r.Cgroups != nil && r.Cgroups.Memory != "" && !strings.Contains(d, string(r.Cgroups.Version())+" (memory") {
		t.Errorf("describe %q should name the cgroup version for memory", d)
	}
	for _, w := range []string{"uid 1000", "RLIMIT_CPU", "RLIMIT_FSIZE"} {
		if !strings.Contains(d, w) {
			t.Errorf("describe %q should mention %s", d, w)
		}
	}
}
