// Package scriptloop is the `script` inner loop: it runs a template's commands in the attempt's
// workspace one after another, each as its own process group with a timeout and a bounded
// output tail, and writes a checkpoint after every command so that a resumed attempt continues
// after the last one that finished.
//
// A command that exits non-zero ends the attempt with exit `failed` (a broken script needs a
// person, not a blind retry); a timed-out command likewise; the wall-time budget running out
// ends it with `budget_exhausted`. A script that runs to the end exits `completed`: a claim the
// verifier checks against the done check.
//
// Every command sees OUTERLOOP_ITEM, OUTERLOOP_ATTEMPT, OUTERLOOP_INPUT (the condition's input:
// the last failure summary or a person's answer), OUTERLOOP_WORKSPACE and
// OUTERLOOP_PROMPT_VARIANT, plus the condition's env and the names the template passes through.
package scriptloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"outerloop/proc"
	"outerloop/worker"
	"outerloop/workitems"
)

// Loop is the script inner loop.
type Loop struct {
	// ProgressEvery is how often a running command's elapsed time and output tail reach the
	// item's events (default proc.DefaultProgressEvery).
	ProgressEvery time.Duration
}

// New returns the script loop.
func New() *Loop { return &Loop{} }

// Output is what one command left behind.
type Output struct {
	Command  string             `json:"command"`
	ExitCode int                `json:"exit_code"`
	Duration workitems.Duration `json:"duration"`
	Tail     string             `json:"tail,omitempty"`
}

// checkpoint is the loop's resumable state.
type checkpoint struct {
	Next    int      `json:"next"` // index of the next command to run
	Outputs []Output `json:"outputs"`
}

// Run runs the commands from the last checkpoint on.
func (l Loop) Run(ctx context.Context, a *worker.Attempt) workitems.Exit {
	var st checkpoint
	if a.Resumed {
		raw, _, err := a.Checkpoints.Load(ctx)
		if err != nil {
			return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient, Message: err.Error()}
		}
		if raw != nil {
			if err := json.Unmarshal(raw, &st); err != nil {
				return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvariantViolation,
					Message: fmt.Sprintf("script checkpoint unreadable: %v", err)}
			}
		}
	}
	cmds := a.Template.Loop.Commands
	env := buildEnv(a)
	for i := st.Next; i < len(cmds); i++ {
		if err := a.Meter.Check(); err != nil {
			return budgetExit(err, st)
		}
		if ctx.Err() != nil {
			return workitems.Exit{Reason: workitems.ExitAborted, Message: "cancelled before command " + fmt.Sprint(i+1)}
		}
		a.Events.Emit(ctx, workitems.Event{Type: workitems.EventStep, Message: cmds[i],
			Data: map[string]string{"kind": string(workitems.KindCommandStarted), "index": fmt.Sprint(i + 1), "of": fmt.Sprint(len(cmds))}})
		timeout, byBudget := commandTimeout(a)
		policy := a.Policy(proc.DefaultToolNetwork)
		r := a.Runner.Run(ctx, proc.Spec{Command: cmds[i], Dir: a.Workspace, Env: env, Timeout: timeout, TailMax: 4 << 10,
			Policy: policy, Key: a.ProcKey(),
			Progress: l.progress(ctx, a, i, len(cmds)), ProgressEvery: l.ProgressEvery})
		_ = a.Meter.Add(workitems.Spend{Steps: 1})
		if r.Canceled {
			// Not checkpointed as done: a resumed attempt runs this command again.
			return workitems.Exit{Reason: workitems.ExitAborted, Message: fmt.Sprintf("cancelled during command %d", i+1)}
		}
		what := fmt.Sprintf("command %d (%s)", i+1, cmds[i])
		limitEv, limited := worker.LimitExceeded(what, r, policy)
		if limited {
			a.Events.Emit(ctx, limitEv)
		}
		out := Output{Command: cmds[i], ExitCode: r.ExitCode, Duration: workitems.Duration(r.Duration), Tail: r.Tail}
		st.Outputs = append(st.Outputs, out)
		st.Next = i + 1
		raw, _ := json.Marshal(st)
		if err := a.Checkpoints.Save(ctx, raw); err != nil {
			if errors.Is(err, workitems.ErrLeaseLost) {
				return workitems.Exit{Reason: workitems.ExitAborted, Class: workitems.ClassConflict, Message: "lease lost: " + err.Error()}
			}
			if ctx.Err() != nil {
				// The checkpointer retries a failed write until the attempt stops: command i+1
				// is not recorded as done, so a resumed attempt runs it again.
				return workitems.Exit{Reason: workitems.ExitAborted, Message: fmt.Sprintf("stopped while checkpointing command %d: %v", i+1, err)}
			}
			return workitems.Exit{Reason: workitems.ExitTransientError, Class: workitems.ClassTransient, Message: err.Error()}
		}
		a.Events.Emit(ctx, workitems.Event{Type: workitems.EventStep, Message: lastLine(r.Tail),
			Data: map[string]string{"kind": string(workitems.KindCommandFinished), "index": fmt.Sprint(i + 1), "exit_code": fmt.Sprint(r.ExitCode),
				"duration": r.Duration.Round(time.Millisecond).String()}})
		switch {
		case limited && r.ExitCode != 0:
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission,
				Message: limitEv.Message, LastMessage: r.Tail}
		case r.TimedOut && byBudget:
			return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: workitems.BudgetWallTime,
				Message: fmt.Sprintf("wall-time budget ran out during command %d (%s)", i+1, cmds[i]), LastMessage: r.Tail}
		case r.TimedOut:
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown,
				Message: fmt.Sprintf("command %d (%s) timed out after %s", i+1, cmds[i], timeout), LastMessage: r.Tail}
		case errors.Is(r.Err, proc.ErrSandboxUnavailable):
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission,
				Message: fmt.Sprintf("command %d (%s) refused: %v", i+1, cmds[i], r.Err)}
		case errors.Is(r.Err, proc.ErrPathRefused): // the item's own doing: a person looks
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassPermission,
				Message: fmt.Sprintf("command %d (%s) not started: %v", i+1, cmds[i], r.Err)}
		case r.Err != nil:
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound,
				Message: fmt.Sprintf("command %d (%s) could not start: %v", i+1, cmds[i], r.Err)}
		case r.ExitCode == exitNotFound: // the shell found no such command: the template's, not the attempt's, fault
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound,
				Message: fmt.Sprintf("command %d (%s) not found (exit %d)", i+1, cmds[i], r.ExitCode), LastMessage: r.Tail}
		case r.ExitCode != 0:
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown,
				Message: fmt.Sprintf("command %d (%s) exited %d", i+1, cmds[i], r.ExitCode), LastMessage: r.Tail}
		}
		if err := a.Meter.Check(); err != nil {
			return budgetExit(err, st)
		}
	}
	last := ""
	if n := len(st.Outputs); n > 0 {
		last = st.Outputs[n-1].Tail
	}
	return workitems.Exit{Reason: workitems.ExitCompleted, Message: fmt.Sprintf("%d commands ran", len(cmds)), LastMessage: last}
}

