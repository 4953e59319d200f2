package proc

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
)

func TestRunCapturesExitCodeAndTail(t *testing.T) {
	t.Parallel()
	r := Run(context.Background(), Spec{Command: "printf 'aaaaaaaaaa'; printf 'tail-end'; exit 3", TailMax: 8, Env: BaseEnv()})
	if r.ExitCode != 3 || r.TimedOut || r.Canceled {
		t.Fatalf("result %+v", r)
	}
	if r.Tail != "…tail-end" {
		t.Fatalf("tail %q", r.Tail)
	}
}

func TestRunKillsTheWholeGroupOnTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The child writes its grandchild's pid, then both sleep; the timeout must kill both.
	r := Run(context.Background(), Spec{Dir: dir, Env: BaseEnv(), Timeout: 300 * time.Millisecond,
		Command: "sleep 60 & echo $! > grandchild.pid; wait"})
	if !r.TimedOut || r.ExitCode != -1 {
		t.Fatalf("result %+v", r)
	}
	b, err := os.ReadFile(dir + "/grandchild.pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	assertGone(t, pid)
}

func TestRunKillsTheGroupOnCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result)
	go func() {
		done <- Run(ctx, Spec{Dir: dir, Env: BaseEnv(), Command: "sleep 60 & echo $! > gc.pid; echo started > ready; wait"})
	}()
	waitFile(t, dir+"/ready")
	cancel()
	r := <-done
	if !r.Canceled {
		t.Fatalf("result %+v", r)
	}
	b, _ := os.ReadFile(dir + "/gc.pid")
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	assertGone(t, pid)
}

func TestBaseEnvCarriesNoSecrets(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-secret")
	t.Setenv("GITHUB_TOKEN", "ghp_secret")
	for _, kv := range BaseEnv() {
		if strings.Contains(kv, "secret") {
			t.Fatalf("BaseEnv leaks %q", kv)
		}
	}
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("no pid recorded")
	}
	// The group was SIGKILLed and reaped by init; a zombie is gone once reaped, so poll the
	// kernel's answer (no event exists for another process's death).
	deadline := testwait.Deadline(t)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process %d outlived its group", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
