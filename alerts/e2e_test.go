package alerts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/workitems"
)

// TestARealAlertmanagerMakesOneItemAndItsResolutionCancelsIt runs Debian's prometheus and
// prometheus-alertmanager: Prometheus scrapes a gauge the test sets and fires PaymentsErrorRate
// when it is 1; Alertmanager (group_wait 1s, group_interval 2s, repeat_interval 3s,
// send_resolved, a bearer credentials_file) posts to the outerloop receiver served here. No
// worker runs, so the item stays queued: the alert's first notification, posted to two serve
// replicas, makes exactly one item with its labels and annotations in the input, the repeats
// make none, and the resolved notification cancels it.
func TestARealAlertmanagerMakesOneItemAndItsResolutionCancelsIt(t *testing.T) {
	promBin, amBin := lookBin(t, "prometheus"), lookBin(t, "prometheus-alertmanager")
	begun := time.Now()
	f := newFixture(t)

	var gauge atomic.Int64
	gauge.Store(1)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE test_payments_error gauge\ntest_payments_error %d\n", gauge.Load())
	}))
	t.Cleanup(target.Close)

	// Two serve replicas' receivers on one store, each notification they answered reported
	// on got: Alertmanager posts every notification to both.
	type answered struct {
		replica int
		status  string
		code    int
	}
	got := make(chan answered, 1000)
	receiver := func(replica int) *httptest.Server {
		inner := f.replica(t)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			var n struct{ Status string }
			_ = json.Unmarshal(body, &n)
			got <- answered{replica: replica, status: n.Status, code: rec.Code}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	replicas := []*httptest.Server{receiver(0), receiver(1)}

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := write("am-token", secrets["AM_TOKEN"]+"\n")
	amAddr := freeAddr(t)
	amCfg := write("alertmanager.yml", fmt.Sprintf(`route:
  receiver: outerloop
  group_by: [alertname]
  group_wait: 1s
  group_interval: 2s
  repeat_interval: 3s
receivers:
  - name: outerloop
    webhook_configs:
      - url: %[1]s/hooks/alertmanager/outerloop
        send_resolved: true
        http_config:
          authorization: {credentials_file: %[3]s}
      - url: %[2]s/hooks/alertmanager/outerloop
        send_resolved: true
        http_config:
          authorization: {credentials_file: %[3]s}
`, replicas[0].URL, replicas[1].URL, token))
	amExit := start(t, dir, "alertmanager", amBin, "--config.file="+amCfg, "--storage.path="+filepath.Join(dir, "am-data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=", "--log.level=warn")

	write("rules.yml", `groups:
  - name: payments
    interval: 1s
    rules:
      - alert: PaymentsErrorRate
        expr: test_payments_error == 1
        for: 0s
        labels: {severity: page}
        annotations:
          summary: payments 5xx above 2%
          description: the error rate of payments is high
          runbook_url: https://runbooks.example.com/payments
`)
	promCfg := write("prometheus.yml", fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: payments
    static_configs:
      - targets: [%q]
`, amAddr, strings.TrimPrefix(target.URL, "http://")))
	promExit := start(t, dir, "prometheus", promBin, "--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+freeAddr(t), "--rules.alert.resend-delay=1s", "--log.level=warn")

	deadline := testwait.After(t)
	// await waits until both replicas have answered a notification of status since the last
	// await.
	await := func(what string, status string) {
		t.Helper()
		seen := [2]bool{}
		for !seen[0] || !seen[1] {
			select {
			case a := <-got:
				if a.code != http.StatusOK {
					t.Fatalf("replica %d answered a %s notification %d", a.replica, a.status, a.code)
				}
				if a.status == status {
					seen[a.replica] = true
				}
			case <-amExit:
				t.Fatalf("alertmanager exited while waiting for %s; its log:\n%s", what, readLog(dir, "alertmanager"))
			case <-promExit:
				t.Fatalf("prometheus exited while waiting for %s; its log:\n%s", what, readLog(dir, "prometheus"))
			case <-deadline:
				t.Fatalf("timed out waiting for %s at both replicas; logs:\n%s\n%s", what, readLog(dir, "prometheus"), readLog(dir, "alertmanager"))
			}
		}
	}

	await("the first firing notification", "firing")
	its := f.items(t)
	if len(its) != 1 {
		t.Fatalf("%d items after the first notification reached both replicas, want 1", len(its))
	}
	it := its[0]
	in := it.Attempts[0].Condition.Input
	for _, want := range []string{"alertname=PaymentsErrorRate", "severity=page", "job=payments", "summary: payments 5xx above 2%",
		"description: the error rate of payments is high", "runbook_url: https://runbooks.example.com/payments", "Source: http"} {
		if !strings.Contains(in, want) {
			t.Errorf("the item's input lacks %q:\n%s", want, in)
		}
	}
	if it.Goal != "Find and fix the cause of payments 5xx above 2% ()" {
		t.Errorf("goal %q", it.Goal)
	}

	await("a repeat notification", "firing")
	if its := f.items(t); len(its) != 1 {
		t.Fatalf("%d items after a repeat notification, want 1", len(its))
	}
	if st := f.item(t, it.ID).State; st != workitems.StateQueued {
		t.Fatalf("the item is %s before the alert resolved, want queued (no worker runs)", st)
	}

	gauge.Store(0)
	await("the resolved notification", "resolved")
	res := f.item(t, it.ID)
	if res.State != workitems.StateCancelled || res.Origin.Alert.ResolvedAt.IsZero() || len(res.Resolution) != 1 ||
		!strings.HasPrefix(res.Resolution[0].Input, "resolved before it started at ") {
		t.Errorf("after the resolved notification: %s, resolutions %+v", res.State, res.Resolution)
	}
	if its := f.items(t); len(its) != 1 {
		t.Errorf("%d items in the end, want 1", len(its))
	}
	t.Logf("alert fired, repeated and resolved in %s", time.Since(begun).Round(time.Millisecond))
}

func (f *fixture) item(t *testing.T, id string) *workitems.Item {
	t.Helper()
	it, err := f.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// lookBin finds a binary, skipping the test when it is missing (scripts/test.sh installs both).
func lookBin(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: this test runs Debian's prometheus and prometheus-alertmanager (scripts/test.sh installs them)", name)
	}
	return p
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs bin in dir with its output in dir/<name>.log, killed at cleanup; the returned
// channel closes when it exits.
func start(t *testing.T, dir, name, bin string, args ...string) <-chan struct{} {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return exited
}

func readLog(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
	return name + ":\n" + string(b)
}
