package agentloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
)

const compactInstructions = "You are handing this task over to another engineer who will continue it. " +
	"Summarise the conversation so far: the goal, what was found, what was changed (files and why), " +
	"what the last tool results showed, and what remains to be done. Be specific and brief."

const compactPrompt = "Write the hand-off summary now. Do not call tools."

// summaryPrefix starts the hand-off item that replaces compacted history in later requests.
const summaryPrefix = "Hand-off summary of the work so far (earlier history was compacted):\n"

// compactTries is how many summary requests one compaction makes before the turn ends.
const compactTries = 2

// compact replaces the history since the last compaction with a hand-off summary. History is
// only moved past once a summary with text exists: an empty answer (a tool call, an empty
// message) or a failed request is tried once more, and then ends the turn with an error exit.
func (rt *runtime) compact(ctx context.Context) error {
	build := func() model.Request {
		in := append(rt.view(), model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: compactPrompt})
		return model.Request{Model: rt.modelID, Instructions: compactInstructions, Input: in, CacheKey: model.CacheKeyFor(rt.st.Turn)}
	}
	inputItems := len(rt.view())
	var summary string
	var last error
	for try := 1; try <= compactTries && summary == ""; try++ {
		resp, err := rt.stream(ctx, build)
		var be *worker.BudgetError
		switch {
		case ctx.Err() != nil || errors.As(err, &be) || errors.Is(err, errLeaseLost):
			return err
		case err != nil:
			last = err
		default:
			summary = strings.TrimSpace(resp.Text())
			if summary == "" {
				last = errors.New("the summary response has no text")
			}
		}
		if summary == "" {
			rt.emit(ctx, workitems.KindWarning, fmt.Sprintf("compaction summary %d/%d failed: %v", try, compactTries, last),
				map[string]string{"phase": string(Compacting), "try": strconv.Itoa(try)})
		}
	}
	if summary == "" {
		class := workitems.ClassOf(last)
		var me *model.Error
		if errors.As(last, &me) {
			class = me.Class
		}
		reason := workitems.ExitFailed
		if class == workitems.ClassTransient {
			reason = workitems.ExitTransientError
		}
		return &endError{exit: workitems.Exit{Reason: reason, Class: class,
			Message: fmt.Sprintf("compaction: no summary after %d tries; history kept: %v", compactTries, last)}}
	}
	rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: summaryPrefix + summary})
	rt.st.ViewStart = len(rt.history) - 1
	rt.st.CtxTokens = estimateTokens(rt.view())
	// The drain gate: when the model itself needed this follow-up, its own chain continues
	// first and queued steer input waits for the request after.
	rt.st.HoldInput = rt.st.ModelMore && len(rt.st.Input) > 0
	rt.emit(ctx, workitems.KindCompaction, "context compacted", map[string]string{
		"input_items": strconv.Itoa(inputItems), "summary_chars": strconv.Itoa(len(summary))})
	return rt.enter(ctx, Preparing)
}

func estimateTokens(items []model.Item) int64 {
	n := 0
	for _, it := range items {
		n += len(it.Text) + len(it.Arguments) + len(it.Output) + len(it.Raw)
	}
	return int64(n / 4)
}

// HookInput is what a stop hook is told (and, as JSON, a command hook's stdin).
type HookInput struct {
	TurnID         string `json:"turn_id"`
	LastMessage    string `json:"last_message"`
	StopHookActive bool   `json:"stop_hook_active"`
}

// HookResult is a stop hook's decision. Block with an empty Reason does not block.
type HookResult struct {
	Block  bool
	Reason string
}

// StopHook may keep the turn going before it completes.
type StopHook interface {
	Name() string
	Stop(ctx context.Context, in HookInput) (HookResult, error)
}

// CommandHook runs a shell command in the workspace as a stop hook: HookInput as JSON on
// stdin; stdout {"decision":"block","reason":"…"} or exit code 2 with the reason on stderr
// blocks. Any other outcome allows completion.
type CommandHook struct {
	Command string
	Dir     string
	Env     []string
	Timeout time.Duration
	Runner  *proc.Runner // nil: unconfined
	Policy  proc.Policy
	Key     string
}

// Name returns the command.
func (h CommandHook) Name() string { return h.Command }

// Stop runs the command.
func (h CommandHook) Stop(ctx context.Context, in HookInput) (HookResult, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return HookResult{}, fmt.Errorf("stop hook %q: encode input: %w", h.Command, err)
	}
	var stdout, stderr bytes.Buffer
	r := h.Runner.Run(ctx, proc.Spec{Command: h.Command, Dir: h.Dir, Env: h.Env, Timeout: timeout, TailMax: 1,
		Stdin: bytes.NewReader(stdin), Stdout: &limitedWriter{w: &stdout, n: 64 << 10}, Stderr: &limitedWriter{w: &stderr, n: 64 << 10},
		Policy: h.Policy, Key: h.Key})
	switch {
	case r.Err != nil:
		return HookResult{}, fmt.Errorf("stop hook %q: %w", h.Command, r.Err)
	case r.Canceled:
		return HookResult{}, fmt.Errorf("stop hook %q: %w", h.Command, ctx.Err())
	case r.TimedOut:
		return HookResult{}, fmt.Errorf("stop hook %q: %w", h.Command, context.DeadlineExceeded)
	case r.ExitCode == 0:
		var out struct {
			Decision string `json:"decision"`
			Reason   string `json:"reason"`
		}
		if s := bytes.TrimSpace(stdout.Bytes()); len(s) > 0 && json.Unmarshal(s, &out) == nil && out.Decision == "block" {
			return HookResult{Block: true, Reason: out.Reason}, nil
		}
		return HookResult{}, nil
	case cannotRun(h.Command, r.ExitCode, stderr.String()):
		return HookResult{}, &HookCannotRunError{Command: h.Command, ExitCode: r.ExitCode, Stderr: shorten.OneLine(stderr.String(), 300)}
	case r.ExitCode == 2:
		return HookResult{Block: true, Reason: strings.TrimSpace(stderr.String())}, nil
	}
	return HookResult{}, fmt.Errorf("stop hook %q: exit code %d: %s", h.Command, r.ExitCode, strings.TrimSpace(stderr.String()))
}

