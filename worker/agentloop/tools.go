package agentloop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"outerloop/proc"
	"outerloop/worker/model"
	"outerloop/workitems"
)

// maxObservation bounds one tool output recorded in history.
const maxObservation = 64 << 10

// toolResult is one tool call's observation.
type toolResult struct {
	out    string
	failed bool
}

func errResult(format string, args ...any) toolResult {
	return toolResult{out: "error: " + fmt.Sprintf(format, args...), failed: true}
}

type toolDef struct {
	spec     model.Tool
	parallel bool // read-only: may run beside other read-only calls
	run      func(ctx context.Context, args string) toolResult
}

// toolbox holds the tools of one run, all bound to the workspace.
type toolbox struct {
	dir       string // workspace, symlinks resolved
	root      *os.Root
	env       []string // scrubbed environment for shell and hooks
	runner    *proc.Runner
	policy    proc.Policy // sandbox of the shell tool and the stop hooks
	key       string      // the attempt, for the runner's records
	defs      []toolDef
	doneCheck func(ctx context.Context) toolResult
	// progress, when set, gets a running shell call's elapsed time and output so far, every
	// progressEvery (0: proc's default).
	progress      func(time.Duration, string)
	progressEvery time.Duration
	// limited, when set, records a shell call that a sandbox limit stopped.
	limited func(command string, r proc.Result, p proc.Policy)
}

func newToolbox(workspace string, withDoneCheck bool, passEnv []string, extra map[string]string, lookup func(string) (string, bool)) (*toolbox, error) {
	if workspace == "" {
		return nil, fmt.Errorf("workspace: empty path")
	}
	dir, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", workspace, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", workspace, err)
	}
	tb := &toolbox{dir: dir, root: root, env: scrubbedEnv(passEnv, extra, lookup)}
	tb.defs = []toolDef{
		{spec: spec("read_file", "Read a text file of the workspace. Optional offset (first line, from 1) and limit (number of lines).",
			`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}`),
			parallel: true, run: tb.readFile},
		{spec: spec("list_dir", "List a directory of the workspace (directories end in /).",
			`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			parallel: true, run: tb.listDir},
		{spec: spec("search", "Search files under path for a regular expression (RE2); prints path:line: text.",
			`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"},"glob":{"type":"string"}},"required":["pattern"]}`),
			parallel: true, run: tb.search},
		{spec: spec("write_file", "Create or replace a file of the workspace with content.",
			`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`),
			run: tb.writeFile},
		{spec: spec("apply_patch", "Apply a patch in the Codex format: *** Begin Patch / *** Add File: p / *** Delete File: p / "+
			"*** Update File: p (optional *** Move to: q) with @@ hunks of ' ' context, '-' removed and '+' added lines / *** End Patch.",
			`{"type":"object","properties":{"patch":{"type":"string"}},"required":["patch"]}`),
			run: tb.applyPatch},
		{spec: spec("shell", "Run a shell command (sh -c) in the workspace. Optional timeout_seconds (default 120, max 600).",
			`{"type":"object","properties":{"command":{"type":"string"},"timeout_seconds":{"type":"integer"}},"required":["command"]}`),
			run: tb.shell},
	}
	if withDoneCheck {
		tb.defs = append(tb.defs, toolDef{spec: spec("run_done_check",
			"Run the task's done check (its tests) in the workspace and get a summary of the result.",
			`{"type":"object","properties":{}}`), run: func(ctx context.Context, _ string) toolResult { return tb.doneCheck(ctx) }})
	}
	return tb, nil
}

func spec(name, desc, schema string) model.Tool {
	return model.Tool{Name: name, Description: desc, Parameters: json.RawMessage(schema)}
}

// specs are the tools offered in every request; calls are routed to exactly these.
func (tb *toolbox) specs() []model.Tool {
	out := make([]model.Tool, len(tb.defs))
	for i, d := range tb.defs {
		out[i] = d.spec
	}
	return out
}

func (tb *toolbox) def(name string, offered []string) (toolDef, bool) {
	if !slices.Contains(offered, name) {
		return toolDef{}, false
	}
	for _, d := range tb.defs {
		if d.spec.Name == name {
			return d, true
		}
	}
	return toolDef{}, false
}

// decodeArgs parses a call's JSON arguments into dst, naming what is wrong.
func decodeArgs(tool, raw string, dst any, required ...string) error {
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return fmt.Errorf("%s: arguments are not a JSON object: %v", tool, err)
	}
	for _, f := range required {
		if _, ok := fields[f]; !ok {
			return fmt.Errorf("%s: missing required field %q", tool, f)
		}
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%s: bad arguments: %v", tool, err)
	}
	return nil
}

