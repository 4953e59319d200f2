package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/workitems"
)

// The new user's afternoon (issue 12): a worker runs; a template is added to outerloop.yaml and
// enqueued at once. The worker, whose config is older than the file, reloads before deciding
// and runs the item (it failed it for good before). An item of a removed template is escalated
// with the reason: internal/app TestItemOfChangedTemplate.
func TestCLIWorkerRunsTemplateAddedAfterItStarted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "outerloop.yaml")
	tmpl := func(name string) string {
		return "  - name: " + name + "\n    goal: do " + name + "\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n"
	}
	head := "defaults:\n  budget: {wall_time: 1m}\nsandbox: {mode: off}\ntemplates:\n"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(head+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(tmpl("first"))
	c := newCLI(t, cfg)
	// Polling is off: the worker learns of the new template only by reloading for the item.
	c.start("worker", "--id", "w1", "--reload-every", "0")
	out, errOut, code := c.run("enqueue", "first")
	if code != 0 {
		t.Fatalf("enqueue first: %d %s", code, errOut)
	}
	s := c.store()
	awaitState(t, s, enqueuedID(t, out), workitems.StateClosed)

	write(tmpl("first") + tmpl("added"))
	out, errOut, code = c.run("enqueue", "added")
	if code != 0 {
		t.Fatalf("enqueue added: %d %s", code, errOut)
	}
	id := enqueuedID(t, out)
	it := awaitState(t, s, id, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if it.State != workitems.StateClosed {
		t.Fatalf("item of the added template: %s %+v, want closed", it.State, it.Escalation)
	}
	out, _, _ = c.run("items", id)
	if !strings.Contains(out, "created under: config "+it.Pin.Config) {
		t.Errorf("items %s does not show the config it was created under:\n%s", id, out)
	}
}
