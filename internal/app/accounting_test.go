package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/fakeclock"
	"outerloop/lib/testlog"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/worker/scriptloop"
	"outerloop/workitems"
)

// interruptedTemplate: step 1 is quick; step 2 blocks the first time (touching READY1), and the
// second time touches READY2 and waits for GO, so that a test moves the fake clock while each
// execution is inside the step; step 3 fixes the bug.
func interruptedTemplate(logDir, repo string) string {
	return fmt.Sprintf(`
  - name: interrupted
    repo: %[3]s
    goal: charge every execution's time
    sandbox: {mode: off}   # the steps wait on files outside the workspace
    loop:
      kind: script
      commands:
        - "true"
        - "if [ -f %[1]s/MARK ]; then touch %[1]s/READY2; while [ ! -f %[1]s/GO ]; do sleep 0.05; done; else touch %[1]s/MARK %[1]s/READY1; sleep 60; fi"
        - "%[2]s"
    done_check: {commands: ["go test -json ./..."]}
`, logDir, sample.FixCommand, repo)
}

// An execution interrupted by SIGTERM 12 s into a step, resumed for 40 s, charges 52 s to the
// attempt and the item: the interrupted execution's time is charged while it runs and at its
// yield, and the resumed meter starts from it (it used to start from the last checkpoint, 0 s).
func TestInterruptedExecutionsWallTimeIsCharged(t *testing.T) {
	t.Parallel()
	repo, logDir := sampleRepo(t), t.TempDir()
	s := open(t, testConfig(t, repo, interruptedTemplate(logDir, repo)), workitems.SystemClock{})
	ctx := context.Background()
	clock := fakeclock.New(time.Now())
	withClock := func(o *worker.HandlerOptions) { o.Clock = clock }
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "interrupted"})
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := s.host(t, "h1", withClock)
	done := make(chan error, 1)
	go func() { done <- h1.Process(ctx, it.ID, 1) }()
	waitFile(t, filepath.Join(logDir, "READY1"))
	clock.Advance(12 * time.Second)
	h1.Yield() // what SIGTERM does
	if err := <-done; !errors.Is(err, worker.ErrYield) {
		t.Fatalf("interrupted execution: %v", err)
	}
	charged, err := s.Store.ChargedSpend(ctx, it.ID, 1)
	if err != nil || charged.WallTime.D() != 12*time.Second {
		t.Fatalf("charged after the interrupted execution: %v (%v), want 12s", charged.WallTime, err)
	}

	h2, _ := s.host(t, "h2", withClock)
	go func() { done <- h2.Process(ctx, it.ID, 1) }()
	waitFile(t, filepath.Join(logDir, "READY2"))
	clock.Advance(40 * time.Second)
	if err := os.WriteFile(filepath.Join(logDir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("resumed execution: %v", err)
	}
	got, _ := s.Store.Get(ctx, it.ID)
	if got.State != workitems.StateClosed || got.Attempts[0].Resumes != 1 {
		t.Fatalf("want closed after one resume: %s resumes %d %+v", got.State, got.Attempts[0].Resumes, got.Decisions)
	}
	if w := got.Attempts[0].Spend.WallTime.D(); w != 52*time.Second {
		t.Errorf("attempt wall time %v, want 52s (12s interrupted + 40s resumed)", w)
	}
	if w := got.Spend.WallTime.D(); w != 52*time.Second {
		t.Errorf("item wall time %v, want 52s", w)
	}
	if got.Attempts[0].Spend.Steps != 3 {
		t.Errorf("steps %d, want 3", got.Attempts[0].Spend.Steps)
	}
}

// Configuration errors found at run time escalate after the first attempt, without retries,
// with the cause in the escalation's headline — through the real worker, verifier and shell.
func TestConfigurationErrorsEscalateAtOnceThroughTheWorker(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	missing := filepath.Join(t.TempDir(), "no-such-repo")
	noTests := t.TempDir() // a Go module without a single test
	for name, body := range map[string]string{"go.mod": "module notests\n\ngo 1.21\n", "x.go": "package notests\n\nfunc X() int { return 1 }\n"} {
		if err := os.WriteFile(filepath.Join(noTests, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, testConfig(t, repo, fmt.Sprintf(`
  - name: bad-check
    repo: %[1]s
    goal: g
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["nosuch-check-cmd ./..."]}
  - name: bad-step
    repo: %[1]s
    goal: g
    loop: {kind: script, commands: ["nosuch-step-cmd --fix"]}
    done_check: {commands: ["go test -json ./..."]}
  - name: bad-repo
    repo: %[2]s
    goal: g
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
  - name: no-tests
    repo: %[3]s
    goal: g
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["go test -json ./..."]}
`, repo, missing, noTests)), workitems.SystemClock{})
	s.startWorker(t, "w")
	ctx := context.Background()
	for tmpl, want := range map[string]string{
		"bad-check": `done-check command "nosuch-check-cmd ./..." not found (exit 127)`,
		"bad-step":  "command 1 (nosuch-step-cmd --fix) not found (exit 127)",
		"bad-repo":  "no-such-repo",
		"no-tests":  "ran no tests",
	} {
		it, err := s.Queue.Submit(ctx, scheduler.Request{Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		got := awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed, workitems.StateFailed)
		if got.State != workitems.StateEscalated || len(got.Attempts) != 1 || got.Escalation == nil {
			t.Errorf("%s: %s after %d attempts, want escalated after 1", tmpl, got.State, len(got.Attempts))
			continue
		}
		if got.Escalation.Reason != "config_error" || !strings.Contains(got.Escalation.Summary, "configuration error: ") ||
			!strings.Contains(got.Escalation.Summary, want) {
			t.Errorf("%s: escalation %s — %q, want config_error naming %q", tmpl, got.Escalation.Reason, got.Escalation.Summary, want)
		}
	}
}

// Without ci: anywhere, no forge client is built and nothing warns about a missing token, even
// with every token variable unset, through opening the app and running an item to its close.
func TestNoForgeWarningWithoutCI(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	s := openWith(t, testConfig(t, repo, ""), func(o *app.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.Getenv = func(string) string { return "" }
	})
	if len(s.Forges) != 0 {
		t.Fatalf("forge clients built without ci: or forges: %v", s.Forges)
	}
	s.startWorker(t, "w")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "fix"})
	if err != nil {
		t.Fatal(err)
	}
	if got := awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated); got.State != workitems.StateClosed {
		t.Fatalf("item %s", got.State)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if l := strings.ToLower(line); strings.Contains(l, "token") || strings.Contains(l, "github") {
			t.Errorf("a token or GitHub warning without ci: %s", line)
		}
	}
}

