package proc

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Cgroups is where the worker makes a group per command for the memory and processes limits:
// under its own cgroup, which must be writable (a root worker on the host, or a group
// delegated to the worker's user or container). On cgroup v2 the worker first moves itself
// into a leaf of its group (v2 allows processes only in leaves), then enables the memory and
// pids controllers for the groups beside it. On v1 each controller has its own hierarchy.
type Cgroups struct {
	V2     bool
	Memory string // parent directory of the commands' memory groups ("" → RLIMIT_DATA)
	Pids   string // parent directory of the commands' pids groups ("" → RLIMIT_NPROC)
}

// Version names the cgroup version.
func (c *Cgroups) Version() LimitMechanism {
	if c != nil && c.V2 {
		return MechanismCgroupV2
	}
	return MechanismCgroupV1
}

// mechanisms says how memory and processes are limited.
func (c *Cgroups) mechanisms() (mem, procs LimitMechanism) {
	mem, procs = MechanismRlimit, MechanismRlimit
	if c != nil && c.Memory != "" {
		mem = c.Version()
	}
	if c != nil && c.Pids != "" {
		procs = c.Version()
	}
	return mem, procs
}

// groupPrefix starts the name of every command group; the worker's pid follows, so that a
// later worker can remove the groups a dead one left.
const groupPrefix = "outerloop-"

// ProbeCgroups finds where this process can make command groups: cgroup v2 when its group
// there has (or can be given) the memory and pids controllers, else v1 memory and pids
// hierarchies whose groups it can create. It removes the empty groups dead workers left. It
// returns nil and why when neither works (limits then fall back to rlimits).
func ProbeCgroups() (*Cgroups, error) {
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var why []string
	if m, ok := mounts[""]; ok {
		dir, err := delegateV2(m.dir(own[""]))
		if err == nil {
			sweepGroups(dir)
			return &Cgroups{V2: true, Memory: dir, Pids: dir}, nil
		}
		why = append(why, "v2: "+err.Error())
	} else {
		why = append(why, "v2: not mounted")
	}
	c := &Cgroups{}
	for _, ctl := range []string{"memory", "pids"} {
		m, ok := mounts[ctl]
		if !ok {
			why = append(why, "v1 "+ctl+": not mounted")
			continue
		}
		dir := m.dir(own[ctl])
		if err := probeDir(dir); err != nil {
			why = append(why, fmt.Sprintf("v1 %s: %v", ctl, err))
			continue
		}
		sweepGroups(dir)
		if ctl == "memory" {
			c.Memory = dir
		} else {
			c.Pids = dir
		}
	}
	if c.Memory == "" && c.Pids == "" {
		return nil, errors.New(strings.Join(why, "; "))
	}
	if c.Memory == "" || c.Pids == "" {
		return c, errors.New(strings.Join(why, "; "))
	}
	return c, nil
}

// ownCgroups reads /proc/self/cgroup: the process's group per v1 controller, and under "" its
// v2 group.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("own cgroup: %w", err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			out[""] = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out, nil
}

// cgroupMount is where a hierarchy is mounted and which of its groups the mount shows.
type cgroupMount struct{ point, root string }

// dir is the directory of group (as /proc/self/cgroup names it) under the mount: in a
// container without a cgroup namespace the mount shows only the container's group, whose
// path /proc/self/cgroup still gives in full.
func (m cgroupMount) dir(group string) string {
	rel, ok := strings.CutPrefix(group, m.root)
	if !ok {
		rel = group
	}
	return filepath.Join(m.point, rel)
}

// cgroupMounts finds the mounts of the v2 hierarchy (under "") and of the v1 memory and pids
// hierarchies, from /proc/self/mountinfo.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroup mounts: %w", err)
	}
	defer f.Close()
	out := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		m := cgroupMount{point: pf[4], root: pf[3]}
		switch qf[0] {
		case "cgroup2":
			out[""] = m
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				if o == "memory" || o == "pids" {
					out[o] = m
				}
			}
		}
	}
	return out, sc.Err()
}

