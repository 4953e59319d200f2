package main

import (
	"context"
	"strings"
	"testing"

	"outerloop/workitems/itemstore"
)

const controlsTemplates = `  - name: nightly
    repo: REPO
    schedule: "0 3 * * *"
    goal: nightly
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: by-hand
    repo: REPO
    goal: by hand
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
`

func TestCLITemplateControls(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, controlsTemplates)
	c := newCLI(t, cfg)
	ctx := context.Background()

	if out, e, code := c.run("templates", "pause", "nightly", "--reason", "upstream down", "--actor", "alice"); code != 0 ||
		!strings.Contains(out, "paused nightly by alice") {
		t.Fatalf("pause: rc %d %q %s", code, out, e)
	}
	if _, e, code := c.run("templates", "pause", "nightly", "--actor", "bob"); code == 0 || !strings.Contains(e, "already paused (by alice") {
		t.Fatalf("second pause: rc %d %s", code, e)
	}
	if _, e, code := c.run("templates", "pause", "by-hand"); code == 0 || !strings.Contains(e, "no schedule") {
		t.Fatalf("pause of a manual template: rc %d %s", code, e)
	}
	if _, e, code := c.run("templates", "pause", "nope"); code == 0 || !strings.Contains(e, "unknown template") {
		t.Fatalf("pause of an unknown template: rc %d %s", code, e)
	}
	out, _, _ := c.run("templates", "history", "nightly")
	if !strings.Contains(out, "nightly is PAUSED by alice") || !strings.Contains(out, "upstream down") {
		t.Fatalf("history of a paused template: %q", out)
	}
	if out, e, code := c.run("templates", "run", "nightly"); code != 0 || !strings.Contains(out, "note: nightly is paused by alice") {
		t.Fatalf("run now of a paused template: rc %d %q %s", code, out, e)
	}
	if out, e, code := c.run("templates", "resume", "nightly", "--actor", "bob"); code != 0 ||
		!strings.Contains(out, "resumed nightly by bob (paused by alice") {
		t.Fatalf("resume: rc %d %q %s", code, out, e)
	}
	if _, e, code := c.run("templates", "resume", "nightly"); code == 0 || !strings.Contains(e, "not paused") {
		t.Fatalf("second resume: rc %d %s", code, e)
	}

	out, e, code := c.run("templates", "run", "by-hand", "--input", "go", "--actor", "carol")
	if code != 0 {
		t.Fatalf("run now: rc %d %s", code, e)
	}
	id := enqueuedID(t, out)
	if _, e, code := c.run("rerun", id); code == 0 || !strings.Contains(e, "still open") {
		t.Fatalf("rerun of a queued item: rc %d %s", code, e)
	}
	if _, e, code := c.run("rerun", "no-such-item"); code == 0 || !strings.Contains(e, "not found") {
		t.Fatalf("rerun of an unknown item: rc %d %s", code, e)
	}
	if _, e, code := c.run("resolve", id, "--cancel"); code != 0 {
		t.Fatalf("cancel: rc %d %s", code, e)
	}
	out, e, code = c.run("rerun", id, "--actor", "dave")
	if code != 0 || !strings.Contains(out, "re-ran "+id+" as ") {
		t.Fatalf("rerun: rc %d %q %s", code, out, e)
	}
	re := strings.Fields(out)[3]
	it, err := c.store().Get(ctx, re)
	if err != nil || it.RerunOf != id || it.Origin.Actor != "dave" || it.Attempts[0].Condition.Input != "go" {
		t.Fatalf("rerun item %+v %v", it, err)
	}
	out, _, _ = c.run("templates", "history", "by-hand")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], re) || !strings.Contains(lines[1], "of "+id) ||
		!strings.HasPrefix(lines[2], id) || !strings.Contains(lines[2], "cancelled by") || lines[3] != "1–2 of 2" {
		t.Fatalf("history:\n%s", out)
	}
	if _, e, code := c.run("templates", "history", "nope"); code == 0 || !strings.Contains(e, "unknown template") {
		t.Fatalf("history of an unknown template: rc %d %s", code, e)
	}
	out, _, _ = c.run("templates", "controls", "by-hand")
	if !strings.Contains(out, "rerun") || !strings.Contains(out, "dave") || !strings.Contains(out, "run_now") {
		t.Fatalf("controls:\n%s", out)
	}
	if n, _ := c.store().Count(ctx, itemstore.ListOptions{}); n != 3 {
		t.Errorf("%d items, want the paused template's run, the run and its re-run", n)
	}
}