// A long step's elapsed time and live output tail reach the item's event log in Redis (what the
// console's item page streams) while it runs, through the real worker and runner.
func TestALongStepsOutputReachesTheItemsEventsWhileItRuns(t *testing.T) {
	t.Parallel()
	repo, marks := sampleRepo(t), t.TempDir()
	cfg := testConfig(t, repo, fmt.Sprintf(`
  - name: long
    repo: %s
    goal: g
    sandbox: {mode: off}   # the step waits on a file outside the workspace
    loop: {kind: script, commands: ["echo compiling; echo linking; while [ ! -f %s/GO ]; do sleep 0.05; done"]}
    done_check: {commands: ["true"]}
`, repo, marks))
	s := openWith(t, cfg, func(o *app.Options) {
		o.Logger = testLogger(t)
		o.Loops = map[workitems.LoopKind]worker.InnerLoop{"script": scriptloop.Loop{ProgressEvery: 100 * time.Millisecond}}
	})
	s.startWorker(t, "w")
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "long"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	var progress workitems.Event
	for after := "0"; progress.Message == ""; {
		evs, err := s.Store.Events(wctx, it.ID, after, 100, 5*time.Second) // blocks until events arrive
		if err != nil {
			t.Fatalf("no progress event: %v", err)
		}
		for _, e := range evs {
			after = e.ID
			if workitems.EventKind(e.Data["kind"]) == workitems.KindCommandProgress && strings.Contains(e.Data["tail"], "linking") {
				progress = e
			}
		}
	}
	if !strings.Contains(progress.Data["tail"], "compiling\nlinking") || !strings.Contains(progress.Message, "running for") {
		t.Errorf("progress event %+v", progress)
	}
	if err := os.WriteFile(filepath.Join(marks, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated); got.State != workitems.StateClosed {
		t.Fatalf("item %s", got.State)
	}
}

// A running done check reports like a running step: its elapsed time and output tail reach the
// item's events while it runs (through the verifier's command runner), and the item closes once
// it ends.
func TestARunningDoneCheckReportsItsOutputWhileItRuns(t *testing.T) {
	t.Parallel()
	repo, marks := sampleRepo(t), t.TempDir()
	cfg := testConfig(t, repo, fmt.Sprintf(`
  - name: slowcheck
    repo: %s
    goal: g
    sandbox: {mode: off}   # the check waits on a file outside the workspace
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["echo vetting; echo testing; while [ ! -f %s/GO ]; do sleep 0.05; done", "go test -json ./..."]}
`, repo, sample.FixCommand, marks))
	s := openWith(t, cfg, func(o *app.Options) {
		o.Logger = testLogger(t)
		o.ProgressEvery = 100 * time.Millisecond
	})
	s.startWorker(t, "w")
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "slowcheck"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithDeadline(ctx, testwait.Deadline(t))
	defer cancel()
	var progress workitems.Event
	for after := "0"; progress.Message == ""; {
		evs, err := s.Store.Events(wctx, it.ID, after, 100, 5*time.Second) // blocks until events arrive
		if err != nil {
			t.Fatalf("no progress event of the done check: %v", err)
		}
		for _, e := range evs {
			after = e.ID
			if workitems.EventKind(e.Data["kind"]) == workitems.KindCommandProgress && e.Data["check"] != "" && strings.Contains(e.Data["tail"], "testing") {
				progress = e
			}
		}
	}
	if !strings.Contains(progress.Data["tail"], "vetting\ntesting") || !strings.HasPrefix(progress.Message, "done check: echo vetting") ||
		!strings.Contains(progress.Message, "running for") {
		t.Errorf("progress event %+v", progress)
	}
	if err := os.WriteFile(filepath.Join(marks, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated); got.State != workitems.StateClosed {
		t.Fatalf("item %s", got.State)
	}
}