// join runs the ledger's calls in groups (a run of read-only calls concurrently, any other
// call alone), records their outputs in call order, and moves to Deciding.
func (rt *runtime) join(ctx context.Context) error {
	var budgetErr error
	noProgress := false
	limit := rt.a.Template.Loop.NoProgressLimit
	if limit <= 0 {
		limit = DefaultNoProgressLimit
	}
	for len(rt.st.Pending) > 0 {
		n := 1
		if d, ok := rt.tools.def(rt.st.Pending[0].Name, rt.st.Tools); ok && d.parallel {
			for n < len(rt.st.Pending) {
				d, ok := rt.tools.def(rt.st.Pending[n].Name, rt.st.Tools)
				if !ok || !d.parallel {
					break
				}
				n++
			}
		}
		group := rt.st.Pending[:n]
		results := make([]toolResult, n)
		var run []int
		for k := range group {
			switch {
			case ctx.Err() != nil:
				results[k] = toolResult{out: outputNotRun, failed: true}
				continue
			case budgetErr == nil:
				budgetErr = rt.a.Meter.Allow(workitems.BudgetToolCalls)
			}
			if budgetErr != nil {
				results[k] = toolResult{out: "not run: " + budgetErr.Error(), failed: true}
				continue
			}
			_ = rt.a.Meter.Add(workitems.Spend{ToolCalls: 1})
			group[k].Started = true
			run = append(run, k)
		}
		if len(run) > 0 {
			if err := rt.save(ctx); err != nil { // the ledger says these calls started
				return err
			}
		}
		var wg sync.WaitGroup
		for _, k := range run {
			c := group[k]
			rt.emit(ctx, workitems.KindToolCall, c.Name, map[string]string{"call_id": c.CallID, "name": c.Name, "arguments": truncate(c.Arguments, 512)})
			wg.Go(func() { results[k] = rt.callTool(ctx, c) })
		}
		wg.Wait()
		for k, c := range group {
			res := results[k]
			res.out = truncate(res.out, maxObservation)
			rt.append(model.Item{Kind: model.KindFunctionCallOutput, CallID: c.CallID, Output: res.out})
			rt.st.CtxTokens += int64(len(res.out) / 4)
			rt.emit(ctx, workitems.KindToolOutput, c.Name, map[string]string{"call_id": c.CallID, "name": c.Name,
				"failed": strconv.FormatBool(res.failed), "bytes": strconv.Itoa(len(res.out))})
			if res.failed && c.Started && ctx.Err() == nil {
				sum := sha256.Sum256([]byte(c.Name + "\x00" + c.Arguments + "\x00" + res.out))
				sig := hex.EncodeToString(sum[:12])
				if rt.st.Failures == nil {
					rt.st.Failures = map[string]int{}
				}
				rt.st.Failures[sig]++
				if rt.st.Failures[sig] >= limit {
					noProgress = true
				}
			}
		}
		rt.st.Pending = rt.st.Pending[n:]
		if err := rt.save(ctx); err != nil {
			return err
		}
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case budgetErr != nil:
		return budgetErr
	case noProgress:
		return &endError{exit: workitems.Exit{Reason: workitems.ExitNoProgress,
			Message: fmt.Sprintf("the same tool call failed the same way %d times", limit)}}
	}
	return rt.enter(ctx, Deciding)
}

// callTool runs one call; a call cancelled midway gets the "aborted" output.
func (rt *runtime) callTool(ctx context.Context, c pendingCall) toolResult {
	d, ok := rt.tools.def(c.Name, rt.st.Tools)
	if !ok {
		return errResult("unknown tool %q; the tools are: %s", c.Name, strings.Join(rt.st.Tools, ", "))
	}
	res := d.run(ctx, c.Arguments)
	if ctx.Err() != nil {
		out := outputAborted
		if res.out != "" {
			out += "\npartial output:\n" + res.out
		}
		return toolResult{out: out, failed: true}
	}
	return res
}

// runDoneCheck is the run_done_check tool; it remembers the workspace it checked.
func (rt *runtime) runDoneCheck(ctx context.Context) toolResult {
	res, err := rt.a.DoneCheck.Check(ctx)
	if err != nil {
		return errResult("run_done_check: %v", err)
	}
	rt.st.Checked, rt.st.CheckPrint = true, fingerprint(rt.a.Workspace)
	if res.Passed {
		return toolResult{out: "done check passed\n" + res.Summary}
	}
	return toolResult{out: "done check FAILED\n" + res.Summary, failed: true}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + fmt.Sprintf("\n… [%d bytes cut] …\n", len(s)-n) + s[len(s)-n/2:]
}
