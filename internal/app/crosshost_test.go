package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// A "host" here is a handler with a work dir of its own: what another machine would have. They
// share the store, as workers on several machines share Redis.

func (s *sys) host(t *testing.T, id string, mod func(*worker.HandlerOptions)) (*worker.Handler, *worker.Workspaces) {
	t.Helper()
	ws := &worker.Workspaces{Root: t.TempDir(), BaseDir: s.Config.Dir, Deployment: s.Prefix(), Host: id}
	o := worker.HandlerOptions{Store: s.Store, Config: s.Config, Loops: s.Loops, Verifier: s.Verifier, Evidence: s.Judge,
		Workspaces: ws, Logger: testLogger(t), WorkerID: id}
	if mod != nil {
		mod(&o)
	}
	return worker.NewHandler(o), ws
}

func openWith(t *testing.T, cfg *config.Config, mod func(*app.Options)) *sys {
	t.Helper()
	env := redistest.New(t)
	o := app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t)}
	mod(&o)
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return &sys{App: a, env: env}
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "sample"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// stepsTemplate: step 1 writes a file; step 2 blocks the first time it runs (after leaving a
// half-done file), is quick when run again; step 3 needs step 1's file and fixes the bug.
func stepsTemplate(logDir, repo string) string {
	log := filepath.Join(logDir, "runs.log")
	return fmt.Sprintf(`
  - name: steps
    repo: %[4]s
    goal: three steps across hosts
    loop:
      kind: script
      commands:
        - "echo c1 >> %[1]s; echo one > step1.txt"
        - "if [ -f %[2]s/MARK ]; then echo c2-again >> %[1]s; else touch %[2]s/MARK; echo c2-start >> %[1]s; echo half > partial.txt; touch %[2]s/READY; sleep 60; fi; echo two > step2.txt"
        - "test -f step1.txt && %[3]s && echo three > step3.txt && echo c3 >> %[1]s"
    done_check: {commands: ["go test -json ./..."]}
`, log, logDir, sample.FixCommand, repo)
}

// interrupt runs attempt 1 of a new item on h until step 2 blocks, then yields it (a worker
// shutting down: the attempt stays running with its checkpoint after step 1).
func interrupt(t *testing.T, s *sys, h *worker.Handler, logDir string) *workitems.Item {
	t.Helper()
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Process(context.Background(), it.ID, 1) }()
	waitFile(t, filepath.Join(logDir, "READY"))
	h.Yield()
	if err := <-done; !errors.Is(err, worker.ErrYield) {
		t.Fatalf("interrupted attempt: %v", err)
	}
	mid, _ := s.Store.Get(context.Background(), it.ID)
	if mid.State != workitems.StateRunning || mid.Current().Base == nil {
		t.Fatalf("after the yield: %s base %+v", mid.State, mid.Current().Base)
	}
	return mid
}

// singleRun is the same template run once without interruption (step 2 does not block any more).
func singleRun(t *testing.T, s *sys, h *worker.Handler) *workitems.Attempt {
	t.Helper()
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Process(context.Background(), it.ID, 1); err != nil {
		t.Fatal(err)
	}
	it, _ = s.Store.Get(context.Background(), it.ID)
	if it.State != workitems.StateClosed {
		t.Fatalf("single run: %s %+v", it.State, it.Decisions)
	}
	return it.Current()
}

