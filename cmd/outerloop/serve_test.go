package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHTTP polls a server that was just started until it answers (its port is the only signal).
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeRunsTheWholeSystemAndStopsGracefully(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, fixTemplate)
	c := newCLI(t, cfg)
	addr := freeAddr(t)
	cmd := c.command("serve", "--addr", addr, "--queues-ui")
	cmd.Env = append(os.Environ(), "OUTERLOOP_API_TOKEN=tok-123")
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")

	req, _ := http.NewRequest("POST", base+"/api/items", strings.NewReader(`{"template":"fix","input":"from the API"}`))
	req.Header.Set("Authorization", "Bearer tok-123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var it workitems.Item
	_ = json.NewDecoder(resp.Body).Decode(&it)
	resp.Body.Close()
	if resp.StatusCode != 201 || it.ID == "" {
		t.Fatalf("enqueue over HTTP: %d %+v", resp.StatusCode, it)
	}
	done := awaitState(t, c.store(), it.ID, 2*time.Minute, workitems.StateClosed, workitems.StateEscalated)
	if done.State != workitems.StateClosed {
		t.Fatalf("item %s", done.State)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	for _, name := range []string{"outerloop_decisions_total", "outerloop_attempts_total", "outerloop_items{", "asynq_queue_size"} {
		if code != 200 || !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code, body := get("/api/items/" + it.ID); code != 200 || !strings.Contains(body, `"state": "closed"`) {
		t.Errorf("/api/items/{id}: %d", code)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, it.ID) {
		t.Errorf("console items page: %d", code)
	}
	if code, _ := get("/queues/"); code != 200 {
		t.Errorf("/queues/ (asynqmon): %d", code)
	}
	stopServe(t, cmd, logPath, DefaultShutdownTimeout)
}

// stopServe sends SIGTERM and waits for the process to exit, at most its shutdown timeout plus a
// margin for a loaded machine. A process still there then gets SIGQUIT, so that the Go runtime
// writes every goroutine's stack into its log, and the test fails with that log: a hang is
// diagnosable from the failure alone instead of ending in the test binary's timeout.
func stopServe(t *testing.T, cmd *exec.Cmd, logPath string, shutdownTimeout time.Duration) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	bound := shutdownTimeout + 30*time.Second
	select {
	case err := <-exited:
		t.Logf("serve exited %s after SIGTERM", time.Since(t0).Round(time.Millisecond))
		if err != nil {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, b)
		}
	case <-time.After(bound):
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		b, _ := os.ReadFile(logPath)
		t.Fatalf("serve still running %s after SIGTERM (its shutdown timeout is %s); its log with the goroutines at SIGQUIT:\n%s",
			bound, shutdownTimeout, b)
	}
}

