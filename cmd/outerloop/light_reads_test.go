package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/scheduler/fleetview/viewtest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// fakeToolchain puts a `go` and a bubblewrap on PATH (OUTERLOOP_BWRAP) that only write their
// arguments to the returned log: whatever makes a process runner (`go env`, the sandbox probe)
// leaves a line there.
func fakeToolchain(t *testing.T) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	script := "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> " + log + "\n"
	for _, name := range []string{"go", "bwrap"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("OUTERLOOP_BWRAP", filepath.Join(dir, "bwrap"))
	t.Setenv("GOCACHE", "") // so that the runner asks `go env` for them
	t.Setenv("GOMODCACHE", "")
	return log
}

func calls(t *testing.T, log string) string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadsMakeNoProcessRunner: the CLI's reads and store commands open the store and print;
// they run no `go env` and probe no sandbox (no process runner is made), while a worker's app
// does both.
func TestReadsMakeNoProcessRunner(t *testing.T) {
	log := fakeToolchain(t)
	ctx := context.Background()
	cfg, err := config.ParseConfig([]byte(viewtest.YAML))
	if err != nil {
		t.Fatal(err)
	}
	// The fakes are the ones a runner would run.
	if _, err := app.NewRunner(ctx, cfg, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, log); !strings.Contains(got, "go env") || !strings.Contains(got, "bwrap ") {
		t.Fatalf("making a runner ran neither the fake go nor the fake bwrap: %q", got)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}

	env := redistest.New(t)
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(viewtest.YAML), 0o644); err != nil {
		t.Fatal(err)
	}
	st := itemstore.NewStore(env.Client, env.Prefix)
	it := &workitems.Item{ID: "single@1", Template: "single", Goal: "g", MaxAttempts: 1,
		Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"}}
	if err := st.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--config", path, "--redis", redistest.URL(), "--prefix", env.Prefix, "--queue", env.Queue,
		"--log-format", "json", "--workdir", t.TempDir()}
	for _, args := range [][]string{
		{"items", "single@1"}, {"items"}, {"items", "--json"}, {"escalations"}, {"audit"}, {"notify", "list"},
		{"gc", "--dry-run"}, {"templates", "status", "sweep"}, {"templates", "history", "single"},
		{"enqueue", "single"}, {"templates", "pause", "sweep"}, {"resolve", "single@1", "--cancel"},
	} {
		var out, errw bytes.Buffer
		root := newRootFor(&globals{out: &out, errw: &errw, euid: os.Geteuid})
		root.SetArgs(append(append([]string{}, base...), args...))
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("outerloop %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errw.String())
		}
		if args[0] == "items" && len(args) == 2 && !strings.Contains(out.String(), "single@1") {
			t.Errorf("outerloop items single@1 does not show the item:\n%s", out.String())
		}
		if got := calls(t, log); got != "" {
			t.Fatalf("outerloop %s made a process runner (ran %q)", strings.Join(args, " "), got)
		}
	}
}

// TestStoreCommandsParseNoTemplate: items and escalations read the store and no template, and
// the templates commands that read one template read only that one, so a wrong template does
// not stop them; a command that reads it (its own templates command, enqueue, validate) still
// names it.
func TestStoreCommandsParseNoTemplate(t *testing.T) {
	ctx := context.Background()
	env := redistest.New(t)
	body := strings.Replace(viewtest.YAML, "goal: one\n", "goal: one\n    max_attempts: -1\n", 1)
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	st := itemstore.NewStore(env.Client, env.Prefix)
	if err := st.Create(ctx, &workitems.Item{ID: "single@1", Template: "single", Goal: "g", MaxAttempts: 1}, itemstore.CreateLimits{}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out, errw bytes.Buffer
		root := newRootFor(&globals{out: &out, errw: &errw, euid: os.Geteuid})
		root.SetArgs(append([]string{"--config", path, "--redis", redistest.URL(), "--prefix", env.Prefix, "--queue", env.Queue,
			"--log-format", "json"}, args...))
		err := root.ExecuteContext(ctx)
		return out.String() + errw.String(), err
	}
	for _, args := range [][]string{{"items", "single@1"}, {"items"}, {"escalations"}, {"gc", "--dry-run"},
		{"templates", "history", "sweep"}, {"templates", "status", "sweep"}, {"templates", "controls", "sweep"}} {
		if out, err := run(args...); err != nil {
			t.Errorf("outerloop %s with a wrong template: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, args := range [][]string{{"templates", "history", "single"}, {"templates", "status", "single"}, {"enqueue", "sweep"}, {"validate"}} {
		out, err := run(args...)
		if err == nil {
			t.Errorf("outerloop %s with a wrong template succeeded:\n%s", strings.Join(args, " "), out)
			continue
		}
		if got := out + err.Error(); !strings.Contains(got, `template "single"`) || !strings.Contains(got, "max_attempts") {
			t.Errorf("outerloop %s with a wrong template: want its error naming template \"single\" and max_attempts, got %s",
				strings.Join(args, " "), got)
		}
	}
}
