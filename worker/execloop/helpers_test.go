package execloop_test

import (
	"context"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/worker"
	"outerloop/worker/workertest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// events records events and lets a test wait for one.
type events struct {
	mu      sync.Mutex
	list    []workitems.Event
	waiters []waiter
}

type waiter struct {
	match func(workitems.Event) bool
	ch    chan workitems.Event
}

func (e *events) Emit(_ context.Context, ev workitems.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, ev)
	kept := e.waiters[:0]
	for _, w := range e.waiters {
		if w.match(ev) {
			w.ch <- ev
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	e.waiters = kept
}

func (e *events) all() []workitems.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]workitems.Event(nil), e.list...)
}

func (e *events) kinds() []string {
	var ks []string
	for _, ev := range e.all() {
		ks = append(ks, ev.Data["kind"])
	}
	return ks
}

// attempt is a test attempt with its doubles.
type attempt struct {
	*worker.Attempt
	cp  *workertest.Checkpoints
	ev  *events
	env map[string]string
}

func (a *attempt) lookup(k string) (string, bool) { v, ok := a.env[k]; return v, ok }

// newAttempt builds an attempt for agent in a fresh workspace.
func newAttempt(t *testing.T, agent string, budget workitems.Budget) *attempt {
	t.Helper()
	if budget.WallTime == 0 {
		budget.WallTime = workitems.Duration(5 * time.Minute)
	}
	cp, ev := &workertest.Checkpoints{}, &events{}
	tpl := &config.Template{Name: "fix-" + agent, Goal: "Make the tests pass.",
		Loop: config.Loop{Kind: "exec", Agent: agent}}
	a := &worker.Attempt{
		Item:        &workitems.Item{ID: "it-1", Goal: "Make the tests in this module pass."},
		N:           1,
		Template:    tpl,
		Config:      &config.Config{Providers: map[string]config.ProviderConfig{}},
		Workspace:   t.TempDir(),
		Meter:       worker.NewMeter(budget, workitems.Spend{}, nil),
		Checkpoints: cp,
		Events:      ev,
		Runner:      proctest.Runner(t, proc.ModeBwrap), // the agent runs sandboxed, as in production
	}
	return &attempt{Attempt: a, cp: cp, ev: ev, env: map[string]string{
		// HOME must not lie under TMPDIR: Codex refuses to create its sandbox helper under the
		// temporary directory, and with bubblewrap installed every command then fails.
		"PATH": os.Getenv("PATH"), "HOME": t.TempDir(), "TMPDIR": t.TempDir(),
	}}
}

// sampleRepo writes a Go module whose test fails until Add adds.
func sampleRepo(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"go.mod":       "module sample\n\ngo 1.22\n",
		"calc.go":      "package sample\n\n// Add returns a plus b.\nfunc Add(a, b int) int { return a - b }\n",
		"calc_test.go": "package sample\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goTestPasses runs the sample repo's tests, as the verifier would.
func goTestPasses(t *testing.T, dir string) bool {
	t.Helper()
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	t.Logf("go test in workspace: %v\n%s", err, out)
	return err == nil
}

// agentBin finds an installed agent CLI: $envVar, else scripts/setup-agents.sh's directory.
// Missing, it skips the test outside CI and fails it in CI (env CI set).
func agentBin(t *testing.T, envVar, name string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, ".cache", "agents", "node_modules", ".bin", name)
			if _, err := os.Stat(p); err == nil {
				return p
			}
			break
		}
	}
	msg := name + " CLI not installed: run scripts/setup-agents.sh or set " + envVar
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// mkfifo makes a named pipe in dir; reading it returns what a process of the agent wrote.
func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFIFO returns a channel with the first line written to the fifo at p.
func readFIFO(p string) <-chan string {
	ch := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(p)
		ch <- strings.TrimSpace(string(b))
	}()
	return ch
}

// procState returns a process's state letter, "" when it is gone.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	st := procState(pid)
	return st != "" && st != "Z" && st != "X"
}

// groupMembers lists live processes in process group pgid.
func groupMembers(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// startedPID returns the agent's pid from its "started" event.
func startedPID(t *testing.T, ev *events) int {
	t.Helper()
	for _, e := range ev.all() {
		if e.Data["kind"] == "started" {
			pid, _ := strconv.Atoi(e.Data["pid"])
			return pid
		}
	}
	t.Fatal("no started event")
	return 0
}

// within waits for ch or fails the test at its deadline (testwait: a guard against hangs, not a
// synchronisation).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	began := time.Now()
	select {
	case v := <-ch:
		return v
	case <-testwait.After(t):
		t.Fatalf("timed out after %s waiting for %s", time.Since(began).Round(time.Second), what)
	}
	var zero T
	return zero
}

// findByArg returns the live processes whose command line contains arg.
func findByArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), arg) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// sleepMarker returns a "sleep" duration unique to this test process and test, to find the
// agent's command by.
func sleepMarker(t *testing.T) string {
	t.Helper()
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	return "1000." + strconv.Itoa(os.Getpid()) + "0" + strconv.FormatUint(uint64(h.Sum32()), 10)
}

// awaitProcess waits until a process with arg in its command line runs. An exec has no event
// another process can wait on, so /proc is polled, until the test's deadline.
func awaitProcess(t *testing.T, arg string) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for len(findByArg(arg)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent's command is not running before the cancel")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitByArg waits until a process whose arguments hold arg runs, up to the test's deadline:
// a command that said it started may not have exec'd its next program yet.
func awaitByArg(t *testing.T, arg string) []int {
	t.Helper()
	deadline := testwait.After(t)
	for {
		if pids := findByArg(arg); len(pids) > 0 {
			return pids
		}
		select {
		case <-deadline:
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}
