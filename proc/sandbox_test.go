package proc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func redisAddr() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		u = strings.TrimPrefix(u, "redis://")
		if i := strings.IndexByte(u, '/'); i >= 0 {
			u = u[:i]
		}
		if i := strings.LastIndexByte(u, '@'); i >= 0 {
			u = u[i+1:]
		}
		return u
	}
	return "127.0.0.1:6379"
}

// hostileRun runs the hostile command through r as a script step would.
func hostileRun(t *testing.T, r *proc.Runner, network proc.Network) (*proctest.Hostile, proc.Result) {
	t.Helper()
	cfgDir := t.TempDir()
	h := proctest.NewHostile(t, cfgDir, redisAddr())
	// The config directory is visible (as /etc would be) but the file is hidden.
	r.ReadOnly = append(r.ReadOnly, cfgDir, h.Other, h.Outside)
	r.Hide = append(r.Hide, h.Config, h.Other)
	ws := t.TempDir()
	env := proc.Env(nil, nil, map[string]string{"HOME": h.Home})
	res := r.Run(context.Background(), proc.Spec{Command: h.Script(), Dir: ws, Env: env, Timeout: time.Minute,
		Policy: proc.Policy{Workspace: ws, Network: network}, Key: "item/1"})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	return h, res
}

func TestSandboxStopsEveryHostileAttack(t *testing.T) {
	if !proctest.LookBash() {
		t.Skip("no bash")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	h, res := hostileRun(t, r, proc.NetworkNone)
	t.Logf("output:\n%s", res.Tail)
	h.Check(t, res.Tail)
}

func TestSandboxWithHostNetworkStillHidesSecretsAndFiles(t *testing.T) {
	if !proctest.LookBash() {
		t.Skip("no bash")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	_, res := hostileRun(t, r, proc.NetworkHost)
	leaks := proctest.CheckLeaks(res.Tail)
	// With the host's network Redis and the API answer (Redis then needs its ACL user);
	// nothing else may.
	leaks = slices.DeleteFunc(leaks, func(s string) bool { return s == "redis" || s == "http-api" })
	if len(leaks) > 0 {
		t.Fatalf("leaks with network host: %v\n%s", leaks, res.Tail)
	}
}

func TestUnsandboxedRunSeesWhatTheSandboxHides(t *testing.T) {
	// The control: the same attacks without the sandbox find what they look for, so the
	// sandboxed test above is able to fail.
	if !proctest.LookBash() {
		t.Skip("no bash")
	}
	r := proctest.Runner(t, proc.ModeOff)
	h, res := hostileRun(t, r, proc.NetworkHost)
	h.Cleanup()
	leaks := proctest.CheckLeaks(res.Tail)
	for _, want := range []string{"worker-environ", "ancestor-environ", "other-workspace", "config", "home-ssh", "write-outside", "worker-processes", "http-api"} {
		if !slices.Contains(leaks, want) {
			t.Errorf("unsandboxed attack %q found nothing (leaks %v): the hostile test is blind\n%s", want, leaks, res.Tail)
		}
	}
	// Even unconfined, the guard kills what the command left behind.
	proctest.AssertNoProcess(t, h.Marker)
}

func TestSandboxRefusesWhenBubblewrapCannotStart(t *testing.T) {
	t.Parallel()
	r := &proc.Runner{Mode: proc.ModeBwrap, Unavailable: fmt.Errorf("user namespaces are off")}
	res := r.Run(context.Background(), proc.Spec{Command: "true", Dir: t.TempDir()})
	if !errorsIs(res.Err, proc.ErrSandboxUnavailable) {
		t.Fatalf("err %v, want ErrSandboxUnavailable", res.Err)
	}
	// An explicit off runs.
	res = r.Run(context.Background(), proc.Spec{Command: "true", Dir: t.TempDir(), Policy: proc.Policy{Mode: proc.ModeOff}})
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("mode off: %+v", res)
	}
}

func TestSandboxedGitReadsTheMirrorsObjects(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	mirror := filepath.Join(t.TempDir(), "m.git")
	ws := filepath.Join(t.TempDir(), "ws")
	src := t.TempDir()
	for _, c := range [][]string{
		{"git", "init", "-q", "-b", "main", src},
		{"git", "-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"},
		{"git", "clone", "-q", "--bare", src, mirror},
		{"git", "clone", "-q", "--shared", mirror, ws},
		{"cp", "-r", ws + "/.git", proc.WorkspaceGitDir(ws)}, // the worker's own record of it
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	r.Hide = append(r.Hide, filepath.Dir(mirror)) // like the work dir: hidden but for the objects
	res := r.Run(context.Background(), proc.Spec{Command: "git log --oneline && ls " + filepath.Dir(mirror), Dir: ws, Env: proc.BaseEnv()})
	if res.ExitCode != 0 || !strings.Contains(res.Tail, "one") {
		t.Fatalf("git in the sandbox: %+v", res)
	}
	res = r.Run(context.Background(), proc.Spec{Command: "ls " + mirror, Dir: ws, Env: proc.BaseEnv()})
	if strings.TrimSpace(res.Tail) != "objects" {
		t.Fatalf("the mirror shows more than its objects: %q", res.Tail)
	}
}

func TestPerWorkspaceBuildCacheIsWritableAndModuleCacheIsNot(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	ws, cache := t.TempDir(), filepath.Join(t.TempDir(), "gocache")
	modcache := strings.TrimSpace(goEnv(t, "GOMODCACHE"))
	res := r.Run(context.Background(), proc.Spec{Dir: ws, Env: proc.BaseEnv(), Policy: proc.Policy{GoCache: cache},
		Command: `echo x > "$GOCACHE/probe" && echo cache-ok; touch ` + modcache + `/outerloop-probe 2>/dev/null && echo modcache-writable; echo $GOCACHE`})
	if !strings.Contains(res.Tail, "cache-ok") || strings.Contains(res.Tail, "modcache-writable") {
		t.Fatalf("caches: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(cache, "probe")); err != nil {
		t.Fatalf("build cache write did not land in the workspace's cache: %v", err)
	}
}

// The build cache a command writes is its repository's by default: items of one repository
// share one (warm), another repository's items never see it; workspace gives each workspace
// its own beside it; shared is the worker's own, only when the config says so.
func TestTheBuildCacheIsTheRepositorysUnlessTheConfigSharesIt(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	r.GoCaches = filepath.Join(t.TempDir(), "caches")
	r.GoCache = filepath.Join(t.TempDir(), "worker-gocache")
	tmpl := func(repo string, scope workitems.BuildCacheScope) *config.Template {
		return &config.Template{Repo: repo, Sandbox: config.Sandbox{BuildCache: scope}}
	}
	cacheOf := func(tm *config.Template) string {
		t.Helper()
		ws := filepath.Join(t.TempDir(), "attempt-1")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		res := r.Run(context.Background(), proc.Spec{Dir: ws, Env: proc.BaseEnv(), Policy: proc.PolicyFor(tm, ws, proc.NetworkNone),
			Command: `touch "$GOCACHE/written" && echo "$GOCACHE"`})
		if res.ExitCode != 0 {
			t.Fatalf("%+v", res)
		}
		dir := strings.TrimSpace(res.Tail)
		if _, err := os.Stat(filepath.Join(dir, "written")); err != nil {
			t.Fatalf("the cache %s the command wrote is not on the host: %v", dir, err)
		}
		return dir
	}
	a1, a2 := cacheOf(tmpl("https://git.example/a.git", "")), cacheOf(tmpl("https://git.example/a.git", workitems.BuildCacheRepository))
	b := cacheOf(tmpl("https://git.example/b.git", ""))
	if a1 != a2 || a1 == b || filepath.Dir(a1) != r.GoCaches || filepath.Dir(b) != r.GoCaches {
		t.Fatalf("repository caches: a %s and %s, b %s, want one per repository under %s", a1, a2, b, r.GoCaches)
	}
	if w := cacheOf(tmpl("https://git.example/a.git", workitems.BuildCacheWorkspace)); filepath.Base(w) != "gocache" ||
		filepath.Base(filepath.Dir(w)) != "attempt-1.state" {
		t.Fatalf("build_cache workspace: %s, want attempt-1.state/gocache beside the workspace", w)
	}
	if s := cacheOf(tmpl("https://git.example/a.git", workitems.BuildCacheShared)); s != r.GoCache {
		t.Fatalf("build_cache shared: %s, want the worker's %s", s, r.GoCache)
	}
}

func goEnv(t *testing.T, k string) string {
	b, err := exec.Command("go", "env", k).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNothingOutlivesASIGKILLedWorker starts a worker process whose command leaves
// `sleep <marker> &` (and one in a session of its own), SIGKILLs the worker, and checks
// every process of the command is gone: in the sandbox by --die-with-parent and the pid
// namespace, unconfined by the guard seeing its pipe close.
func TestNothingOutlivesASIGKILLedWorker(t *testing.T) {
	for _, mode := range []proc.Mode{proc.ModeOff, proc.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == proc.ModeBwrap {
				proctest.Runner(t, mode) // skips where bubblewrap cannot start
			}
			marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "OUTERLOOP_PROCTEST_WORKER="+string(mode),
				"OUTERLOOP_PROCTEST_RECORDS="+filepath.Join(dir, ".proc"),
				"OUTERLOOP_PROCTEST_CMD=sleep "+marker+" & setsid sleep "+marker+" & echo started > "+dir+"/ready; wait")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			proctest.WaitFor(t, "the command's ready file", func() bool { _, err := os.Stat(filepath.Join(dir, "ready")); return err == nil })
			proctest.WaitFor(t, "two processes of the command", func() bool { return len(proctest.Processes(marker)) >= 2 })
			recs, _ := (&proc.Runner{Records: filepath.Join(dir, ".proc")}).ListRecords("item-1/1")
			if len(recs) != 1 {
				t.Errorf("records before the kill: %+v, want one", recs)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			proctest.WaitNoProcess(t, marker)
		})
	}
}

// TestReapKillsWhatADeadExecutionLeft: the guard itself was killed (nothing watches the group
// any more); the record made before the command started lets the resumed execution kill it.
func TestReapKillsWhatADeadExecutionLeft(t *testing.T) {
	guard, _ := proc.GuardArgv()
	dir := t.TempDir()
	r := &proc.Runner{Mode: proc.ModeOff, Guard: guard, Records: filepath.Join(dir, ".proc")}
	marker := fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)
	p, err := r.Start(context.Background(), proc.Spec{Command: "sleep " + marker + " & wait", Dir: dir, Env: proc.BaseEnv(), Key: "it/2"})
	if err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, "the command's sleep", func() bool { return len(proctest.Processes(marker)) == 1 })
	// Another key's records are not touched.
	if n, err := r.Reap("other/1"); err != nil || n != 0 {
		t.Fatalf("reap of another key: %d, %v", n, err)
	}
	n, err := r.Reap("it/2")
	if err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	_ = p.Wait()
	proctest.AssertNoProcess(t, marker)
	if recs, _ := r.ListRecords(""); len(recs) != 0 {
		t.Fatalf("records left: %+v", recs)
	}
}