func events(t *testing.T, s *sys, id string, typ workitems.EventType) []workitems.Event {
	t.Helper()
	evs, err := s.Store.Events(context.Background(), id, "", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []workitems.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func TestAnotherHostResumesOnTheExactCheckpointedTree(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"git", "copy"} {
		t.Run(kind+" source", func(t *testing.T) {
			t.Parallel()
			repo, logDir := sampleRepo(t), t.TempDir()
			if kind == "git" {
				gitInit(t, repo)
			}
			s := open(t, testConfig(t, repo, stepsTemplate(logDir, repo)), workitems.SystemClock{})
			a, _ := s.host(t, "A", nil)
			mid := interrupt(t, s, a, logDir)

			b, wsB := s.host(t, "B", nil)
			if err := b.Process(context.Background(), mid.ID, 1); err != nil {
				t.Fatal(err)
			}
			done, _ := s.Store.Get(context.Background(), mid.ID)
			if done.State != workitems.StateClosed || len(done.Attempts) != 1 {
				t.Fatalf("want closed in one attempt: %s, %d attempts, %+v", done.State, len(done.Attempts), done.Decisions)
			}
			// B restored the tree of the checkpoint after step 1 from the stored diff, so step 3
			// found step 1's file; step 1 did not run again; the half-done file of the
			// interrupted step 2 is not there.
			if got := runsLog(t, logDir); got != "c1 c2-start c2-again c3" {
				t.Fatalf("runs %q", got)
			}
			restored := events(t, s, mid.ID, workitems.EventWorkspaceRestored)
			if len(restored) != 1 || restored[0].Data["from"] != "snapshot" || restored[0].Data["host"] != "B" {
				t.Fatalf("restore events: %+v", restored)
			}
			at := done.Current()
			if at.Base == nil || at.Base.Kind != workitems.BaseKind(kind) || at.Base.Commit != mid.Current().Base.Commit {
				t.Fatalf("base %+v, recorded %+v", at.Base, mid.Current().Base)
			}
			if len(events(t, s, mid.ID, workitems.EventAttemptRestarted)) != 0 {
				t.Fatal("the attempt started over")
			}
			// The result is exactly that of one uninterrupted run.
			single := singleRun(t, s, b)
			if at.ExitSnapshot == nil || at.ExitSnapshot.Tree != single.ExitSnapshot.Tree || at.Base.Commit != single.Base.Commit {
				t.Fatalf("resumed run's tree %+v, single run's %+v", at.ExitSnapshot, single.ExitSnapshot)
			}
			// Closed: B's workspace is gone at once; A's stays until A's sweeper sees the item ended.
			if _, err := os.Stat(wsB.Path(mid.ID, 1)); !os.IsNotExist(err) {
				t.Fatal("the closed item's workspace is still on B")
			}
		})
	}
}

func TestALocalWorkspaceWithChangesPastItsCheckpointIsRebuilt(t *testing.T) {
	t.Parallel()
	repo, logDir := sampleRepo(t), t.TempDir()
	s := open(t, testConfig(t, repo, stepsTemplate(logDir, repo)), workitems.SystemClock{})
	a, wsA := s.host(t, "A", nil)
	mid := interrupt(t, s, a, logDir)
	if _, err := os.Stat(filepath.Join(wsA.Path(mid.ID, 1), "partial.txt")); err != nil {
		t.Fatal("the interrupted step should have left its half-done file")
	}
	// The same host (same work dir) resumes: its workspace's tree is not the checkpoint's.
	again, _ := s.host(t, "A2", func(o *worker.HandlerOptions) { o.Workspaces = wsA })
	if err := again.Process(context.Background(), mid.ID, 1); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Store.Get(context.Background(), mid.ID)
	restored := events(t, s, mid.ID, workitems.EventWorkspaceRestored)
	if done.State != workitems.StateClosed || len(restored) != 1 || restored[0].Data["from"] != "snapshot" {
		t.Fatalf("state %s, restore events %+v", done.State, restored)
	}
	if single := singleRun(t, s, again); done.Current().ExitSnapshot.Tree != single.ExitSnapshot.Tree {
		t.Fatal("the rebuilt workspace's result differs from a single run's")
	}
}

func TestAResumeThatCannotRestoreStartsOverAndKeepsTheSpend(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		want worker.RestoreProblem
		// limit is host A's snapshot limit; between runs on A and B, spoil may change the world.
		limit int
		spoil func(t *testing.T, s *sys, it *workitems.Item, repo string)
	}{
		{name: "the diff was too large to store", want: worker.RestoreTooLarge, limit: 16},
		{name: "the base commit is gone from the source", want: worker.RestoreBaseMissing,
			spoil: func(t *testing.T, s *sys, it *workitems.Item, repo string) {
				gitIn(t, repo, "checkout", "-q", "--orphan", "rewritten")
				gitIn(t, repo, "commit", "-q", "-m", "history rewritten")
				gitIn(t, repo, "branch", "-D", "main")
				gitIn(t, repo, "branch", "-m", "main")
				gitIn(t, repo, "reflog", "expire", "--expire=now", "--all")
				gitIn(t, repo, "gc", "-q", "--prune=now")
			}},
		{name: "the stored diff makes another tree", want: worker.RestoreTreeMismatch,
			spoil: func(t *testing.T, s *sys, it *workitems.Item, repo string) {
				// Rewrite the stored diff under a lease of our own, as a bug or a bad actor might.
				ctx := context.Background()
				f, err := s.Store.AcquireLease(ctx, it.ID, 1, "spoiler", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Store.ReleaseLease(ctx, f)
				state, _, _ := s.Store.LoadCheckpoint(ctx, it.ID, 1)
				sn, err := s.Store.LoadSnapshot(ctx, it.ID, 1)
				if err != nil || sn == nil || !bytes.Contains(sn.Patch, []byte("+one")) {
					t.Fatalf("stored snapshot %+v %v", sn, err)
				}
				sn.Patch = bytes.Replace(sn.Patch, []byte("+one"), []byte("+uno"), 1)
				sn.Bytes = len(sn.Patch)
				if err := s.Store.WriteCheckpoint(ctx, f, itemstore.CheckpointWrite{State: state, Snapshot: sn}); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			repo, logDir := sampleRepo(t), t.TempDir()
			gitInit(t, repo)
			s := open(t, testConfig(t, repo, stepsTemplate(logDir, repo)), workitems.SystemClock{})
			a, _ := s.host(t, "A", func(o *worker.HandlerOptions) { o.Workspaces.SnapshotLimit = c.limit })
			mid := interrupt(t, s, a, logDir)
			if c.spoil != nil {
				c.spoil(t, s, mid, repo)
			}
			b, _ := s.host(t, "B", nil)
			if err := b.Process(context.Background(), mid.ID, 1); err != nil {
				t.Fatal(err)
			}
			done, _ := s.Store.Get(context.Background(), mid.ID)
			if done.State != workitems.StateClosed || len(done.Attempts) != 1 {
				t.Fatalf("want closed in the same attempt: %s %d %+v", done.State, len(done.Attempts), done.Decisions)
			}
			restarted := events(t, s, mid.ID, workitems.EventAttemptRestarted)
			if len(restarted) != 1 || restarted[0].Data["reason"] != string(c.want) || restarted[0].Message == "" {
				t.Fatalf("restart events %+v, want reason %s", restarted, c.want)
			}
			if len(events(t, s, mid.ID, workitems.EventWorkspaceRestored)) != 0 {
				t.Fatal("a workspace that cannot be restored was reported restored")
			}
			// From its first step: step 1 ran twice, never on a tree that was not its checkpoint's.
			if got := runsLog(t, logDir); got != "c1 c2-start c1 c2-again c3" {
				t.Fatalf("runs %q", got)
			}
			// The spend of the interrupted run (step 1, checkpointed) is kept: 1 + 3 steps.
			if got := done.Current().Spend.Steps; got != 4 {
				t.Fatalf("steps %d, want 4 (spend is never reset)", got)
			}
			if c.want == worker.RestoreBaseMissing && done.Current().Base.Commit == mid.Current().Base.Commit {
				t.Fatal("the restart must record its new base")
			}
		})
	}
}

// failingVerifier is broken infrastructure: the item stays verifying and the task is retried.
type failingVerifier struct{ worker.Verifier }

func (failingVerifier) Verify(context.Context, verify.Request) (verify.Result, error) {
	return verify.Result{}, errors.New("verifier unreachable")
}

func TestAResumeInVerifyingOnAnotherHostVerifiesTheExitTree(t *testing.T) {
	t.Parallel()
	for _, tooLarge := range []bool{false, true} {
		name := "restored from the exit snapshot"
		if tooLarge {
			name = "lost: retried"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, logDir := sampleRepo(t), t.TempDir()
			gitInit(t, repo)
			_ = os.WriteFile(filepath.Join(logDir, "MARK"), nil, 0o644) // step 2 does not block
			s := open(t, testConfig(t, repo, stepsTemplate(logDir, repo)), workitems.SystemClock{})
			a, _ := s.host(t, "A", func(o *worker.HandlerOptions) {
				o.Verifier = failingVerifier{o.Verifier}
				if tooLarge {
					o.Workspaces.SnapshotLimit = 16
				}
			})
			it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "steps"})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Process(context.Background(), it.ID, 1); err == nil {
				t.Fatal("the verifier failed: the task must be retried")
			}
			mid, _ := s.Store.Get(context.Background(), it.ID)
			if mid.State != workitems.StateVerifying || mid.Current().ExitSnapshot == nil || mid.Current().ExitSnapshot.TooLarge != tooLarge {
				t.Fatalf("after A: %s %+v", mid.State, mid.Current().ExitSnapshot)
			}
			b, _ := s.host(t, "B", nil)
			if err := b.Process(context.Background(), it.ID, 1); err != nil {
				t.Fatal(err)
			}
			got, _ := s.Store.Get(context.Background(), it.ID)
			if !tooLarge {
				restored := events(t, s, it.ID, workitems.EventWorkspaceRestored)
				if got.State != workitems.StateClosed || len(restored) != 1 || restored[0].Data["phase"] != "verifying" {
					t.Fatalf("state %s, restored %+v, decisions %+v", got.State, restored, got.Decisions)
				}
				return
			}
			// Verifying another tree would verify something else: a retry with a changed condition.
			if got.State != workitems.StateRetryWait || got.Decisions[0].Rule != workitems.RuleWorkspaceLost || got.Attempt != 2 {
				t.Fatalf("lost workspace: %s attempt %d %+v", got.State, got.Attempt, got.Decisions)
			}
			if _, err := s.Store.MarkQueued(context.Background(), it.ID, 2); err != nil {
				t.Fatal(err)
			}
			if err := b.Process(context.Background(), it.ID, 2); err != nil {
				t.Fatal(err)
			}
			if got, _ = s.Store.Get(context.Background(), it.ID); got.State != workitems.StateClosed {
				t.Fatalf("the retry: %s %+v", got.State, got.Decisions)
			}
		})
	}
}

