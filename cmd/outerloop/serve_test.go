package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, b)
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
