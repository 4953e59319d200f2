// Package proctest gives tests a sandboxed, guarded proc.Runner and a hostile command that
// tries every escape the sandbox must stop, with the checks of what it found.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/proc"
)

// Runner returns a Runner for tests: bubblewrap when it starts here (else the test is
// skipped, or failed under CI), the test binary as guard (its TestMain must call
// proc.MaybeGuard), records in a temporary directory, cgroups for the limits where this
// process can make them.
func Runner(t testing.TB, mode proc.Mode) *proc.Runner {
	t.Helper()
	guard, err := proc.GuardArgv()
	if err != nil {
		t.Fatal(err)
	}
	r := &proc.Runner{Mode: mode, Guard: guard, Records: filepath.Join(t.TempDir(), ".proc"), Refusals: &proc.Refusals{},
		ReadOnly: proc.ToolchainDirs(context.Background(), os.Environ())}
	r.Cgroups, r.CgroupsUnavailable = proc.ProbeCgroups()
	if mode == proc.ModeBwrap {
		path, err := proc.Probe(context.Background(), os.Getenv("OUTERLOOP_BWRAP"))
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("bubblewrap: %v", err)
			}
			t.Skipf("bubblewrap: %v", err)
		}
		r.Bwrap = path
	}
	return r
}

// SecretEnv is the variable a hostile test sets in the worker's own environment.
const SecretEnv = "OUTERLOOP_HOSTILE_SECRET"

// Hostile is one hostile command and what it must not reach.
type Hostile struct {
	Secret    string // value of SecretEnv in the worker's environment
	Home      string // the worker's home, with .ssh/id_ed25519 holding the secret
	Other     string // another item's workspace, holding secret.txt
	Outside   string // a directory outside the workspace the command tries to write into
	Config    string // the config file (hidden from the command)
	Marker    string // the background sleep's argument, to find it from outside
	RedisAddr string
	HTTPAddr  string
}

// Main makes sure the test process's own initial environment (what /proc/<pid>/environ
// shows) holds a secret, by re-executing the test binary once with SecretEnv set; call it
// first in TestMain.
func Main() {
	if os.Getenv(SecretEnv) != "" {
		return
	}
	env := append(os.Environ(), fmt.Sprintf("%s=hostile-%d", SecretEnv, time.Now().UnixNano()))
	if err := syscall.Exec("/proc/self/exe", os.Args, env); err != nil {
		fmt.Fprintln(os.Stderr, "proctest: re-exec with a secret:", err)
		os.Exit(2)
	}
}

// NewHostile sets up the targets: the secret in the worker's environment (see Main), another
// workspace, a home with ~/.ssh (pass Home as the child's HOME), a config file in dir cfgDir (the caller makes that
// visible and hides the file), an HTTP server on loopback. redisAddr is the shared Redis.
func NewHostile(t *testing.T, cfgDir, redisAddr string) *Hostile {
	t.Helper()
	h := &Hostile{Secret: os.Getenv(SecretEnv), Other: t.TempDir(), Outside: t.TempDir(), Home: t.TempDir(),
		RedisAddr: redisAddr, Marker: fmt.Sprintf("600.%d", time.Now().UnixNano()%1e9)}
	if h.Secret == "" {
		t.Fatal("proctest: call proctest.Main in TestMain")
	}
	if err := os.MkdirAll(filepath.Join(h.Home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.Home, ".ssh", "id_ed25519"), []byte(h.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.Other, "secret.txt"), []byte(h.Secret), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Config = filepath.Join(cfgDir, "outerloop.yaml")
	if err := os.WriteFile(h.Config, []byte("# "+h.Secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("api-ok")) }))
	t.Cleanup(srv.Close)
	h.HTTPAddr = strings.TrimPrefix(srv.URL, "http://")
	return h
}