func budgetExit(err error, st checkpoint) workitems.Exit {
	var be *worker.BudgetError
	if errors.As(err, &be) {
		return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: be.Kind, Message: be.Error()}
	}
	return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown, Message: err.Error()}
}

// commandTimeout is the template's per-command timeout, or what is left of the wall-time
// budget when that is sooner (then a timeout means the budget ran out).
func commandTimeout(a *worker.Attempt) (time.Duration, bool) {
	per := a.Template.Loop.CommandTimeout.D()
	left, ok := a.Meter.WallTimeLeft() // on the meter's clock, the handler's one clock
	if !ok {
		return per, false
	}
	if left < time.Millisecond {
		left = time.Millisecond
	}
	if per == 0 || left < per {
		return left, true
	}
	return per, false
}

func buildEnv(a *worker.Attempt) []string {
	set := map[string]string{}
	for k, v := range a.Condition.Env {
		set[k] = v
	}
	set["OUTERLOOP_ITEM"] = a.Item.ID
	set["OUTERLOOP_ATTEMPT"] = fmt.Sprint(a.N)
	set["OUTERLOOP_INPUT"] = a.Condition.Input
	set["OUTERLOOP_WORKSPACE"] = a.Workspace
	set["OUTERLOOP_PROMPT_VARIANT"] = a.Condition.Strategy.PromptVariant
	return proc.Env(os.LookupEnv, a.Template.Loop.Env, set)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// exitNotFound is the shell's exit code for a command it cannot find.
const exitNotFound = 127

// progress reports command i of n while it runs (worker.ProgressEvent).
func (l Loop) progress(ctx context.Context, a *worker.Attempt, i, n int) proc.Progress {
	return func(elapsed time.Duration, tail string) {
		a.Events.Emit(ctx, worker.ProgressEvent(fmt.Sprintf("command %d of %d", i+1, n),
			map[string]string{"index": fmt.Sprint(i + 1), "of": fmt.Sprint(n)}, elapsed, tail))
	}
}
