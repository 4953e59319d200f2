package app_test

import (
	"context"
	"strings"
	"testing"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// TestNoRunnerOpensTheStoreWithoutARunnerAndRefusesAWorker: an app opened for reads has its
// store and queue and no process runner, and a worker cannot be built from it (its commands
// would run unconfined): neither can the handler a worker is built on.
func TestNoRunnerOpensTheStoreWithoutARunnerAndRefusesAWorker(t *testing.T) {
	cfg, err := config.ParseConfig([]byte("defaults:\n  budget: {wall_time: 1m}\ntemplates:\n  - name: t\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), NoRunner: true, OneShot: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Runner != nil {
		t.Fatal("an app opened with NoRunner made a process runner")
	}
	if _, err := a.Store.List(context.Background(), itemstore.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every part that runs attempts refuses: the worker, and the handler it (or a test, or a
	// tool) is built on, whose done checks would run without a sandbox.
	for name, build := range map[string]func(){"Worker": func() { a.Worker(1, "w") }, "Handler": func() { a.Handler("w") }} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, "NoRunner") {
					t.Fatalf("%s of an app without a runner: want a panic naming NoRunner, got %v", name, r)
				}
			}()
			build()
		}()
	}
}
