package verify

import (
	"context"
	"fmt"
	"os"
	"time"

	"outerloop/proc"
	"outerloop/workitems"
)

// CommandResult is what one done-check command did.
type CommandResult struct {
	Command  string        `json:"command"`
	ExitCode int           `json:"exit_code"` // -1 when it did not exit on its own
	TimedOut bool          `json:"timed_out,omitempty"`
	Infra    string        `json:"infra,omitempty"` // why the command could not run at all
	Elapsed  time.Duration `json:"elapsed"`
	Tail     string        `json:"tail,omitempty"` // bounded tail of stdout+stderr
	// Limit says which sandbox limit stopped the command ("" when none), as a sentence naming
	// the limit, its value and the setting.
	Limit  string `json:"limit,omitempty"`
	Stdout string `json:"-"` // file holding the full stdout (removed by the caller)
}

// OK reports whether the command ran and exited 0.
func (c CommandResult) OK() bool { return c.Infra == "" && !c.TimedOut && c.ExitCode == 0 }

// commandSpec is the spec of one done-check command of f's attempt: the workspace, the
// scrubbed environment, the template's sandbox (network registries unless it says otherwise).
func commandSpec(f *Facts, workspace, cmd string, timeout time.Duration) proc.Spec {
	key := ""
	if f.Item != nil {
		key = fmt.Sprintf("%s/%d", f.Item.ID, f.Attempt)
	}
	return proc.Spec{Command: cmd, Dir: workspace, Env: proc.BaseEnv(), Timeout: timeout,
		Policy: proc.PolicyFor(f.Template, workspace, proc.DefaultToolNetwork), Key: key}
}

// runCommand runs s through r: its own process group, killed with everything it started on
// timeout or cancel. Stdout goes to a temporary file (reports can be large) and to the tail;
// stderr to the tail only.
func runCommand(ctx context.Context, r *proc.Runner, s proc.Spec, tailBytes int) (CommandResult, error) {
	res := CommandResult{Command: s.Command, ExitCode: -1}
	f, err := os.CreateTemp("", "outerloop-verify-*.out")
	if err != nil {
		return res, fmt.Errorf("verify: stdout file for %q: %w", s.Command, err)
	}
	defer f.Close()
	res.Stdout = f.Name()
	s.Stdout, s.TailMax = f, tailBytes
	if pv, ok := progressFrom(ctx); ok {
		cmd := s.Command
		s.Progress = func(elapsed time.Duration, tail string) { pv.fn(cmd, elapsed, tail) }
		s.ProgressEvery = pv.every
	}
	pr := r.Run(ctx, s)
	res.Elapsed = pr.Duration
	res.Tail = pr.Tail
	switch {
	case pr.Canceled:
		return res, fmt.Errorf("verify: command %q: %w", s.Command, ctx.Err())
	case pr.TimedOut:
		res.TimedOut = true
	case pr.Err != nil:
		res.Infra = pr.Err.Error()
	case pr.Limit != "":
		// The command's own doing under the template's limits, not the infrastructure's.
		res.ExitCode = pr.ExitCode
		res.Limit = workitems.LimitExceededMessage("the done check", pr.Limit, s.Policy.Limits.Written.Get(pr.Limit))
	case pr.Signal != 0:
		// Killed by a signal we did not send (OOM killer, runner shutdown): infrastructure.
		res.Infra = "killed by signal " + pr.Signal.String()
	default:
		res.ExitCode = pr.ExitCode
	}
	return res, nil
}
