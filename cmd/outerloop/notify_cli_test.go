package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/notify"
	"outerloop/workitems"
)

// TestCLIWorkerNotifiesAnEscalationAndNotifyListShowsTheDeadLetter runs the real binary: a
// worker without the sink's secret refuses to start naming it; with it, an escalated item's
// webhook fails its only attempt, `notify list --state dead` shows the dead letter, and
// `notify retry` has the running worker send it again.
func TestCLIWorkerNotifiesAnEscalationAndNotifyListShowsTheDeadLetter(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	got := make(chan []byte, 10)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			http.Error(w, "not yet", http.StatusBadGateway)
			return
		}
		if notify.Verify([]byte("cli-secret"), b, r.Header.Get(notify.HeaderSignature)) {
			got <- b
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	cfg, _ := setup(t, fixTemplate)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte(`notify:
  retry: {max_attempts: 1}
  sinks:
    hook: {kind: webhook, url: "`+recv.URL+`", secret_env: OL_CLI_TEST_SECRET}
`)...)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, cfg)

	refused := c.command("worker", "--id", "w0")
	refused.Env = append(os.Environ(), "OL_CLI_TEST_SECRET=")
	out, err := refused.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `sink "hook": secret_env OL_CLI_TEST_SECRET is not set`) {
		t.Fatalf("worker without the secret: %v\n%s", err, out)
	}

	w := c.command("worker", "--id", "w1")
	w.Env = append(os.Environ(), "OL_CLI_TEST_SECRET=cli-secret")
	logf, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	w.Stdout, w.Stderr = logf, logf
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.Process.Signal(syscall.SIGTERM)
		_ = w.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("worker log:\n%s", b)
		}
	})
	stdout, errOut, code := c.run("enqueue", "hopeless")
	if code != 0 {
		t.Fatalf("enqueue: %d %s", code, errOut)
	}
	id := enqueuedID(t, stdout)
	awaitState(t, c.store(), id, workitems.StateEscalated)

	var dead []notify.Delivery
	deadline := testwait.Deadline(t)
	for len(dead) == 0 {
		stdout, errOut, code = c.run("notify", "list", "--state", "dead", "--json")
		if code != 0 {
			t.Fatalf("notify list: %d %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(stdout), &dead); err != nil {
			t.Fatalf("notify list --json: %v\n%s", err, stdout)
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter listed")
		}
		if len(dead) == 0 {
			time.Sleep(100 * time.Millisecond) // the worker's dispatcher is another process: poll its outcome
		}
	}
	if dead[0].Item != id || !strings.Contains(dead[0].LastError, "502") || strings.Contains(stdout, recv.URL) {
		t.Errorf("dead letter: %+v", dead[0])
	}
	table, _, _ := c.run("notify", "list", "--state", "dead")
	if !strings.Contains(table, "dead") || !strings.Contains(table, id) || !strings.Contains(table, "hook") {
		t.Errorf("notify list:\n%s", table)
	}
	if _, errOut, code := c.run("notify", "list", "--state", "gone"); code == 0 || !strings.Contains(errOut, `--state "gone"`) {
		t.Errorf("bad state: %d %s", code, errOut)
	}
	if stdout, errOut, code := c.run("notify", "retry", dead[0].ID); code != 0 || !strings.Contains(stdout, "re-queued") {
		t.Fatalf("notify retry: %d %s %s", code, stdout, errOut)
	}
	select {
	case body := <-got:
		var n notify.Notification
		if err := json.Unmarshal(body, &n); err != nil || n.Item != id || n.Event != workitems.NotifyEscalation {
			t.Errorf("redelivered %s (%v)", body, err)
		}
	case <-testwait.After(t):
		t.Fatal("the re-queued notification was not sent")
	}
}