func TestGuardedRunReportsExitCodesSignalsAndTimeouts(t *testing.T) {
	guard, _ := proc.GuardArgv()
	r := &proc.Runner{Mode: proc.ModeOff, Guard: guard}
	dir := t.TempDir()
	if res := r.Run(context.Background(), proc.Spec{Command: "echo hi; exit 7", Dir: dir, Env: proc.BaseEnv()}); res.ExitCode != 7 || res.Tail != "hi\n" {
		t.Fatalf("exit: %+v", res)
	}
	if res := r.Run(context.Background(), proc.Spec{Command: "kill -TERM $$", Dir: dir, Env: proc.BaseEnv()}); res.Signal != syscall.SIGTERM {
		t.Fatalf("signal: %+v", res)
	}
	res := r.Run(context.Background(), proc.Spec{Command: "sleep 60", Dir: dir, Env: proc.BaseEnv(), Timeout: 200 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("timeout: %+v", res)
	}
	// Extra files and stdin pass through the guard.
	rd, wr, _ := os.Pipe()
	res = r.Run(context.Background(), proc.Spec{Command: "cat; echo usage >&3", Dir: dir, Env: proc.BaseEnv(),
		Stdin: strings.NewReader("from-stdin "), ExtraFiles: []*os.File{wr}})
	wr.Close()
	b := make([]byte, 64)
	n, _ := rd.Read(b)
	rd.Close()
	if res.ExitCode != 0 || res.Tail != "from-stdin " || string(b[:n]) != "usage\n" {
		t.Fatalf("stdin/extra: %+v %q", res, b[:n])
	}
}

func TestEnvPassesOnlyTheAllowlistAndWhatIsSetOnPurpose(t *testing.T) {
	lookup := func(k string) (string, bool) {
		m := map[string]string{"PATH": "/bin", "OPENAI_API_KEY": "sk-x", "MINE": "m", "HOME": "/h"}
		v, ok := m[k]
		return v, ok
	}
	got := proc.Env(lookup, []string{"MINE"}, map[string]string{"HOME": "/set", "K": "v"})
	want := []string{"HOME=/set", "K=v", "PATH=/bin", "MINE=m"}
	if !slices.Equal(got, want) {
		t.Fatalf("env %v, want %v", got, want)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
