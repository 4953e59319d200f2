package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"outerloop/fleet"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/scheduler/fleetview"
	"outerloop/scheduler/fleetview/viewtest"
	"outerloop/workitems/config"
)

// newFleetCLI is a CLI over viewtest's fleet, its items made in the CLI's Redis slice.
func newFleetCLI(t *testing.T) (*cli, map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(viewtest.YAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, path)
	cfg, err := config.ParseConfig([]byte(viewtest.YAML))
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	q := scheduler.NewQueue(c.store(), client, nil, cfg,
		scheduler.QueueOptions{Queue: c.env.Queue, Fleet: fleet.NewGate(c.env.Client, c.env.Prefix, nil)})
	return c, viewtest.Seed(t, q)
}

func TestCLIFleetTemplatesStatus(t *testing.T) {
	t.Parallel()
	c, ids := newFleetCLI(t)
	out, e, code := c.run("templates", "status", "sweep", "--limit", "2")
	if code != 0 {
		t.Fatalf("status: rc %d %s", code, e)
	}
	for _, want := range []string{"sweep: 3 repositories; next run 20", "paused no", "usage: 0 held",
		"REPOSITORY", "acme/a", ids[viewtest.Repos[0]], "#7 open", "failure 1/2", "$1.25", "acme/b", "1–2 of 3", "next page: --offset 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "acme/c") {
		t.Fatalf("the first page of 2 shows the third repository:\n%s", out)
	}
	out, e, code = c.run("templates", "status", "sweep", "--offset", "2", "--json")
	var f fleetview.Fleet
	if code != 0 || json.Unmarshal([]byte(out), &f) != nil || len(f.Rows) != 1 || f.Rows[0].Slug != "acme/c" || f.Next != nil {
		t.Fatalf("json page 2: rc %d %s %s", code, out, e)
	}
	if _, e, code := c.run("templates", "status", "nope"); code == 0 || !strings.Contains(e, "unknown template") {
		t.Fatalf("unknown template: rc %d %s", code, e)
	}
	if _, e, code := c.run("templates", "status", "single"); code == 0 || !strings.Contains(e, "one repository") ||
		!strings.Contains(e, "templates history single") {
		t.Fatalf("single-repository template: rc %d %s", code, e)
	}
	if _, e, code := c.run("templates", "status", "sweep", "--limit", "0"); code == 0 || !strings.Contains(e, "--limit 0") {
		t.Fatalf("bad limit: rc %d %s", code, e)
	}
}

// templates run on a fleet prints a line for the run and every item it made, one per line.
func TestCLITemplatesRunOnAFleetPrintsEveryItem(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(viewtest.YAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, path)
	out, e, code := c.run("templates", "run", "sweep", "--actor", "alice")
	if code != 0 {
		t.Fatalf("run: rc %d %s", code, e)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "enqueued 3 items over 3 repositories" {
		t.Fatalf("run printed:\n%s", out)
	}
	// In the order of the config's repos: c, a, b.
	for i, repo := range []string{viewtest.Repos[2], viewtest.Repos[0], viewtest.Repos[1]} {
		it, err := c.store().Get(t.Context(), lines[i+1])
		if err != nil || it.Template != "sweep" || it.Repo != repo {
			t.Fatalf("line %d: %q is %+v %v, want sweep's item of %s", i+2, lines[i+1], it, err, repo)
		}
	}
}
