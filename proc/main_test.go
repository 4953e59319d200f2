package proc_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"outerloop/proc"

	"outerloop/proc/proctest"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard()
	proctest.Main()
	if mode := os.Getenv("OUTERLOOP_PROCTEST_WORKER"); mode != "" {
		os.Exit(fakeWorker(proc.Mode(mode)))
	}
	goleak.VerifyTestMain(m)
}

// fakeWorker is a worker process for the SIGKILL tests: it runs the command in
// OUTERLOOP_PROCTEST_CMD through a guarded Runner and blocks until killed.
func fakeWorker(mode proc.Mode) int {
	guard, err := proc.GuardArgv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r := &proc.Runner{Mode: mode, Guard: guard, Records: os.Getenv("OUTERLOOP_PROCTEST_RECORDS")}
	if mode == proc.ModeBwrap {
		if r.Bwrap, err = proc.Probe(context.Background(), ""); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		r.ReadOnly = proc.ToolchainDirs(context.Background(), os.Environ())
	}
	dir, _ := os.Getwd()
	if mark := os.Getenv(markEnv); mark != "" {
		return stepLoop(r, dir, mark)
	}
	res := r.Run(context.Background(), proc.Spec{Command: os.Getenv("OUTERLOOP_PROCTEST_CMD"), Dir: dir, Env: proc.BaseEnv(), Key: "item-1/1"})
	fmt.Fprintf(os.Stderr, "fake worker: command ended: %+v\n", res)
	return 3
}