// delegateV2 makes dir (the worker's own v2 group) able to hold command groups with the
// memory and pids controllers: it moves the worker into dir/worker (v2 allows processes only
// in leaves) and enables the controllers for dir's children. It returns dir.
func delegateV2(dir string) (string, error) {
	ctls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	for _, c := range []string{"memory", "pids"} {
		if !hasWord(string(ctls), c) {
			return "", fmt.Errorf("controller %s not available in %s (the group is not delegated with it)", c, dir)
		}
	}
	sub, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if hasWord(string(sub), "memory") && hasWord(string(sub), "pids") {
		return dir, probeDir(dir)
	}
	leaf := filepath.Join(dir, "worker")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
		return "", fmt.Errorf("move the worker into %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		return "", fmt.Errorf("enable memory and pids in %s (other processes in the group?): %w", dir, err)
	}
	return dir, probeDir(dir)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// probeDir checks that a group can be made (and removed) in dir.
func probeDir(dir string) error {
	p := filepath.Join(dir, fmt.Sprintf("%sprobe-%d", groupPrefix, os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	return os.Remove(p)
}

// sweepGroups removes the empty command groups in dir whose worker is gone.
func sweepGroups(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), groupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name())) // fails while anything runs in it
	}
}

// cmdGroup is one command's cgroup (a directory per v1 hierarchy, one on v2).
type cmdGroup struct {
	v2        bool
	mem, pids string // the group's directory holding each controller's files ("" none)
	dirs      []string
}

// newGroup makes the command group for l (nil when l needs none).
func (c *Cgroups) newGroup(l config.ResourceLimits) (*cmdGroup, error) {
	if c == nil || (l.Memory == 0 || c.Memory == "") && (l.Processes == 0 || c.Pids == "") {
		return nil, nil
	}
	// Random, not a counter: more than one Runner (tests) may share the process.
	name := fmt.Sprintf("%s%d-%s", groupPrefix, os.Getpid(), rand.Text()[:12])
	g := &cmdGroup{v2: c.V2}
	mk := func(parent string) (string, error) {
		d := filepath.Join(parent, name)
		if len(g.dirs) > 0 && g.dirs[0] == d {
			return d, nil
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("proc: cgroup %s: %w", d, err)
		}
		g.dirs = append(g.dirs, d)
		return d, nil
	}
	fail := func(err error) (*cmdGroup, error) {
		g.remove(time.Second)
		return nil, err
	}
	if l.Memory > 0 && c.Memory != "" {
		d, err := mk(c.Memory)
		if err != nil {
			return fail(err)
		}
		g.mem = d
		if c.V2 {
			err = writeCg(d, "memory.max", l.Memory)
			if err == nil {
				_ = writeCg(d, "memory.swap.max", 0) // absent without swap accounting
			}
		} else {
			err = writeCg(d, "memory.limit_in_bytes", l.Memory)
			if err == nil {
				_ = writeCg(d, "memory.memsw.limit_in_bytes", l.Memory) // absent without swap accounting
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	if l.Processes > 0 && c.Pids != "" {
		d, err := mk(c.Pids)
		if err != nil {
			return fail(err)
		}
		g.pids = d
		if err := writeCg(d, "pids.max", l.Processes); err != nil {
			return fail(err)
		}
	}
	return g, nil
}

func writeCg(dir, file string, v int64) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
		return fmt.Errorf("proc: cgroup %s: %w", file, err)
	}
	return nil
}

// hit names the limit the group's commands ran into: the OOM killer killed one of them, or a
// fork was refused at pids.max.
func (g *cmdGroup) hit() workitems.Limit {
	if g == nil {
		return ""
	}
	if g.mem != "" {
		file := "memory.oom_control" // v1: "oom_kill N"
		if g.v2 {
			file = "memory.events" // v2: "oom_kill N"
		}
		if counter(filepath.Join(g.mem, file), "oom_kill") > 0 {
			return workitems.LimitMemory
		}
	}
	if g.pids != "" && counter(filepath.Join(g.pids, "pids.events"), "max") > 0 {
		return workitems.LimitProcesses
	}
	return ""
}

// counter reads the value of key in a flat-keyed cgroup file ("key N" lines).
func counter(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove kills whatever still runs in the group (nothing, normally: the guard killed the
// command's tree; a process that left it is still in the group) and removes it.
func (g *cmdGroup) remove(wait time.Duration) {
	if g == nil {
		return
	}
	deadline := realTime.Now().Add(wait)
	for _, d := range g.dirs {
		for {
			pids := groupPids(d)
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) || realTime.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // the killed are still exiting; nothing signals that
		}
	}
}

// groupPids lists the processes in a group.
func groupPids(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
