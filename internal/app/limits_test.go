package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/proc/proctest"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// A step that hits a resource limit ends with an event and an exit naming the limit, while an
// item running beside it on the same worker closes, and nothing of the step is left running.
func TestAStepOverALimitFailsNamingItWhileAnItemBesideItCloses(t *testing.T) {
	marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
	repo := sampleRepo(t)
	cfg := testConfig(t, repo, fmt.Sprintf(`
  - name: quick
    repo: %[1]s
    goal: fixed at once
    loop: {kind: script, commands: [%[2]q]}
    done_check: {commands: ["go test -json ./..."]}
  - name: forkbomb
    repo: %[1]s
    goal: too many processes
    max_attempts: 1
    sandbox: {limits: {processes: 256}}
    loop: {kind: script, commands: ["i=0; while [ $i -lt 2000 ]; do sleep %[3]s & i=$((i+1)); done; wait"]}
    done_check: {commands: ["true"]}
  - name: hog
    repo: %[1]s
    goal: too much memory
    max_attempts: 1
    sandbox: {limits: {memory: 256MiB}}
    loop: {kind: script, commands: ["dd if=/dev/zero of=/dev/null bs=1500M count=1"]}
    done_check: {commands: ["true"]}
  - name: bigfile
    repo: %[1]s
    goal: too large a file
    max_attempts: 1
    sandbox: {limits: {file_size: 1MiB}}
    loop: {kind: script, commands: ["head -c 20M /dev/zero > big.log"]}
    done_check: {commands: ["true"]}
`, repo, sample.FixCommand, marker))
	s := open(t, cfg, workitems.SystemClock{})
	t.Cleanup(func() { proctest.AssertNoProcess(t, marker) })
	s.startWorker(t, "w")
	if s.Runner.Cgroups == nil || s.Runner.Cgroups.Memory == "" || s.Runner.Cgroups.Pids == "" {
		t.Logf("no memory and pids cgroups here (%v): only file_size is tried", s.Runner.CgroupsUnavailable)
	}
	for _, tc := range []struct {
		template string
		limit    workitems.Limit
		value    string
		cgroup   bool
	}{
		{"forkbomb", workitems.LimitProcesses, "256", true},
		{"hog", workitems.LimitMemory, "256MiB", true},
		{"bigfile", workitems.LimitFileSize, "1MiB", false},
	} {
		t.Run(tc.template, func(t *testing.T) {
			if tc.cgroup && (s.Runner.Cgroups == nil || s.Runner.Cgroups.Memory == "" || s.Runner.Cgroups.Pids == "") {
				t.Skip("needs cgroups")
			}
			ctx := context.Background()
			limited, err := s.Queue.Submit(ctx, scheduler.Request{Template: tc.template})
			if err != nil {
				t.Fatal(err)
			}
			beside, err := s.Queue.Submit(ctx, scheduler.Request{Template: "quick"})
			if err != nil {
				t.Fatal(err)
			}
			got := awaitState(t, s.Store, limited.ID, workitems.StateClosed, workitems.StateEscalated)
			exit := got.Current().Exit
			if got.State != workitems.StateEscalated || exit == nil || exit.Reason != workitems.ExitFailed ||
				!strings.Contains(exit.Message, "exceeded the sandbox's "+string(tc.limit)+" limit ("+tc.value+")") {
				t.Fatalf("item %s, exit %+v: want escalated, failed naming the %s limit", got.State, exit, tc.limit)
			}
			var ev *workitems.Event
			for _, e := range events(t, s, limited.ID, workitems.EventStep) {
				if workitems.EventKind(e.Data["kind"]) == workitems.KindLimitExceeded {
					ev = &e
				}
			}
			if ev == nil || ev.Data["limit"] != string(tc.limit) || ev.Data["value"] != tc.value || !strings.Contains(ev.Data["command"], "command 1") {
				t.Fatalf("limit_exceeded event %+v", ev)
			}
			if b := awaitState(t, s.Store, beside.ID, workitems.StateClosed, workitems.StateEscalated); b.State != workitems.StateClosed {
				t.Fatalf("the item beside it %s: %+v", b.State, b.Decisions)
			}
			proctest.AssertNoProcess(t, marker)
			if c := s.Runner.Cgroups; c != nil {
				for _, dir := range []string{c.Memory, c.Pids} {
					if left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("outerloop-%d-*", os.Getpid()))); dir != "" && len(left) > 0 {
						t.Errorf("command groups left: %v", left)
					}
				}
			}
		})
	}
}
