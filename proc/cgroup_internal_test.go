package proc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestACgroupMountShowingOnlyTheContainersGroupMapsTheOwnGroupToItsRoot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m     cgroupMount
		group string
		want  string
	}{
		{cgroupMount{point: "/sys/fs/cgroup/memory", root: "/"}, "/process_api/abc", "/sys/fs/cgroup/memory/process_api/abc"},
		{cgroupMount{point: "/sys/fs/cgroup/memory", root: "/docker/abc"}, "/docker/abc", "/sys/fs/cgroup/memory"},
		{cgroupMount{point: "/sys/fs/cgroup", root: "/"}, "/", "/sys/fs/cgroup"},
	} {
		if got := tc.m.dir(tc.group); got != tc.want {
			t.Errorf("%+v.dir(%q) = %q, want %q", tc.m, tc.group, got, tc.want)
		}
	}
}

func TestCgroupEventCountersAreReadByKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	oom := filepath.Join(dir, "memory.oom_control")
	if err := os.WriteFile(oom, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "pids.events")
	if err := os.WriteFile(events, []byte("max 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &cmdGroup{mem: dir, pids: dir}
	if counter(oom, "oom_kill") != 2 || counter(oom, "oom_kill_disable") != 0 || g.hit() != "memory" {
		t.Fatalf("oom_kill not read: hit %q", g.hit())
	}
	if err := os.WriteFile(oom, []byte("oom_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g.hit() != "" {
		t.Fatalf("no limit was hit, got %q", g.hit())
	}
	if err := os.WriteFile(events, []byte("max 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g.hit() != "processes" {
		t.Fatalf("pids max not read: %q", g.hit())
	}
}
