package app_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/workitems"
)

// The nightly Go dependency bump of issue 21 under the default sandbox (network registries):
// the step reaches the real Go module proxy through the worker's proxy, the done check passes,
// the item closes; a request the step makes to an unlisted host is refused, recorded on the
// item with the command, and counted.
func TestDependencyBumpClosesUnderTheDefaultSandbox(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	repo := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":        "module bump\n\ngo 1.22\n\nrequire golang.org/x/text v0.14.0\n",
		"hello.go":      "package bump\n\nimport \"golang.org/x/text/language\"\n\n// Hello names English.\nfunc Hello() string { return language.English.String() }\n",
		"hello_test.go": "package bump\n\nimport \"testing\"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != \"en\" {\n\t\tt.Fatal(\"empty\")\n\t}\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const probe = "curl -fsS -m 20 -o /dev/null https://example.com/ || echo refused as expected"
	y := fmt.Sprintf(`
defaults:
  max_attempts: 1
  budget: {wall_time: 5m, verify_reserve: 2m}
templates:
  - name: deps-bump
    repo: %s
    goal: bump the dependencies
    loop: {kind: script, commands: ["go get -u ./... && go mod tidy", %q]}
    done_check: {commands: ["go test -json ./..."]}
`, repo, probe)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, cfg, workitems.SystemClock{})
	if s.Runner.Unavailable != nil {
		t.Skipf("no sandbox here: %v", s.Runner.Unavailable)
	}
	s.startWorker(t, "w1")
	it := submitAndAwait(t, s.App, "deps-bump", workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	evs, err := s.Store.Events(context.Background(), it.ID, "", 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var refused []workitems.Event
	for _, e := range evs {
		if workitems.EventKind(e.Data["kind"]) == workitems.KindNetworkRefused {
			refused = append(refused, e)
		}
	}
	if it.State != workitems.StateClosed {
		for _, e := range evs {
			t.Logf("%s %s %v", e.Type, e.Message, e.Data)
		}
		t.Fatalf("item %s, want closed", it.State)
	}
	if len(refused) != 1 {
		t.Fatalf("network_refused events %+v, want the one to example.com", refused)
	}
	d := refused[0].Data
	if d["host"] != "example.com" || d["port"] != "443" || d["reason"] != "not_allowed" || d["command"] != probe || refused[0].Attempt != 1 {
		t.Fatalf("refusal event %+v", refused[0])
	}
	hs := httptest.NewServer(s.Metrics.Handler())
	defer hs.Close()
	if v := scrapeValues(t, hs.URL)[`outerloop_sandbox_network_refused_total{reason="not_allowed",template="deps-bump"}`]; v != 1 {
		t.Fatalf("refused counter %v, want 1", v)
	}
	if !strings.Contains(refused[0].Message, "example.com:443") {
		t.Fatalf("message %q", refused[0].Message)
	}
}