// Script is the hostile command: each attack that works prints "LEAK:<what>". It leaves
// `sleep <marker>` running in the background and ends at once.
func (h *Hostile) Script() string {
	rhost, rport, _ := net.SplitHostPort(h.RedisAddr)
	hhost, hport, _ := net.SplitHostPort(h.HTTPAddr)
	return strings.Join([]string{
		// Walk up the process tree to the worker and read every ancestor's environment.
		`p=$$; while [ "${p:-1}" -gt 1 ]; do tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -q '` + h.Secret + `' && echo LEAK:ancestor-environ; p=$(cut -d' ' -f4 /proc/$p/stat 2>/dev/null); done`,
		fmt.Sprintf(`tr '\0' '\n' </proc/%d/environ 2>/dev/null | grep -q '%s' && echo LEAK:worker-environ`, os.Getpid(), h.Secret),
		`tr '\0' '\n' </proc/1/environ 2>/dev/null | grep -q '` + h.Secret + `' && echo LEAK:pid1-environ`,
		`env | grep -q '` + h.Secret + `' && echo LEAK:own-environ`,
		fmt.Sprintf(`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <$f 2>/dev/null; echo; done | grep -v LEAK | grep -q -e '[%c]%s' && echo LEAK:worker-processes`, os.Args[0][0], os.Args[0][1:]),
		`grep -q '` + h.Secret + `' ` + h.Other + `/secret.txt 2>/dev/null && echo LEAK:other-workspace`,
		`grep -q '` + h.Secret + `' ` + h.Config + ` 2>/dev/null && echo LEAK:config`,
		`ls /root/.ssh 2>/dev/null | grep -q . && echo LEAK:root-ssh`,
		`grep -q '` + h.Secret + `' "$HOME/.ssh/id_ed25519" ` + h.Home + `/.ssh/id_ed25519 2>/dev/null && echo LEAK:home-ssh`,
		`echo pwned > ` + h.Outside + `/pwned 2>/dev/null && echo LEAK:write-outside`,
		`echo pwned > /usr/outerloop-pwned 2>/dev/null && echo LEAK:write-usr`,
		fmt.Sprintf(`timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%s; printf "PING\r\n" >&3; head -c 5 <&3' 2>/dev/null | grep -q PONG && echo LEAK:redis`, rhost, rport),
		fmt.Sprintf(`timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%s; printf "GET / HTTP/1.0\r\n\r\n" >&3; cat <&3' 2>/dev/null | grep -q api-ok && echo LEAK:http-api`, hhost, hport),
		`sleep ` + h.Marker + ` >/dev/null 2>&1 &`,
		`echo hostile-done`,
	}, "\n")
}

// Check fails t for every leak in out (the command's output) and for what it left on the host.
func (h *Hostile) Check(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "hostile-done") {
		t.Fatalf("hostile command did not run to its end; output:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "LEAK:") {
			t.Errorf("sandbox let the command through: %s", strings.TrimSpace(l))
		}
	}
	if _, err := os.Stat(filepath.Join(h.Outside, "pwned")); err == nil {
		t.Error("the command wrote outside its workspace")
	}
	if _, err := os.Stat("/usr/outerloop-pwned"); err == nil {
		_ = os.Remove("/usr/outerloop-pwned")
		t.Error("the command wrote into /usr")
	}
	AssertNoProcess(t, h.Marker)
}

// Prepare makes r's view realistic for the attack: the config's directory, the other workspace
// and the outside directory are visible read-only (as /etc would be), the config file and the
// other workspace hidden (as the runner hides the config and the work dir). Call it before
// the runner starts anything.
func (h *Hostile) Prepare(r *proc.Runner) {
	r.ReadOnly = append(r.ReadOnly, filepath.Dir(h.Config), h.Other, h.Outside)
	r.Hide = append(r.Hide, h.Config, h.Other)
}

// OutFile is where InWorkspace's command writes its output, relative to the workspace.
const OutFile = "hostile.out"

// InWorkspace is the hostile command writing its output to OutFile in its working directory,
// for children whose output the caller does not see whole (exec agents).
func (h *Hostile) InWorkspace() string {
	return "{\n" + h.Script() + "\n} > " + OutFile + " 2>&1"
}

// CheckWorkspace checks the output InWorkspace left in ws.
func (h *Hostile) CheckWorkspace(t *testing.T, ws string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, OutFile))
	if err != nil {
		t.Fatalf("hostile command left no output: %v", err)
	}
	t.Logf("hostile output:\n%s", b)
	h.Check(t, string(b))
}

