package proc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/egress"
	"outerloop/proc"
	"outerloop/proc/proctest"
)

// hostsResolver answers the names in hosts itself and asks the system for the rest (a test's
// /etc/hosts for the proxy only).
type hostsResolver map[string]netip.Addr

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h[host]; ok {
		return []netip.Addr{a}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// watched collects a key's refusals.
type watched struct {
	mu  sync.Mutex
	got []proc.NetworkRefusal
}

func watch(t *testing.T, r *proc.Runner, key string) *watched {
	w := &watched{}
	t.Cleanup(r.WatchRefusals(key, func(nr proc.NetworkRefusal) { w.mu.Lock(); w.got = append(w.got, nr); w.mu.Unlock() }))
	return w
}

func (w *watched) list() []proc.NetworkRefusal {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// gitWorkspace is a workspace with a .git directory, as the worker's are.
func gitWorkspace(t *testing.T) string {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

func registriesRun(t *testing.T, r *proc.Runner, ws, cmd string, allow ...string) proc.Result {
	t.Helper()
	res := r.Run(context.Background(), proc.Spec{Command: cmd, Dir: ws, Env: proc.BaseEnv(), Timeout: 4 * time.Minute,
		Policy: proc.Policy{Workspace: ws, Network: proc.NetworkRegistries, Allow: allow, Downloads: filepath.Join(ws, ".git", "outerloop", "downloads")},
		Key:    "item/1"})
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	return res
}

func TestRegistriesGoGetThroughTheRealModuleProxy(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	r.GoModCache = "" // no warm cache: every module comes through the proxy
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	res := registriesRun(t, r, ws, `set -e
env | grep -c '^HTTPS_PROXY=http://127.0.0.1:' 
go mod init example.com/bump
go get rsc.io/quote@v1.5.2
go mod download
go list -m all`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	if !strings.Contains(res.Tail, "rsc.io/sampler") {
		t.Fatalf("go list -m all does not list the dependency:\n%s", res.Tail)
	}
	// Downloaded into the workspace's own cache, whose directories stay writable (-modcacherw),
	// so the workspace can be removed.
	mod := filepath.Join(ws, ".git", "outerloop", "downloads", "gomod", "rsc.io", "quote@v1.5.2")
	if _, err := os.Stat(filepath.Join(mod, "quote.go")); err != nil {
		t.Fatalf("module not in the workspace's cache: %v", err)
	}
	if fi, err := os.Stat(mod); err != nil {
		t.Fatalf("module directory %s: %v", mod, err)
	} else if fi.Mode().Perm()&0o200 == 0 {
		t.Fatalf("module directory %s not writable: %v", mod, fi.Mode())
	}
	if got := w.list(); len(got) != 0 {
		t.Fatalf("refusals %+v", got)
	}
}

func TestRegistriesOffersTheWorkersModuleCacheFirst(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	// A worker cache holding a module no proxy has: only the file:// entry can serve it.
	cache := t.TempDir()
	dl := filepath.Join(cache, "cache", "download", "example.com", "local", "@v")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"list": "v1.0.0\n", "v1.0.0.info": `{"Version":"v1.0.0"}`, "v1.0.0.mod": "module example.com/local\n"} {
		if err := os.WriteFile(filepath.Join(dl, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.GoModCache = cache
	r.ReadOnly = append(r.ReadOnly, cache)
	ws := gitWorkspace(t)
	res := registriesRun(t, r, ws, `set -e; echo "GOPROXY=$GOPROXY"
GONOSUMDB=example.com GOFLAGS=-modcacherw go mod download -json example.com/local@v1.0.0 | grep '"GoMod"'
go list -m -versions golang.org/x/text`)
	if res.ExitCode != 0 || !strings.Contains(res.Tail, "GOPROXY=http://worker-modcache.invalid,https://proxy.golang.org") {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "outerloop", "downloads", "gomod", "cache", "download", "example.com", "local", "@v", "v1.0.0.mod")); err != nil {
		t.Fatalf("the module from the worker's cache is not in the workspace's: %v\n%s", err, res.Tail)
	}
	// Version lists come from the real proxy: the cache does not hide newer versions from go get -u.
	if !strings.Contains(res.Tail, "v0.3.0 ") {
		t.Fatalf("go list -m -versions did not list the proxy's versions:\n%s", res.Tail)
	}
}

func TestRegistriesNpmInstallThroughTheProxy(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("no npm")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	res := registriesRun(t, r, ws, `set -e; echo '{"name":"w","version":"1.0.0"}' > package.json
npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	if _, err := os.Stat(filepath.Join(ws, "node_modules", "is-number", "package.json")); err != nil {
		t.Fatalf("is-number not installed: %v\n%s", err, res.Tail)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "outerloop", "downloads", "npm")); err != nil {
		t.Fatalf("npm cache not in the workspace's downloads: %v", err)
	}
	if got := w.list(); len(got) != 0 {
		t.Fatalf("refusals %+v", got)
	}
}

func TestRegistriesRefusesUnlistedLoopbackAndPrivateAndRecordsTheCommand(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	if !proctest.LookBash() {
		t.Skip("no bash")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	r.Resolver = hostsResolver{"loopback.test": netip.MustParseAddr("127.0.0.1"), "meta.test": netip.MustParseAddr("169.254.169.254")}
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	rhost, rport, _ := net.SplitHostPort(redisAddr())
	cmd := strings.Join([]string{
		`curl -sS -m 20 -o /dev/null https://example.com/; echo "unlisted:$?"`,
		// Through the proxy on purpose (NO_PROXY lists loopback: local test servers stay direct).
		`curl -fsS -m 20 --noproxy '' -o /dev/null http://` + rhost + `:` + rport + `/; echo "redis-proxy:$?"`,
		`curl -sS -m 20 -o /dev/null https://loopback.test/; echo "loopback:$?"`,
		`curl -fsS -m 20 -o /dev/null http://meta.test/latest/meta-data/; echo "metadata:$?"`,
		// And straight at Redis: the sandbox has no network of its own.
		`timeout 3 bash -c 'exec 3<>/dev/tcp/` + rhost + `/` + rport + `; printf "PING\r\n" >&3; head -c 5 <&3' 2>/dev/null | grep -q PONG && echo LEAK:redis`,
		`echo done`,
	}, "\n")
	res := registriesRun(t, r, ws, cmd, "loopback.test", "meta.test")
	t.Logf("output:\n%s", res.Tail)
	if res.ExitCode != 0 || !strings.Contains(res.Tail, "done") || strings.Contains(res.Tail, "LEAK:") {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	for _, l := range []string{"unlisted:", "redis-proxy:", "loopback:", "metadata:"} {
		if strings.Contains(res.Tail, l+"0\n") {
			t.Errorf("%s reached", strings.TrimSuffix(l, ":"))
		}
	}
	want := []egress.Refusal{
		{Host: "example.com", Port: 443, Reason: egress.ReasonNotAllowed},
		{Host: rhost, Port: atoi(t, rport), Reason: egress.ReasonNotAllowed},
		{Host: "loopback.test", Port: 443, Reason: egress.ReasonPrivateAddress},
		{Host: "meta.test", Port: 80, Reason: egress.ReasonPrivateAddress},
	}
	got := w.list()
	var refs []egress.Refusal
	for _, g := range got {
		refs = append(refs, g.Refusal)
		if g.Command != cmd {
			t.Errorf("refusal %+v names command %q", g.Refusal, g.Command)
		}
	}
	if !slices.Equal(refs, want) {
		t.Fatalf("refusals\n got %+v\nwant %+v", refs, want)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A destination's first refusal is reported as it happens; its further ones are counted and
// reported, with their number, when the command ends.
func TestRegistriesReportsADestinationOnceThenCountsItsRefusals(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	cmd := `for i in 1 2 3 4 5; do curl -sS -m 10 -o /dev/null https://example.com/ 2>/dev/null; done; echo done`
	res := registriesRun(t, r, ws, cmd)
	if !strings.Contains(res.Tail, "done") {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	dest := egress.Refusal{Host: "example.com", Port: 443, Reason: egress.ReasonNotAllowed}
	want := []proc.NetworkRefusal{{Refusal: dest, Command: cmd, Count: 1}, {Refusal: dest, Command: cmd, Count: 4, Counted: true}}
	if got := w.list(); !slices.Equal(got, want) {
		t.Fatalf("refusals\n got %+v\nwant %+v", got, want)
	}
}

// Issue 36: a command that has had twenty destinations refused no longer hides the next ones:
// the metadata address it tries after them is reported, with how often it was tried, when the
// command ends.
func TestRegistriesRecordsTheMetadataAddressPastTheTwentiethRefusedDestination(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	r.Resolver = hostsResolver{"meta.test": netip.MustParseAddr("169.254.169.254")}
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	cmd := `for i in $(seq 1 21); do curl -sS -m 10 -o /dev/null https://h$i.example/ 2>/dev/null; done
for i in 1 2 3; do curl -sS -m 10 -o /dev/null http://meta.test/latest/meta-data/ 2>/dev/null; done; echo done`
	res := registriesRun(t, r, ws, cmd, "meta.test")
	if !strings.Contains(res.Tail, "done") {
		t.Fatalf("exit %d:\n%s", res.ExitCode, res.Tail)
	}
	var want []proc.NetworkRefusal
	for i := 1; i <= 20; i++ {
		want = append(want, proc.NetworkRefusal{Refusal: egress.Refusal{Host: fmt.Sprintf("h%d.example", i), Port: 443, Reason: egress.ReasonNotAllowed},
			Command: cmd, Count: 1})
	}
	want = append(want,
		proc.NetworkRefusal{Refusal: egress.Refusal{Host: "h21.example", Port: 443, Reason: egress.ReasonNotAllowed}, Command: cmd, Count: 1, Counted: true},
		proc.NetworkRefusal{Refusal: egress.Refusal{Host: "meta.test", Port: 80, Reason: egress.ReasonPrivateAddress}, Command: cmd, Count: 3, Counted: true})
	if got := w.list(); !slices.Equal(got, want) {
		t.Fatalf("refusals\n got %+v\nwant %+v", got, want)
	}
}

// A request in origin form, sent to the proxy as if it were the server, is a refusal too.
func TestRegistriesReportsARequestInOriginForm(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	w := watch(t, r, "item/1")
	ws := gitWorkspace(t)
	cmd := `curl -sS -m 10 -o /dev/null -w '%{http_code}\n' -H 'Host: 169.254.169.254' "$HTTP_PROXY/latest/meta-data/"`
	res := registriesRun(t, r, ws, cmd)
	if strings.TrimSpace(res.Tail) != "400" {
		t.Fatalf("exit %d: %q, want the proxy's 400", res.ExitCode, res.Tail)
	}
	want := []proc.NetworkRefusal{{Refusal: egress.Refusal{Host: "169.254.169.254", Port: 80, Reason: egress.ReasonOriginForm}, Command: cmd, Count: 1}}
	if got := w.list(); !slices.Equal(got, want) {
		t.Fatalf("refusals\n got %+v\nwant %+v", got, want)
	}
}

func TestRegistriesNeedsAGuardedRunner(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	r.Guard = nil
	ws := t.TempDir()
	res := r.Run(context.Background(), proc.Spec{Command: "true", Dir: ws, Env: proc.BaseEnv(),
		Policy: proc.Policy{Workspace: ws, Network: proc.NetworkRegistries}})
	if !errors.Is(res.Err, proc.ErrSandboxUnavailable) {
		t.Fatalf("err %v, want ErrSandboxUnavailable", res.Err)
	}
}

func TestNoneAndHostSetNoProxy(t *testing.T) {
	r := proctest.Runner(t, proc.ModeBwrap)
	for _, n := range []proc.Network{proc.NetworkNone, proc.NetworkHost} {
		ws := t.TempDir()
		res := r.Run(context.Background(), proc.Spec{Command: "env | grep -i _proxy= || echo no-proxy", Dir: ws, Env: proc.BaseEnv(),
			Policy: proc.Policy{Workspace: ws, Network: n}, Key: "item/1"})
		if res.ExitCode != 0 || strings.TrimSpace(res.Tail) != "no-proxy" {
			t.Errorf("network %s: exit %d %q", n, res.ExitCode, res.Tail)
		}
	}
}

func TestRegistriesStopsEveryHostileAttack(t *testing.T) {
	if !proctest.LookBash() {
		t.Skip("no bash")
	}
	r := proctest.Runner(t, proc.ModeBwrap)
	h, res := hostileRun(t, r, proc.NetworkRegistries)
	t.Logf("output:\n%s", res.Tail)
	h.Check(t, res.Tail)
}

// The default network under a deployment's mode off: commands run unconfined (the host's
// network), with no proxy in front of them.
func TestRegistriesUnderModeOffRunsUnconfined(t *testing.T) {
	r := proctest.Runner(t, proc.ModeOff)
	ws := t.TempDir()
	res := r.Run(context.Background(), proc.Spec{Command: "env | grep -i _proxy= || echo no-proxy", Dir: ws, Env: proc.BaseEnv(),
		Policy: proc.Policy{Workspace: ws, Network: proc.NetworkRegistries}, Key: "item/1"})
	if res.Err != nil || res.ExitCode != 0 || strings.TrimSpace(res.Tail) != "no-proxy" {
		t.Fatalf("exit %d %v %q", res.ExitCode, res.Err, res.Tail)
	}
}
