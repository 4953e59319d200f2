package app

import (
	"context"
	"fmt"
)

// openRunner makes the process runner, unless the system is opened with NoRunner: a process
// that runs no attempt and no command (the CLI's reads and store commands, the scheduler, serve
// without a worker) does not check the guard, run `go env` or probe the sandbox. The runner is
// made at Open, not at first use, so that a worker whose guard cannot start fails at start.
func (a *App) openRunner(ctx context.Context) error {
	if a.opts.NoRunner {
		return nil
	}
	runner, err := NewRunner(ctx, a.opts.Config, a.opts.Workdir)
	if err != nil {
		return fmt.Errorf("app: %w", err)
	}
	runner.Logger = a.opts.Logger
	a.Runner = runner
	return nil
}

// mustRun panics when the system was opened with NoRunner: what part builds would run commands
// without a sandbox or a guard.
func (a *App) mustRun(part string) {
	if a.Runner == nil {
		panic(fmt.Sprintf("app: %s of a system opened with NoRunner: it runs attempts, and no process runner was made", part))
	}
}
