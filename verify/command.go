package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// CommandResult is what one done-check command did.
type CommandResult struct {
	Command  string        `json:"command"`
	ExitCode int           `json:"exit_code"` // -1 when it did not exit on its own
	TimedOut bool          `json:"timed_out,omitempty"`
	Infra    string        `json:"infra,omitempty"` // why the command could not run at all
	Elapsed  time.Duration `json:"elapsed"`
	Tail     string        `json:"tail,omitempty"` // bounded tail of stdout+stderr
	Stdout   string        `json:"-"`              // file holding the full stdout (removed by the caller)
}

// OK reports whether the command ran and exited 0.
func (c CommandResult) OK() bool { return c.Infra == "" && !c.TimedOut && c.ExitCode == 0 }

// tailWriter is an io.Writer keeping a bounded tail.
type tailWriter struct{ t tail }

func (w *tailWriter) Write(p []byte) (int, error) { w.t.write(p); return len(p), nil }

// runCommand runs cmd with sh -c in dir, in its own process group, killed as a group on timeout
// or cancel. Stdout goes to a temporary file (reports can be large) and to the tail; stderr to
// the tail only.
func runCommand(ctx context.Context, dir, cmd string, timeout time.Duration, tailBytes int) (CommandResult, error) {
	res := CommandResult{Command: cmd, ExitCode: -1}
	f, err := os.CreateTemp("", "outerloop-verify-*.out")
	if err != nil {
		return res, fmt.Errorf("verify: stdout file for %q: %w", cmd, err)
	}
	defer f.Close()
	res.Stdout = f.Name()

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tw := &tailWriter{t: tail{n: tailBytes}}
	c := exec.CommandContext(cctx, "sh", "-c", cmd)
	c.Dir = dir
	c.Stdout = multiWriter{f, tw}
	c.Stderr = tw
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second // output pipes held by orphans must not hang us
	start := time.Now()
	err = c.Run()
	if c.Process != nil {
		// Background children a check left behind must not outlive it.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	res.Elapsed = time.Since(start)
	res.Tail = tw.t.String()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.ExitCode = 0
	case cctx.Err() != nil && ctx.Err() == nil:
		res.TimedOut = true
	case ctx.Err() != nil:
		return res, fmt.Errorf("verify: command %q: %w", cmd, ctx.Err())
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// Killed by a signal we did not send (OOM killer, runner shutdown): infrastructure.
			res.Infra = "killed by signal " + ws.Signal().String()
		}
	default:
		res.Infra = err.Error()
	}
	return res, nil
}

type multiWriter [2]interface{ Write([]byte) (int, error) }

func (m multiWriter) Write(p []byte) (int, error) {
	if _, err := m[0].Write(p); err != nil {
		return 0, err
	}
	return m[1].Write(p)
}

// looksLikeReport reports whether a command's output file starts like a test report, so a
// plain command's output (make, lint) is not mistaken for missing tests.
func looksLikeReport(head []byte) bool {
	f := detectFormat(head, "")
	return f != ""
}
