package main

import (
	"encoding/json"
	"fmt"
	"io"
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
	"outerloop/lib/testwait"
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
	deadline := testwait.Deadline(t)
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
	done := awaitState(t, c.store(), it.ID, workitems.StateClosed, workitems.StateEscalated)
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

// stopServe sends SIGTERM and waits for the process to exit cleanly, until the test's deadline
// (testwait: how long a loaded machine takes is no property of serve; the callers assert what
// serve did not wait for). A process still there then gets SIGQUIT, so that the Go runtime
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
	select {
	case err := <-exited:
		t.Logf("serve exited %s after SIGTERM (its shutdown timeout is %s)", time.Since(t0).Round(time.Millisecond), shutdownTimeout)
		if err != nil {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, b)
		}
	case <-testwait.After(t):
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second): // the runtime's dump takes a moment; the test's deadline is near
			_ = cmd.Process.Kill()
			<-exited
		}
		b, _ := os.ReadFile(logPath)
		t.Fatalf("serve still running %s after SIGTERM (its shutdown timeout is %s); its log with the goroutines at SIGQUIT:\n%s",
			time.Since(t0).Round(time.Second), shutdownTimeout, b)
	}
}

// TestServeStopsInItsBoundWithAStreamOpenAndADoneCheckRunning sends SIGTERM while a browser
// follows an item's live events and the item's done check runs (a check is not stopped by the
// attempts' yield: it would otherwise run to its own timeout while the process refuses to go).
// serve must exit 0 without waiting for the check (whose sleep would otherwise run to its end and
// mark it), the stream must end, and the attempt must be handed back, not lost: a worker started afterwards verifies it again and closes the item
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
        - "if [ ! -f %[1]s/checked ]; then touch %[1]s/checked %[1]s/READY; sleep 300 && touch %[1]s/slept; fi"
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
	waitFile(t, filepath.Join(marks, "READY"))

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
	if _, err := os.Stat(filepath.Join(marks, "slept")); err == nil {
		t.Fatal("serve waited for the done check's sleep to end before it exited")
	}
	select {
	case <-streamEnded: // EOF or a reset: either way the server let go of it
	case <-testwait.After(t):
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
	done := awaitState(t, c.store(), id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if done.State != workitems.StateClosed || done.Attempt != 1 {
		t.Fatalf("after the hand-back the item is %s at attempt %d; want closed by attempt 1", done.State, done.Attempt)
	}
}
