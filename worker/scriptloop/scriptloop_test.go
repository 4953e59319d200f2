package scriptloop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/worker"
	"outerloop/worker/workertest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func attempt(t *testing.T, cmds []string, cp *workertest.Checkpoints) *worker.Attempt {
	t.Helper()
	return &worker.Attempt{
		Item: &workitems.Item{ID: "it@1"}, N: 2, Workspace: t.TempDir(),
		Condition:   workitems.Condition{Input: "TestX failed", Env: map[string]string{"EXTRA": "yes"}},
		Template:    &config.Template{Loop: config.Loop{Kind: "script", Commands: cmds}},
		Meter:       worker.NewMeter(workitems.Budget{WallTime: workitems.Duration(time.Minute)}, workitems.Spend{}, nil),
		Checkpoints: cp, Events: &workertest.Events{},
		Runner: proctest.Runner(t, proc.ModeBwrap), // the script runs sandboxed, as in production
	}
}

func TestCommandsSeeTheConditionAndRunInTheWorkspace(t *testing.T) {
	t.Parallel()
	a := attempt(t, []string{`printf '%s|%s|%s|%s' "$OUTERLOOP_ATTEMPT" "$OUTERLOOP_INPUT" "$EXTRA" "$PWD" > out.txt`}, &workertest.Checkpoints{})
	exit := New().Run(context.Background(), a)
	if exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	b, _ := os.ReadFile(filepath.Join(a.Workspace, "out.txt"))
	if got := string(b); got != "2|TestX failed|yes|"+a.Workspace {
		t.Fatalf("env seen by the command: %q", got)
	}
}

func TestAFailingCommandEndsTheAttemptFailedAndNamesIt(t *testing.T) {
	t.Parallel()
	cp := &workertest.Checkpoints{}
	a := attempt(t, []string{"true", "echo broken >&2; exit 3", "touch never"}, cp)
	exit := New().Run(context.Background(), a)
	if exit.Reason != workitems.ExitFailed || !strings.Contains(exit.Message, "command 2") || !strings.Contains(exit.Message, "exited 3") ||
		!strings.Contains(exit.LastMessage, "broken") {
		t.Fatalf("exit %+v", exit)
	}
	if _, err := os.Stat(filepath.Join(a.Workspace, "never")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a command after the failure ran")
	}
	var st checkpoint
	_ = json.Unmarshal(cp.State(), &st)
	if st.Next != 2 || len(st.Outputs) != 2 || cp.Saves() != 2 {
		t.Fatalf("a checkpoint after every command: next=%d outputs=%d saves=%d", st.Next, len(st.Outputs), cp.Saves())
	}
}

func TestAResumedAttemptContinuesAfterTheLastCheckpointedCommand(t *testing.T) {
	t.Parallel()
	done, _ := json.Marshal(checkpoint{Next: 1, Outputs: []Output{{Command: "touch first"}}})
	cp := workertest.NewCheckpoints(done)
	a := attempt(t, []string{"touch first", "touch second"}, cp)
	a.Resumed = true
	if exit := New().Run(context.Background(), a); exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	if _, err := os.Stat(filepath.Join(a.Workspace, "first")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the checkpointed command ran again")
	}
	if _, err := os.Stat(filepath.Join(a.Workspace, "second")); err != nil {
		t.Fatal("the next command did not run")
	}
}

func TestCommandTimeoutAndWallBudgetAreDifferentExits(t *testing.T) {
	t.Parallel()
	a := attempt(t, []string{"sleep 5"}, &workertest.Checkpoints{})
	a.Template.Loop.CommandTimeout = workitems.Duration(100 * time.Millisecond)
	if exit := New().Run(context.Background(), a); exit.Reason != workitems.ExitFailed || !strings.Contains(exit.Message, "timed out") {
		t.Fatalf("per-command timeout: %+v", exit)
	}
	b := attempt(t, []string{"sleep 5"}, &workertest.Checkpoints{})
	b.Meter = worker.NewMeter(workitems.Budget{WallTime: workitems.Duration(100 * time.Millisecond)}, workitems.Spend{}, nil)
	if exit := New().Run(context.Background(), b); exit.Reason != workitems.ExitBudgetExhausted || exit.Budget != workitems.BudgetWallTime {
		t.Fatalf("wall budget: %+v", exit)
	}
}

func TestALostLeaseStopsTheLoop(t *testing.T) {
	t.Parallel()
	a := attempt(t, []string{"true", "touch second"}, &workertest.Checkpoints{LoseAt: 1})
	exit := New().Run(context.Background(), a)
	if exit.Reason != workitems.ExitAborted || exit.Class != workitems.ClassConflict {
		t.Fatalf("exit %+v", exit)
	}
	if _, err := os.Stat(filepath.Join(a.Workspace, "second")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the loop went on after losing its lease")
	}
}

func TestCancelAbortsWithoutMarkingTheCommandDone(t *testing.T) {
	t.Parallel()
	cp := &workertest.Checkpoints{}
	a := attempt(t, []string{"touch started; sleep 30"}, cp)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan workitems.Exit)
	go func() { done <- New().Run(ctx, a) }()
	for {
		if _, err := os.Stat(filepath.Join(a.Workspace, "started")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond) // the child's file is the only signal that it runs
	}
	cancel()
	if exit := <-done; exit.Reason != workitems.ExitAborted {
		t.Fatalf("exit %+v", exit)
	}
	if cp.Saves() != 0 {
		t.Fatal("an interrupted command must not be checkpointed as done")
	}
}

func TestHostileScriptStepFindsNothing(t *testing.T) {
	// Not parallel: the worker's HOME is set to a home holding ~/.ssh.
	h := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	t.Setenv("HOME", h.Home)
	a := attempt(t, []string{h.InWorkspace()}, &workertest.Checkpoints{})
	h.Prepare(a.Runner)
	exit := New().Run(context.Background(), a)
	if exit.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", exit)
	}
	h.CheckWorkspace(t, a.Workspace)
}