// awaitPath polls for a file a child process creates (there is no event to await).
func awaitPath(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeStopsInItsBoundWithAStreamOpenAndADoneCheckRunning sends SIGTERM while a browser
// follows an item's live events and the item's done check runs (a check is not stopped by the
// attempts' yield: it would otherwise run to its own timeout while the process refuses to go).
// serve must exit 0 within its shutdown timeout, the stream must end, and the attempt must be
// handed back, not lost: a worker started afterwards verifies it again and closes the item
// without a second attempt.
func TestServeStopsInItsBoundWithAStreamOpenAndADoneCheckRunning(t *testing.T) {
	t.Parallel()
	marks := t.TempDir()
	tmpl := fmt.Sprintf(`  - name: slowcheck
    repo: REPO
    goal: make TestAdd pass
    sandbox: {mode: off}   # the done check marks files outside the workspace
    budget: {wall_time: 10m, verify_reserve: 5m}
    loop: {kind: script, commands: [%[2]q]}
    done_check:
      commands:
        - "if [ ! -f %[1]s/checked ]; then touch %[1]s/checked %[1]s/READY; sleep 300; fi"
        - "go test -json ./..."
`, marks, sample.FixCommand)
	cfg, _ := setup(t, tmpl)
	c := newCLI(t, cfg)
	addr := freeAddr(t)
	const timeout = 20 * time.Second
	cmd := c.command("serve", "--addr", addr, "--shutdown-timeout", timeout.String())
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, _ := os.Create(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	waitHTTP(t, base+"/healthz")
	out, e, code := c.run("enqueue", "slowcheck")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	id := enqueuedID(t, out)
	awaitPath(t, filepath.Join(marks, "READY"))

	resp, err := http.Get(base + "/items/" + id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("retry:"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "retry:" {
		t.Fatalf("live stream did not start: %q %v", first, err)
	}
	streamEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); streamEnded <- err }()

	stopServe(t, cmd, logPath, timeout)
	select {
	case <-streamEnded: // EOF or a reset: either way the server let go of it
	case <-time.After(10 * time.Second):
		t.Fatal("the live stream outlived the server")
	}
	it, err := c.store().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateVerifying || it.Attempt != 1 {
		t.Fatalf("after the shutdown the item is %s at attempt %d; want verifying at attempt 1 (handed back)", it.State, it.Attempt)
	}
	b, _ := os.ReadFile(logPath)
	if !strings.Contains(string(b), "its task goes back to the queue") {
		t.Errorf("serve's log does not say the attempt was handed back:\n%s", b)
	}

	c.start("worker", "--id", "after")
	done := awaitState(t, c.store(), id, 3*time.Minute, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if done.State != workitems.StateClosed || done.Attempt != 1 {
		t.Fatalf("after the hand-back the item is %s at attempt %d; want closed by attempt 1", done.State, done.Attempt)
	}
}

// TestKilledAgentWorkerResumesWithoutRerunningTheInterruptedTool kills a worker process while
// the agent's shell tool runs. The worker that takes over resumes from the last checkpoint: the
// tool call that had started but recorded no output gets "interrupted; outcome unknown" and is
// not run again; the model sees that and finishes.
func TestKilledAgentWorkerResumesWithoutRerunningTheInterruptedTool(t *testing.T) {
	t.Parallel()
	srv := modeltest.NewResponsesServer(t)
	marks := t.TempDir()
	runs := filepath.Join(marks, "runs")
	srv.Enqueue(
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c1", Name: "shell",
			Arguments: fmt.Sprintf(`{"command":"echo run >> %s; echo $$ > %s/pid; touch %s/READY; sleep 120"}`, runs, marks, marks)}),
		modeltest.Text("The long command was interrupted; the code is fine as it is."),
	)
	tmpl := `  - name: agent
    repo: REPO
    goal: look around
    sandbox: {mode: off}   # the tool call marks files outside the workspace
    loop: {kind: agent, provider: local}
    done_check: {commands: ["true"]}
`
	cfg, repo := setup(t, tmpl)
	// The agent loop needs a provider; the done check must pass: fix the repo first.
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	withProvider := strings.Replace(string(b), "templates:", fmt.Sprintf("providers:\n  local: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s}\ntemplates:",
		srv.URL, modeltest.KeyEnv, modeltest.Model), 1)
	withProvider = strings.Replace(withProvider, `done_check: {commands: ["true"]}`, `done_check: {commands: ["go test -json ./..."]}`, 1)
	_ = os.WriteFile(cfg, []byte(withProvider), 0o644)
	c := newCLI(t, cfg)
	env := append(os.Environ(), modeltest.KeyEnv+"="+modeltest.Key)
	a := c.command("worker", "--id", "A")
	a.Env = env
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	out, e, code := c.run("enqueue", "agent")
	if code != 0 {
		t.Fatalf("enqueue: %s", e)
	}
	id := enqueuedID(t, out)
	waitFile(t, filepath.Join(marks, "READY"))
	_ = a.Process.Signal(syscall.SIGKILL)
	_ = a.Wait()
	if pb, err := os.ReadFile(filepath.Join(marks, "pid")); err == nil {
		var pid int
		fmt.Sscan(string(pb), &pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL) // the tool's process group outlives a SIGKILLed worker
	}
	bw := c.command("worker", "--id", "B")
	bw.Env = env
	if err := bw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bw.Process.Signal(syscall.SIGTERM); _ = bw.Wait() })
	it := awaitState(t, c.store(), id, 4*time.Minute, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || it.Attempts[0].Resumes < 1 {
		t.Fatalf("want closed after a resume: %s resumes %d", it.State, it.Attempts[0].Resumes)
	}
	rb, _ := os.ReadFile(runs)
	if n := strings.Count(string(rb), "run"); n != 1 {
		t.Fatalf("the interrupted shell command ran %d times; it must not be re-run", n)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d, want 2 (the first is not re-sent after the resume)", len(reqs))
	}
	var sawInterrupted bool
	for _, in := range reqs[1].Input {
		if in.CallID == "c1" && strings.Contains(strings.ToLower(in.Output), "interrupted") {
			sawInterrupted = true
		}
	}
	if !sawInterrupted {
		t.Fatalf("request 2 must carry c1 with an 'interrupted' output: %+v", reqs[1].Input)
	}
}

// TestShutdownPastItsDeadlineNamesWhatStillStopsAndExits1 holds a shutdown stage past the hard
// deadline: the stopper must log the stage, write the goroutines' stacks and exit 1.
func TestShutdownPastItsDeadlineNamesWhatStillStopsAndExits1(t *testing.T) {
	t.Parallel()
	var logs, stacks bytes.Buffer
	codes := make(chan int, 1)
	st := &stopper{log: slog.New(slog.NewJSONHandler(&logs, nil)), stack: &stacks, exit: func(c int) { codes <- c }}
	entered, release := make(chan struct{}), make(chan struct{})
	go st.stage("stuck component", func() { close(entered); <-release })
	<-entered
	st.arm(time.Millisecond)
	code := <-codes
	close(release)
	st.disarm()
	if code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(logs.String(), `"still_stopping":["stuck component"]`) {
		t.Fatalf("the log does not name the stage still stopping: %s", logs.String())
	}
	if !strings.Contains(stacks.String(), "goroutine ") || !strings.Contains(stacks.String(), "TestShutdownPastItsDeadline") {
		t.Fatalf("no goroutine dump with the stuck stage's stack: %.300s", stacks.String())
	}
}

// TestSecondSignalDuringShutdownExitsAtOnce: an operator's second SIGTERM must not wait for the
// deadline.
func TestSecondSignalDuringShutdownExitsAtOnce(t *testing.T) {
	var logs bytes.Buffer
	codes := make(chan int, 1)
	st := &stopper{log: slog.New(slog.NewJSONHandler(&logs, nil)), stack: io.Discard, exit: func(c int) { codes <- c }}
	st.arm(time.Hour)
	defer st.disarm()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil { // caught by arm's signal.Notify
		t.Fatal(err)
	}
	if code := <-codes; code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
	if !strings.Contains(logs.String(), "second signal during shutdown") {
		t.Fatalf("log: %s", logs.String())
	}
}
