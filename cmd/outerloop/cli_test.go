package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/proc"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the real outerloop command once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "outerloop-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "outerloop")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// TestMain fails the package when a test leaves a goroutine behind: every process a test starts
// is waited for (its output copiers end with it) and every Redis client closed, so no ignore is
// needed.
func TestMain(m *testing.M) {
	proc.MaybeGuard() // the runner re-executes this binary as its guard
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// setup writes a Go module whose TestAdd fails until Add is fixed, and a config around it.
func setup(t *testing.T, templates string) (cfgPath, repo string) {
	t.Helper()
	dir := t.TempDir()
	repo = filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sample.Write(repo); err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(repo, fixScriptFiles); err != nil {
		t.Fatal(err)
	}
	cfgPath = filepath.Join(dir, "outerloop.yaml")
	// build_cache: shared: the sample repository's commands compile Go in a new work dir per
	// test, where the default (a cache per repository in the work dir) would compile the
	// standard library afresh each time; the default is tested in proc and the hostile suite.
	body := "defaults:\n  max_attempts: 2\n  budget: {wall_time: 3m, verify_reserve: 1m}\nsandbox: {build_cache: shared}\ntemplates:\n" + templates
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(body, "REPO", repo)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath, repo
}

type cli struct {
	t   *testing.T
	bin string
	env *redistest.Env
	cfg string
}

func newCLI(t *testing.T, cfg string) *cli {
	return &cli{t: t, bin: binary(t), env: redistest.New(t), cfg: cfg}
}

func (c *cli) args(a ...string) []string {
	return append([]string{"--config", c.cfg, "--redis", redistest.URL(), "--prefix", c.env.Prefix, "--queue", c.env.Queue,
		"--log-format", "json"}, a...)
}

// run runs the binary to completion.
func (c *cli) run(a ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, c.args(a...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// command returns the binary with the test's isolation flags, not started.
func (c *cli) command(a ...string) *exec.Cmd { return exec.Command(c.bin, c.args(a...)...) }

// startEnv starts a long-running command with the environment env (nil: the test's); it
// returns the process and its log file (stdout and stderr), which holds everything once the
// process has exited. The process is stopped at cleanup, and its log printed if the test failed.
func (c *cli) startEnv(env []string, a ...string) (*exec.Cmd, string) {
	c.t.Helper()
	cmd := c.command(a...)
	cmd.Env = env
	logPath := filepath.Join(c.t.TempDir(), "proc.log")
	logf, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
		if c.t.Failed() {
			b, _ := os.ReadFile(logPath)
			c.t.Logf("process log %v:\n%s", a, b)
		}
	})
	return cmd, logPath
}

// start starts a long-running command (worker, serve) in the test's environment; it is
// stopped at cleanup, and its log printed if the test failed.
func (c *cli) start(a ...string) *exec.Cmd {
	c.t.Helper()
	cmd, _ := c.startEnv(nil, a...)
	return cmd
}

func (c *cli) store() *itemstore.Store { return itemstore.NewStore(c.env.Client, c.env.Prefix) }

func awaitState(t *testing.T, s *itemstore.Store, id string, states ...workitems.State) *workitems.Item {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	it, err := s.WaitFor(ctx, id, itemstore.InState(states...))
	if err != nil {
		t.Fatalf("item %s did not reach %v within %s: %v; it is %+v", id, states, time.Since(began).Round(time.Second), err, it)
	}
	return it
}

const fixTemplate = `  - name: fix
    repo: REPO
    goal: make TestAdd pass
    loop: {kind: script, commands: ["./fix.sh"]}
    done_check: {commands: ["go test -json ./..."]}
  - name: hopeless
    repo: REPO
    max_attempts: 1
    goal: cannot be fixed by echo
    loop: {kind: script, commands: ["echo nothing"]}
    done_check: {commands: ["go test -json ./..."]}
`

func enqueuedID(t *testing.T, out string) string {
	t.Helper()
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "enqueued" {
		t.Fatalf("enqueue printed %q", out)
	}
	return f[1]
}

func TestCLIEnqueueItemsEscalationsResolve(t *testing.T) {
	t.Parallel()
	cfg, repo := setup(t, fixTemplate)
	c := newCLI(t, cfg)
	c.start("worker", "--concurrency", "2", "--id", "w1")
	out, errOut, code := c.run("enqueue", "fix")
	if code != 0 {
		t.Fatalf("enqueue: %d %s", code, errOut)
	}
	fixID := enqueuedID(t, out)
	out, _, _ = c.run("enqueue", "hopeless", "--input", "try anyway", "--actor", "alice")
	hopeID := enqueuedID(t, out)
	s := c.store()
	awaitState(t, s, fixID, workitems.StateClosed)
	awaitState(t, s, hopeID, workitems.StateEscalated)

	out, _, code = c.run("items")
	if code != 0 || !strings.Contains(out, fixID) || !strings.Contains(out, "closed") || !strings.Contains(out, "escalated") {
		t.Fatalf("items:\n%s", out)
	}
	out, _, _ = c.run("items", fixID)
	for _, want := range []string{"attempt 2", "changed: input", "decision: close", "verifying → closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("items %s lacks %q:\n%s", fixID, want, out)
		}
	}
	out, _, _ = c.run("items", fixID, "--follow")
	if !strings.Contains(out, "decision close") || !strings.HasSuffix(strings.TrimSpace(out), fixID+" is closed") {
		t.Errorf("items --follow:\n%s", out)
	}
	out, _, _ = c.run("escalations")
	if !strings.Contains(out, hopeID) || !strings.Contains(out, "max_attempts") {
		t.Fatalf("escalations:\n%s", out)
	}
	// Refused resolutions change nothing.
	if _, e, code := c.run("resolve", hopeID, "--retry"); code == 0 || !strings.Contains(e, "retry changes nothing") {
		t.Fatalf("retry without input: %d %s", code, e)
	}
	if _, e, code := c.run("resolve", hopeID, "--close", "--cancel"); code == 0 || !strings.Contains(e, "exactly one") {
		t.Fatalf("two actions: %d %s", code, e)
	}
	if _, e, code := c.run("resolve", hopeID, "--retry", "--budget", "dollars=3", "--input", "x"); code == 0 || !strings.Contains(e, "dollars") {
		t.Fatalf("bad budget kind: %d %s", code, e)
	}
	if _, e, code := c.run("resolve", "no-such-item", "--close"); code == 0 || !strings.Contains(e, "not found") {
		t.Fatalf("unknown id: %d %s", code, e)
	}
	// A person fixes the repo and retries with a note: the item closes.
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	out, e, code := c.run("resolve", hopeID, "--retry", "--input", "fixed by hand", "--budget", "cost_usd=2", "--actor", "bob")
	if code != 0 || !strings.Contains(out, "retry by bob") {
		t.Fatalf("resolve: %d %s %s", code, out, e)
	}
	it := awaitState(t, s, hopeID, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || it.Resolution[0].Actor != "bob" || it.Attempts[1].Condition.Budget.CostUSD != 2 {
		t.Fatalf("after resolve: %s %+v", it.State, it.Resolution)
	}
	if _, e, code := c.run("resolve", hopeID, "--close"); code == 0 || !strings.Contains(e, "not allowed") {
		t.Fatalf("resolving a closed item: %d %s", code, e)
	}
}

func TestCLIBadConfigIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown key":  "  - name: x\n    goal: g\n    colour: red\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n",
		"bad schedule": "  - name: x\n    goal: g\n    schedule: \"61 * * * *\"\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n",
		"unknown loop": "  - name: x\n    goal: g\n    loop: {kind: robot}\n    done_check: {commands: [\"true\"]}\n",
		"malformed":    "  - name: [x\n",
	}
	for name, tmpl := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg, _ := setup(t, tmpl)
			c := newCLI(t, cfg)
			_, e, code := c.run("enqueue", "x")
			if code == 0 || !strings.Contains(e, "workitems:") {
				t.Fatalf("exit %d, stderr %q", code, e)
			}
			n, _ := c.env.Client.Keys(context.Background(), c.env.Prefix+"*").Result()
			if len(n) != 0 {
				t.Fatalf("a refused config wrote %v", n)
			}
		})
	}
}

func TestCLIVerifyExitsZeroOnlyForClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	green := filepath.Join(dir, "green.json")
	red := filepath.Join(dir, "red.json")
	_ = os.WriteFile(green, []byte(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.01}
{"Action":"pass","Package":"p","Elapsed":0.02}
`), 0o644)
	_ = os.WriteFile(red, []byte(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"a_test.go:3: boom\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.01}
{"Action":"fail","Package":"p","Elapsed":0.02}
`), 0o644)
	bin := binary(t)
	for _, tc := range []struct {
		file, decision string
		code           int
		args           []string
	}{{green, "decision: close", 0, nil}, {red, "decision: retry", 1, nil},
		// The tool's exit status is evidence: a green report from a run that exited 1 never closes.
		{green, "decision: retry — a done-check command failed", 1, []string{"--exit-code", "1"}}} {
		cmd := exec.Command(bin, append([]string{"verify", "--report", tc.file}, tc.args...)...)
		out, _ := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if cmd.ProcessState.ExitCode() != tc.code || !strings.HasPrefix(lines[len(lines)-1], tc.decision) {
			t.Errorf("%s: exit %d, last line %q", filepath.Base(tc.file), cmd.ProcessState.ExitCode(), lines[len(lines)-1])
		}
	}
}

func TestDemoRunsOnTheEmbeddedDefault(t *testing.T) {
	t.Parallel()
	s := runDemoBinary(t)
	if !strings.Contains(s, "sandbox: bwrap (") { // scripts/test.sh installs bubblewrap
		t.Errorf("the demo does not say it runs sandboxed")
	}
	checkDemoOutput(t, s)
}

