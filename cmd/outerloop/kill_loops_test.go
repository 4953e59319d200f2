package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/lib/testwait"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
)

// killLease is the attempt lease the real-process kill tests give their workers: a SIGKILLed
// worker's attempt is taken over a few seconds after its last renewal (the scheduler's recover
// pass), not after asynq's own recoverer (a minute and more).
const killLease = "3s"

// readPID reads the pid a child wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// alive reports whether pid is a running process (a zombie, dead but not yet reaped, is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// awaitGone waits until the dead worker's child pid has been stopped by its guard: the guard
// notices its pipe to the SIGKILLed worker close and kills the group, so the child can never
// write after the takeover. A process's end has no event to await from outside: poll.
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the dead worker's child %d is still running: its guard did not stop it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKilledAgentWorkerResumesWithoutRerunningTheInterruptedTool kills a worker process while
// the agent's second shell tool runs. The worker that takes over resumes from the last
// checkpoint: the first tool call, checkpointed with its output, does not run again; the one
// that had started but recorded no output gets "interrupted; outcome unknown" and is not run
// again; the model sees that and finishes. The dead worker's tool is stopped by its guard and
// writes nothing after the takeover.
func TestKilledAgentWorkerResumesWithoutRerunningTheInterruptedTool(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	marks := t.TempDir()
	runs := filepath.Join(marks, "runs")
	srv.Enqueue(
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c1", Name: "shell",
			Arguments: fmt.Sprintf(`{"command":"echo c1 >> %s"}`, runs)}),
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c2", Name: "shell",
			Arguments: fmt.Sprintf(`{"command":"echo c2 >> %s; echo $$ > %s/pid; touch %s/READY; sleep 120; echo late >> %s"}`, runs, marks, marks, runs)}),
		modeltest.Text("The long command was interrupted; the code is fine as it is."),
		// The loop asks for the done check once the shell has run since the last one.
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c3", Name: "run_done_check", Arguments: "{}"}),
		modeltest.Text("The done check passes."),
	)
	tmpl := `  - name: agent
    repo: REPO
    goal: look around
    sandbox: {mode: off}   # the tool calls mark files outside the workspace
    loop: {kind: agent, provider: local}
    done_check: {commands: ["go test -json ./..."]}
`
	cfg, repo := setup(t, tmpl)
	// The agent loop needs a provider; the done check must pass: fix the repo first.
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	withProvider := strings.Replace(string(b), "templates:", fmt.Sprintf("providers:\n  local: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s}\ntemplates:",
		srv.URL, modeltest.KeyEnv, modeltest.Model), 1)
	if err := os.WriteFile(cfg, []byte(withProvider), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, cfg)
	env := append(os.Environ(), modeltest.KeyEnv+"="+modeltest.Key)
	a, _ := c.startEnv(env, "--workdir", t.TempDir(), "worker", "--id", "A", "--lease-ttl", killLease)
	out, e, code := c.run("enqueue", "agent")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	id := enqueuedID(t, out)
	waitFile(t, filepath.Join(marks, "READY"))
	_ = a.Process.Signal(syscall.SIGKILL)
	_ = a.Wait()
	child := readPID(t, filepath.Join(marks, "pid"))
	c.startEnv(env, "--workdir", t.TempDir(), "worker", "--id", "B", "--lease-ttl", killLease)
	it := awaitState(t, c.store(), id, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 || it.Attempts[0].Resumes < 1 || !strings.HasPrefix(it.Attempts[0].Worker, "B/") {
		t.Fatalf("want closed in one attempt resumed by B: %s, %d attempts, worker %s, resumes %d",
			it.State, len(it.Attempts), it.Current().Worker, it.Current().Resumes)
	}
	awaitGone(t, child)
	rb, _ := os.ReadFile(runs)
	if got := strings.Join(strings.Fields(string(rb)), " "); got != "c1 c2" {
		t.Fatalf("tool runs %q: c1 (checkpointed) and c2 (interrupted) run once each, and the dead worker's c2 never finishes", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("model requests: %d, want 5 (none is re-sent after the resume)", len(reqs))
	}
	var sawInterrupted bool
	for _, in := range reqs[2].Input {
		if in.CallID == "c2" && strings.Contains(strings.ToLower(in.Output), "interrupted") {
			sawInterrupted = true
		}
	}
	if !sawInterrupted {
		t.Fatalf("request 3 must carry c2 with an 'interrupted' output: %+v", reqs[2].Input)
	}
}

// fakeClaude is an agent CLI that speaks Claude Code's stream-json: a fresh run does step 1
// (logged, then reported as a finished tool call), starts step 2 and blocks in it; a run with
// --resume of its session does only the rest of step 2. Which one runs is outerloop's doing:
// it resumes the session recorded in the attempt's checkpoint.
const fakeClaude = `#!/bin/sh
cat > /dev/null   # the prompt
emit() { printf '%s\n' "$1"; }
init='{"type":"system","subtype":"init","session_id":"s-1","model":"fake"}'
for a in "$@"; do
  if [ "$prev" = "--resume" ] && [ "$a" = "s-1" ]; then resumed=1; fi
  prev=$a
done
if [ -n "$resumed" ]; then
  echo resume >> LOGDIR/runs
  emit "$init"
  echo two > step2.txt
  emit '{"type":"result","subtype":"success","is_error":false,"result":"step 2 done after the resume","session_id":"s-1","num_turns":1,"total_cost_usd":0}'
  exit 0
fi
echo c1 >> LOGDIR/runs
emit "$init"
echo one > step1.txt
emit '{"type":"assistant","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"echo one > step1.txt"}}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"s-1"}'
emit '{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"","is_error":false}]},"session_id":"s-1"}'
echo c2 >> LOGDIR/runs
emit '{"type":"assistant","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"sleep 120"}}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"s-1"}'
echo $$ > LOGDIR/pid
touch LOGDIR/READY
sleep 120
echo late >> LOGDIR/runs
`

// TestKilledExecWorkerResumesTheAgentsRecordedSession kills a worker process while an external
// agent (loop kind exec, a fake Claude Code CLI) is in its second step. Another worker, with a
// work dir of its own, takes the attempt over once the lease runs out and resumes the session
// the checkpoint recorded instead of starting the agent afresh, so the checkpointed step 1 does
// not run again; the item closes; the dead worker's agent is stopped by its guard and writes
// nothing after the takeover.
func TestKilledExecWorkerResumesTheAgentsRecordedSession(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	agent := filepath.Join(logDir, "fake-claude")
	if err := os.WriteFile(agent, []byte(strings.ReplaceAll(fakeClaude, "LOGDIR", logDir)), 0o755); err != nil {
		t.Fatal(err)
	}
	tmpl := `  - name: exec
    repo: REPO
    goal: two steps
    sandbox: {mode: off}   # the agent logs to files outside the workspace
    loop: {kind: exec, agent: claude, command: ` + agent + `}
    done_check: {commands: ["test -f step1.txt", "test -f step2.txt"]}
`
	cfg, _ := setup(t, tmpl)
	c := newCLI(t, cfg)
	a := c.start("--workdir", t.TempDir(), "worker", "--id", "A", "--lease-ttl", killLease)
	out, e, code := c.run("enqueue", "exec")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	id := enqueuedID(t, out)
	waitFile(t, filepath.Join(logDir, "READY"))
	// The agent's lines are checkpointed as the worker reads them: kill once step 2's start is.
	s := c.store()
	deadline := testwait.Deadline(t)
	for {
		state, _, err := s.LoadCheckpoint(t.Context(), id, 1)
		if err == nil && bytes.Contains(state, []byte(`"session":"s-1"`)) && bytes.Contains(state, []byte(`"offset":4`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step 2's start was never checkpointed: %s %v", state, err)
		}
		time.Sleep(20 * time.Millisecond) // the checkpoint key has no notification to await
	}
	_ = a.Process.Signal(syscall.SIGKILL)
	_ = a.Wait()
	child := readPID(t, filepath.Join(logDir, "pid"))
	c.start("--workdir", t.TempDir(), "worker", "--id", "B", "--lease-ttl", killLease)
	it := awaitState(t, s, id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 || it.Attempts[0].Resumes < 1 || !strings.HasPrefix(it.Attempts[0].Worker, "B/") {
		t.Fatalf("want closed in one attempt resumed by B: %s, %d attempts, worker %s, resumes %d, exit %+v",
			it.State, len(it.Attempts), it.Current().Worker, it.Current().Resumes, it.Current().Exit)
	}
	awaitGone(t, child)
	rb, _ := os.ReadFile(filepath.Join(logDir, "runs"))
	if got := strings.Join(strings.Fields(string(rb)), " "); got != "c1 c2 resume" {
		t.Fatalf("agent runs %q: step 1 once, step 2 started by A, resumed (not restarted) by B, nothing after the takeover", got)
	}
	evs, _ := s.Events(context.Background(), id, "", 1000, 0)
	var resumed bool
	for _, ev := range evs {
		if ev.Type == workitems.EventStep && strings.HasPrefix(ev.Message, "resuming claude session s-1") {
			resumed = true
		}
		if ev.Type == workitems.EventStep && strings.Contains(ev.Message, "cannot resume") {
			t.Fatalf("the agent was restarted: %s", ev.Message)
		}
	}
	if !resumed {
		t.Fatal("B did not resume the recorded session")
	}
}
