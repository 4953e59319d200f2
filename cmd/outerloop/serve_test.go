package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