// HookCannotRunError is a stop hook that could not run at all: the shell could not find or
// execute it (exit 127, 126), or its interpreter could not open the script (`sh x.sh` exits 2
// saying "cannot open", which would otherwise read as a block). It is a configuration error:
// every attempt under this configuration would meet it.
type HookCannotRunError struct {
	Command  string
	ExitCode int
	Stderr   string
}

func (e *HookCannotRunError) Error() string {
	return fmt.Sprintf("stop hook %q cannot run (exit %d): %s", e.Command, e.ExitCode, e.Stderr)
}

// cannotRun tells a hook that never ran from one that decided: exit 126/127 from the shell,
// or exit 2 with the interpreter's own complaint (its name first) that it cannot open the
// script — a hook's own exit-2 reason is not prefixed so.
func cannotRun(command string, code int, stderr string) bool {
	if code == 126 || code == 127 {
		return true
	}
	f := strings.Fields(command)
	if code != 2 || len(f) == 0 {
		return false
	}
	line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	low := strings.ToLower(line)
	return strings.HasPrefix(line, filepath.Base(f[0])+":") &&
		(strings.Contains(low, "cannot open") || strings.Contains(low, "can't open") || strings.Contains(low, "no such file"))
}

func (rt *runtime) hooks() []StopHook {
	hs := append([]StopHook(nil), rt.l.hooks...)
	for _, c := range rt.a.Template.Loop.StopHooks {
		hs = append(hs, CommandHook{Command: c, Dir: rt.a.Workspace, Env: rt.tools.env,
			Runner: rt.tools.runner, Policy: rt.tools.policy, Key: rt.tools.key})
	}
	return hs
}

// builtinBlocks reports whether files changed since the last done check (or since the start
// when none ran). It asks once per workspace state, so a model that ignores it is not
// nagged forever.
func (rt *runtime) builtinBlocks() bool {
	if rt.a.DoneCheck == nil {
		return false
	}
	fp := fingerprint(rt.a.Workspace)
	base := rt.st.StartPrint
	if rt.st.Checked {
		base = rt.st.CheckPrint
	}
	if fp == base || fp == rt.st.NagPrint {
		return false
	}
	rt.st.NagPrint = fp
	return true
}

func (rt *runtime) stopGate(ctx context.Context) error {
	in := HookInput{TurnID: rt.st.Turn, LastMessage: rt.st.LastText, StopHookActive: rt.st.HookActive}
	var prompts []string
	builtin := rt.builtinBlocks()
	if builtin {
		prompts = append(prompts, builtinHookPrompt)
		rt.emit(ctx, workitems.KindStopHook, builtinHookPrompt, map[string]string{"hook": "builtin:done_check", "decision": "block"})
	}
	for _, h := range rt.hooks() {
		res, err := h.Stop(ctx, in)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var unrunnable *HookCannotRunError
		switch {
		case errors.As(err, &unrunnable):
			rt.emit(ctx, workitems.KindWarning, err.Error(), map[string]string{"hook": h.Name()})
			return &endError{exit: workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassNotFound,
				Message: err.Error() + " (a configuration error: a hook script outside the workspace must be named by its absolute path; `outerloop validate` checks it)"}}
		case err != nil:
			rt.emit(ctx, workitems.KindWarning, fmt.Sprintf("stop hook failed: %v", err), map[string]string{"hook": h.Name()})
		case res.Block && strings.TrimSpace(res.Reason) == "":
			rt.emit(ctx, workitems.KindWarning, "stop hook blocked without a prompt; ignored", map[string]string{"hook": h.Name()})
		case res.Block:
			prompts = append(prompts, res.Reason)
			rt.emit(ctx, workitems.KindStopHook, res.Reason, map[string]string{"hook": h.Name(), "decision": "block", "reason": res.Reason})
		}
	}
	if len(prompts) > 0 {
		text := strings.Join(prompts, "\n\n")
		// A continuation must carry something new: the same text again, after the model was
		// already sampled with stop_hook_active, only repeats the loop until the budget is
		// spent. The built-in hook blocks only on a workspace it has not seen, which is new.
		if rt.st.HookActive && !builtin && text == rt.st.LastBlock {
			return &endError{exit: workitems.Exit{Reason: workitems.ExitNoProgress,
				Message: "the stop hooks blocked twice in a row with the same continuation: " + shorten.OneLine(text, 300)}}
		}
		rt.st.LastBlock = text
		rt.append(model.Item{Kind: model.KindMessage, Role: model.RoleUser, Text: text})
		rt.st.HookActive = true
		return rt.enter(ctx, Preparing)
	}
	// At a cap the attempt is never "completed", even when the last answer fit exactly (the
	// worker applies the same rule); wall time is left to the context deadline.
	var be *worker.BudgetError
	if err := rt.a.Meter.Check(); errors.As(err, &be) && be.Kind != workitems.BudgetWallTime {
		return err
	}
	ex := workitems.Exit{Reason: workitems.ExitCompleted, LastMessage: rt.st.LastText}
	rt.st.Exit = &ex
	if err := rt.enter(ctx, Completed); err != nil {
		return err
	}
	rt.emit(ctx, workitems.KindTurnCompleted, "turn completed", map[string]string{"last_message": rt.st.LastText})
	return nil
}
