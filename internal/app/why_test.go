package app_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"outerloop/scheduler"
	"outerloop/workitems"
)

// Issue 21's bump under a sandbox with no network: the real `go get` cannot reach the module
// proxy. The escalation says the sandbox did it, names the setting that allows it, and shows
// the command's own last lines; the inbox does not have to be read from the events.
func TestAnEscalationSaysTheSandboxDidIt(t *testing.T) {
	t.Parallel()
	extra := `  - name: bump
    repo: ` + sampleRepo(t) + `
    goal: bump golang.org/x/text
    max_attempts: 1
    sandbox: {network: none}
    loop: {kind: script, commands: ["go get golang.org/x/text@v0.21.0 && go mod tidy"]}
    done_check: {commands: ["go test -json ./..."]}
`
	s := open(t, testConfig(t, sampleRepo(t), extra), workitems.SystemClock{})
	s.startWorker(t, "w1")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "bump"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
	e := it.Escalation
	if it.State != workitems.StateEscalated || e == nil {
		t.Fatalf("want escalated, got %s %+v", it.State, it.Escalation)
	}
	if e.Reason != "exit_failed" || !strings.Contains(e.Cause, "sandbox") || !strings.Contains(e.Cause, "network: none") ||
		!strings.Contains(e.Cause, "network: registries") {
		t.Errorf("escalation %q does not say the sandbox's network did it and what allows it: cause %q", e.Reason, e.Cause)
	}
	if !strings.HasPrefix(e.Summary, e.Cause) {
		t.Errorf("summary %q does not lead with the cause", e.Summary)
	}
	if !strings.Contains(e.Output, "golang.org/x/text") {
		t.Errorf("escalation output %q lacks the command's own lines", e.Output)
	}
}

// Under the default registries network a step that needs an unlisted host fails; the
// escalation names the refused connection and the allow setting, from the proxy's own record
// (curl only says the tunnel failed).
func TestAnEscalationNamesTheRefusedConnection(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	extra := `  - name: fetch
    repo: ` + sampleRepo(t) + `
    goal: fetch something
    max_attempts: 1
    loop: {kind: script, commands: ["curl -fsS -m 20 -o /dev/null https://example.com/"]}
    done_check: {commands: ["go test -json ./..."]}
`
	s := open(t, testConfig(t, sampleRepo(t), extra), workitems.SystemClock{})
	s.startWorker(t, "w1")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "fetch"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed)
	e := it.Escalation
	if it.State != workitems.StateEscalated || e == nil {
		t.Fatalf("want escalated, got %s", it.State)
	}
	for _, w := range []string{"the sandbox refused connections to example.com:443 (not_allowed)", "allow: [host]"} {
		if !strings.Contains(e.Cause, w) {
			t.Errorf("cause %q lacks %q", e.Cause, w)
		}
	}
	if !strings.Contains(e.Output, "curl") {
		t.Errorf("output %q lacks curl's own message", e.Output)
	}
}