func TestAnAgentResumedOnAnotherHostFindsItsEditsOnDisk(t *testing.T) {
	t.Parallel()
	replies := func(block chan struct{}) []modeltest.Reply {
		r := []modeltest.Reply{
			modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "w1", Name: "write_file",
				Arguments: `{"path":"NOTES.md","content":"Add subtracted; fixed.\n"}`}),
			modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "w2", Name: "apply_patch",
				Arguments: `{"patch":"*** Begin Patch\n*** Update File: calc.go\n@@\n-func Add(a, b int) int { return a - b }\n+func Add(a, b int) int { return a + b }\n*** End Patch\n"}`}),
		}
		if block != nil {
			r = append(r, modeltest.Blocked(block))
		}
		return append(r, modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "r1", Name: "read_file",
			Arguments: `{"path":"NOTES.md"}`}),
			modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "d1", Name: "run_done_check", Arguments: `{}`}),
			modeltest.Text("Fixed Add; the notes say why."))
	}
	srv := modeltest.NewResponsesServer(t)
	repo := sampleRepo(t)
	gitInit(t, repo)
	y := fmt.Sprintf(`
defaults:
  budget: {wall_time: 5m, verify_reserve: 1m, model_calls: 20}
providers:
  local: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s}
templates:
  - name: agent-fix
    repo: %s
    goal: Fix Add.
    loop: {kind: agent, provider: local}
    done_check: {commands: ["go test -json ./..."]}
`, srv.URL, modeltest.KeyEnv, modeltest.Model, repo)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	loop := agentloop.New(agentloop.WithProviderFactory(func(pc config.ProviderConfig, name string) (model.Provider, error) {
		return model.New(pc, name, srv.Getenv, nil)
	}))
	s := openWith(t, cfg, func(o *app.Options) { o.Loops = map[workitems.LoopKind]worker.InnerLoop{"agent": loop} })
	ctx := context.Background()

	started := make(chan struct{})
	srv.Enqueue(replies(started)...)
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "agent-fix"})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.host(t, "A", nil)
	done := make(chan error, 1)
	go func() { done <- a.Process(ctx, it.ID, 1) }()
	<-started // both edits made and checkpointed; the third model call hangs
	a.Yield()
	if err := <-done; !errors.Is(err, worker.ErrYield) {
		t.Fatalf("A: %v", err)
	}
	b, _ := s.host(t, "B", nil)
	if err := b.Process(ctx, it.ID, 1); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Store.Get(ctx, it.ID)
	if got.State != workitems.StateClosed {
		for i, r := range srv.Requests() {
			for _, in := range r.Input {
				t.Logf("req %d: %s %s %s %.300s", i+1, in.Type, in.Role, in.Name, in.Output+in.Content)
			}
		}
		t.Fatalf("agent item: %s %+v", got.State, got.Decisions)
	}
	// The read after the resume saw the note written before it, on the other host.
	reqs := srv.Requests()
	var read string
	for _, in := range reqs[len(reqs)-2].Input {
		if in.Type == "function_call_output" && in.CallID == "r1" {
			read = in.Output
		}
	}
	if !strings.Contains(read, "Add subtracted; fixed.") {
		t.Fatalf("the resumed agent did not find its own edit on disk: read_file said %q", read)
	}
	if r := events(t, s, it.ID, workitems.EventWorkspaceRestored); len(r) != 1 || r[0].Data["from"] != "snapshot" {
		t.Fatalf("restored: %+v", r)
	}
	// Same tree as one uninterrupted run.
	srv.Enqueue(replies(nil)...)
	it2, _ := s.Queue.Submit(ctx, scheduler.Request{Template: "agent-fix"})
	if err := b.Process(ctx, it2.ID, 1); err != nil {
		t.Fatal(err)
	}
	single, _ := s.Store.Get(ctx, it2.ID)
	if single.State != workitems.StateClosed || single.Current().ExitSnapshot.Tree != got.Current().ExitSnapshot.Tree {
		t.Fatalf("single run %s %+v vs resumed %+v", single.State, single.Current().ExitSnapshot, got.Current().ExitSnapshot)
	}
}