// Cleanup removes what an unconfined control run wrote.
func (h *Hostile) Cleanup() { _ = os.Remove("/usr/outerloop-pwned") }

// CheckLeaks reports whether out shows leaks (for the unsandboxed control run).
func CheckLeaks(out string) []string {
	var leaks []string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "LEAK:"); ok {
			leaks = append(leaks, s)
		}
	}
	return leaks
}

// Processes returns the pids whose command line holds marker.
func Processes(marker string) []int {
	return scan(func(dir string) bool {
		b, err := os.ReadFile(dir + "/cmdline")
		return err == nil && strings.Contains(string(b), marker) && !strings.Contains(string(b), "sh\x00-c")
	})
}

// ProcessesWithEnv returns the live processes whose environment holds entry (all or the start
// of a "NAME=value" string): every process a command started, whatever it exec'd, as the host
// sees it, which a sandbox cannot hide.
func ProcessesWithEnv(entry string) []int {
	want := []byte(entry)
	return scan(func(dir string) bool {
		env, err := os.ReadFile(dir + "/environ")
		return err == nil && bytes.Contains(env, want)
	})
}

// scan returns the live (not zombie) processes other than this one that match.
func scan(match func(procDir string) bool) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := "/proc/" + e.Name()
		if !match(dir) {
			continue
		}
		st, _ := os.ReadFile(dir + "/stat")
		if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && (st[i+2] == 'Z' || st[i+2] == 'X') {
			continue // a zombie runs nothing
		}
		pids = append(pids, pid)
	}
	return pids
}

// Lingering returns nothing as soon as find finds nothing, or what it still finds at the test's
// deadline (testwait: a loaded machine may take long): for processes killed asynchronously by
// guards or the kernel, which tell nobody.
func Lingering(t testing.TB, find func() []int) []int {
	left := find()
	for deadline := testwait.Deadline(t); len(left) > 0 && time.Now().Before(deadline); left = find() {
		time.Sleep(20 * time.Millisecond)
	}
	return left
}

// Describe names each pid's parent and command line, for a failure message.
func Describe(pids []int) string {
	var out []string
	for _, p := range pids {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		ppid := "?"
		if i := bytes.LastIndexByte(st, ')'); i > 0 {
			if f := strings.Fields(string(st[i+1:])); len(f) > 1 {
				ppid = f[1]
			}
		}
		out = append(out, fmt.Sprintf("%d (ppid %s) %s", p, ppid, strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))))
	}
	return strings.Join(out, "; ")
}

// AssertNoProcess fails t when a process with marker in its command line runs. The command's
// processes were SIGKILLed before the runner returned, so this is a single look, not a poll.
func AssertNoProcess(t testing.TB, marker string) {
	t.Helper()
	if pids := Processes(marker); len(pids) > 0 {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		t.Errorf("processes %v (%s) outlived their command", pids, marker)
	}
}

// WaitNoProcess waits until no process with marker runs: after a SIGKILLed worker the guard or
// the kernel kills them asynchronously, and no event reaches the test. It gives up (failing t)
// at the test's deadline (testwait).
func WaitNoProcess(t testing.TB, marker string) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for len(Processes(marker)) > 0 {
		if time.Now().After(deadline) {
			AssertNoProcess(t, marker)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LookBash reports whether bash exists (the network attacks use its /dev/tcp).
func LookBash() bool { _, err := exec.LookPath("bash"); return err == nil }

// WaitFor waits until cond holds: for events in other processes that send none. It gives up
// at the test's deadline (testwait), failing t with what was awaited (what: "the command's
// ready file", say) and for how long.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	began, deadline := time.Now(), testwait.Deadline(t)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", time.Since(began).Round(time.Second), what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RedisAddr is the host:port of REDIS_URL (default 127.0.0.1:6379), the Redis a command must
// not reach.
func RedisAddr() string {
	u := os.Getenv("REDIS_URL")
	if u == "" {
		return "127.0.0.1:6379"
	}
	u = strings.TrimPrefix(strings.TrimPrefix(u, "rediss://"), "redis://")
	if i := strings.IndexByte(u, '/'); i >= 0 {
		u = u[:i]
	}
	if i := strings.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	return u
}
