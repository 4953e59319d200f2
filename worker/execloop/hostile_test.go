package execloop_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"outerloop/proc/proctest"
	"outerloop/workitems"
)

func TestHostileExecAgentFindsNothing(t *testing.T) {
	hs := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	a, loop := shell(t, hs.InWorkspace(), workitems.Budget{})
	a.env["HOME"] = hs.Home
	hs.Prepare(a.Runner)
	// With network none an exec agent reaches nothing; its default (host) is below.
	a.Template.Sandbox.Network = "none"
	if exit := loop.Run(context.Background(), a.Attempt); exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	hs.CheckWorkspace(t, a.Workspace)
}

func TestHostileExecAgentWithHostNetworkReachesOnlyTheNetwork(t *testing.T) {
	hs := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	a, loop := shell(t, hs.InWorkspace(), workitems.Budget{})
	a.env["HOME"] = hs.Home
	hs.Prepare(a.Runner)
	if exit := loop.Run(context.Background(), a.Attempt); exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	b := readFile(t, a.Workspace, proctest.OutFile)
	// An exec agent must reach its model: loopback services answer (Redis then needs its ACL
	// user and password, see deploy/redis-acl.conf); nothing else may leak.
	leaks := slices.DeleteFunc(proctest.CheckLeaks(b), func(s string) bool { return s == "redis" || s == "http-api" })
	if len(leaks) > 0 {
		t.Fatalf("leaks with network host: %v\n%s", leaks, b)
	}
	proctest.AssertNoProcess(t, hs.Marker)
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