// The demo on a fresh machine: no bubblewrap at all, or a bubblewrap that cannot create its
// namespaces (a container without user namespaces). It runs its own sample commands
// unsandboxed, says so in its first lines with what to do, and ends as it does sandboxed.
func TestDemoRunsWithoutASandbox(t *testing.T) {
	t.Parallel()
	failing := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, bwrap := range map[string]string{"missing": filepath.Join(t.TempDir(), "no-such-bwrap"), "no namespaces": failing} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := runDemoBinary(t, "OUTERLOOP_BWRAP="+bwrap)
			head := strings.Join(strings.SplitN(s, "\n", 6)[:5], "\n")
			for _, want := range []string{"sandbox: OFF", "unsandboxed", "install bubblewrap", "sandbox: {mode: off}"} {
				if !strings.Contains(head, want) {
					t.Errorf("the demo's first lines lack %q:\n%s", want, head)
				}
			}
			if name == "no namespaces" && !strings.Contains(head, "No permissions to create new namespace") {
				t.Errorf("the demo's first lines do not say why bubblewrap cannot start:\n%s", head)
			}
			checkDemoOutput(t, s)
		})
	}
}

func runDemoBinary(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), "demo")
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(os.Environ(), "REDIS_URL="), env...) // the demo must need nothing
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	return string(out)
}

func checkDemoOutput(t *testing.T, s string) {
	t.Helper()
	for _, want := range []string{"embedded Redis", "RECORDED model", "decision retry", "decision escalate [exit_budget_exhausted]",
		"delivery committed", "delivered results", "delivery: patch, mode patch", "| +func Add(a, b int) int { return a + b }",
		"| +\tif now.After(o.ExpiresAt.Add(RefundWindow)) {", "demo finished"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasPrefix(f[0], "fix-calc@") && (f[1] != "closed" || f[3] != "2") {
			t.Errorf("fix-calc must close after 2 attempts: %q", line)
		}
		if len(f) >= 2 && strings.HasPrefix(f[0], "slow-bump@") && f[1] != "escalated" {
			t.Errorf("slow-bump must be escalated: %q", line)
		}
		if len(f) >= 2 && strings.HasPrefix(f[0], "payment-agent@") && f[1] != "closed" {
			t.Errorf("the recorded agent must close its item: %q", line)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
}
