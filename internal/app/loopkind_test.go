package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// patcher is a loop kind registered only by this test: it applies the sample's fix, and its
// settings check wants loop.command to name the fix (its own rule, not one in workitems).
type patcher struct{}

func (patcher) Run(_ context.Context, a *worker.Attempt) workitems.Exit {
	if err := sample.Fix(a.Workspace); err != nil {
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown, Message: err.Error()}
	}
	a.Events.Emit(context.Background(), workitems.Event{Type: workitems.EventStep, Message: "patched by " + a.Template.Loop.Command})
	return workitems.Exit{Reason: workitems.ExitCompleted, Message: "patched"}
}

func (patcher) ValidateLoop(_ *config.Config, t *config.Template) error {
	if t.Loop.Command != "sample-fix" {
		return &config.ConfigError{Field: "loop.command", Err: fmt.Errorf("%q is not a fix this loop knows (want sample-fix)", t.Loop.Command)}
	}
	return nil
}

func patcherConfig(repo, kind, command string) string {
	return fmt.Sprintf(`
templates:
  - name: patch
    repo: %s
    goal: apply the fix
    budget: {wall_time: 5m, verify_reserve: 1m}
    loop: {kind: %s, command: %q}
    done_check: {commands: ["go test -json ./..."]}
`, repo, kind, command)
}

// TestARegisteredLoopKindValidatesAndRuns registers a new loop kind with the worker's registry
// and nothing else: the config accepts it (with its own settings check refusing bad settings
// and naming the field), the built-in parse refuses it as unknown, and an item of it runs
// through the worker to closed.
func TestARegisteredLoopKindValidatesAndRuns(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	reg := worker.NewRegistry()
	reg.Register("patcher", patcher{})

	_, err := parseConfig([]byte(patcherConfig(repo, "patcher", "sample-fix")))
	var ce *config.ConfigError
	if !errors.As(err, &ce) || ce.Field != "loop.kind" || !strings.Contains(err.Error(), `"patcher"`) {
		t.Fatalf("built-in kinds only: %v, want loop.kind naming patcher", err)
	}
	_, err = config.ParseConfigWith([]byte(patcherConfig(repo, "patcher", "rm -rf")), config.Kinds{Loops: reg})
	if !errors.As(err, &ce) || ce.Template != "patch" || ce.Field != "loop.command" {
		t.Fatalf("bad settings: %v, want template patch field loop.command", err)
	}
	_, err = config.ParseConfigWith([]byte(patcherConfig(repo, "script", "x")), config.Kinds{Loops: reg})
	if !errors.As(err, &ce) || ce.Field != "loop.kind" || !strings.Contains(err.Error(), "one of patcher") {
		t.Fatalf("a kind the registry lacks: %v, want loop.kind listing the registered kinds", err)
	}
	cfg, err := config.ParseConfigWith([]byte(patcherConfig(repo, "patcher", "sample-fix")), config.Kinds{Loops: reg})
	if err != nil {
		t.Fatal(err)
	}

	env := redistest.New(t)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Loops: map[workitems.LoopKind]worker.InnerLoop{"patcher": patcher{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	startAppWorker(t, a, 1, "patcher-worker")
	it := submitAndAwait(t, a, "patch", workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if it.State != workitems.StateClosed {
		t.Fatalf("item of the registered kind: %s %+v", it.State, it.Decisions)
	}

	// A process that did not register the kind refuses the config at open.
	_, err = app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t)})
	if !errors.As(err, &ce) || ce.Field != "loop.kind" {
		t.Fatalf("open without the kind: %v, want a loop.kind error", err)
	}
}
