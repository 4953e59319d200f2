package proc

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"outerloop/egress"
)

// Network registries. The sandbox keeps --unshare-net: it has no network but its own loopback.
// Per command the worker serves an egress.Proxy on a Unix socket in a directory bound into the
// sandbox; inside, the bridge (this binary again, BridgeArg) listens on the sandbox's
// 127.0.0.1, forwards each connection to that socket, and runs the command with the proxy
// variables pointing at it. Refusals carry the command and reach whoever watches the Spec's
// Key (WatchRefusals).

// BridgeArg is the first argument that makes the worker binary act as the egress bridge inside
// the sandbox: `outerloop --outerloop-egress-bridge SOCKET NEXTRA -- ARGV...`. MaybeGuard runs it.
const BridgeArg = "--outerloop-egress-bridge"

// Paths inside the sandbox: the proxy's socket directory and the bridge binary.
const (
	sandboxEgressDir = "/run/outerloop-egress"
	sandboxBridge    = "/run/outerloop-bridge"
)

// NetworkRefusal is a connection the proxy refused to a command, or a count of them. The
// first refusal of each of a command's first destinations (host, port, reason) is reported as
// it happens; the others are counted and reported when the command ends, so that none goes
// unrecorded however many there are (refusal_log.go).
type NetworkRefusal struct {
	egress.Refusal
	Command string
	// Count is how many refused connections the report stands for: 1 for one reported as it
	// happened. Summed over a command's reports it is every refusal of the command.
	Count int
	// Counted marks a report made when the command ended, of refusals counted while it ran
	// (besides the one reported as it happened, when its destination had one).
	Counted bool
	// Others marks the count of refusals to destinations past those counted one by one: Host
	// is "" and Port 0, Reason is theirs.
	Others bool
}

// egressRun is one command's proxy.
type egressRun struct {
	dir   string // holds proxy.sock
	proxy *egress.Proxy
	// bin is the bridge binary (the worker's) opened O_PATH, passed to bubblewrap as the fd
	// after the caller's nextra files and bound by descriptor: its path would otherwise show
	// in bubblewrap's command line, which is pid 1's inside the sandbox.
	bin    *os.File
	nextra int
	// flush reports the refusals counted while the command ran; called once the proxy is
	// closed, so it has them all.
	flush func()
	once  sync.Once
}

func (e *egressRun) stop() {
	e.once.Do(func() {
		_ = e.proxy.Close()
		_ = e.bin.Close()
		_ = os.RemoveAll(e.dir)
		e.flush()
	})
}

// Refusals routes network refusals by execution key (Spec.Key).
type Refusals struct {
	mu       sync.Mutex
	watchers map[string]*func(NetworkRefusal)
}

// WatchRefusals sends the network refusals of every command run under key (Spec.Key) to fn
// until the returned function is called. Without r.Refusals refusals are only logged.
func (r *Runner) WatchRefusals(key string, fn func(NetworkRefusal)) (stop func()) {
	if r == nil || r.Refusals == nil {
		return func() {}
	}
	rs, w := r.Refusals, &fn
	rs.mu.Lock()
	if rs.watchers == nil {
		rs.watchers = map[string]*func(NetworkRefusal){}
	}
	rs.watchers[key] = w
	rs.mu.Unlock()
	return func() {
		rs.mu.Lock()
		if rs.watchers[key] == w {
			delete(rs.watchers, key)
		}
		rs.mu.Unlock()
	}
}

func (r *Runner) refused(key string, nr NetworkRefusal) {
	var w *func(NetworkRefusal)
	if rs := r.Refusals; rs != nil {
		rs.mu.Lock()
		w = rs.watchers[key]
		rs.mu.Unlock()
	}
	if w == nil {
		r.logger().Warn("sandbox network refused a connection", "key", key, "host", nr.Host, "port", nr.Port,
			"reason", nr.Reason, "count", nr.Count, "others", nr.Others, "command", nr.Command)
		return
	}
	(*w)(nr)
}

// startEgress serves s's proxy on a Unix socket in a fresh directory.
func (r *Runner) startEgress(s Spec) (*egressRun, error) {
	if !r.guarded() {
		return nil, fmt.Errorf("proc: %w: network registries needs the worker binary as its bridge (a guarded runner)", ErrSandboxUnavailable)
	}
	fd, err := unix.Open(r.Guard[0], unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("proc: egress bridge binary: %w", err)
	}
	bin := os.NewFile(uintptr(fd), "bridge")
	dir, err := os.MkdirTemp("", "outerloop-egress-")
	if err != nil {
		_ = bin.Close()
		return nil, fmt.Errorf("proc: egress socket directory: %w", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "proxy.sock"))
	if err != nil {
		_ = bin.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("proc: egress socket: %w", err)
	}
	command := s.Command
	if command == "" {
		command = strings.Join(s.Argv, " ")
	}
	refusals := &refusalLog{}
	report := func(rf egress.Refusal) {
		if refusals.add(rf) {
			r.refused(s.Key, NetworkRefusal{Refusal: rf, Command: command, Count: 1})
		}
	}
	flush := func() {
		for _, nr := range refusals.flush(command) {
			r.refused(s.Key, nr)
		}
	}
	res := r.Resolver
	var files map[string]fs.FS
	if mc := r.moduleCache(); mc != "" {
		files = map[string]fs.FS{moduleCacheHost: egress.ModuleCacheFS(mc)}
	}
	p := egress.New(egress.Options{Allow: append(egress.DefaultAllow(), s.Policy.Allow...), Resolver: res, Refused: report,
		Files: files, Logger: r.logger().With("key", s.Key)})
	go func() { _ = p.Serve(l) }()
	return &egressRun{dir: dir, proxy: p, bin: bin, nextra: len(s.ExtraFiles), flush: flush}, nil
}

// egressArgs adds to bubblewrap's arguments the socket directory and the bridge, puts the
// bridge in front of argv, and points the registry clients' caches at the workspace's
// downloads directory.
func (r *Runner) egressArgs(s Spec, a, argv, env []string) ([]string, []string, []string, error) {
	e := s.egress
	a = append(a, "--bind", e.dir, sandboxEgressDir, "--ro-bind-fd", strconv.Itoa(3+e.nextra), sandboxBridge)
	if d := s.Policy.Downloads; d != "" {
		ws := s.Policy.Workspace
		if ws == "" {
			ws = s.Dir
		}
		var err error
		if d, err = ownDir(ws, d); err != nil {
			return nil, nil, nil, fmt.Errorf("proc: downloads directory: %w", err)
		}
		// The command writes inside it: its subdirectories are made through an os.Root.
		for _, sub := range []string{"gomod", "npm"} {
			if _, err := underRoot(d, sub); err != nil {
				return nil, nil, nil, fmt.Errorf("proc: downloads directory: %w", err)
			}
		}
		a = append(a, "--bind", d, d)
		env = setEnv(env, "GOMODCACHE", filepath.Join(d, "gomod"))
		env = setEnv(env, "npm_config_cache", filepath.Join(d, "npm"))
		// Writable module files: the workspace (and its downloads) must stay removable.
		if fl := getEnv(env, "GOFLAGS"); !strings.Contains(fl, "-modcacherw") {
			env = setEnv(env, "GOFLAGS", strings.TrimSpace(fl+" -modcacherw"))
		}
		env = setEnv(env, "GOPROXY", r.goProxy(getEnv(env, "GOPROXY")))
	}
	bridge := []string{sandboxBridge, BridgeArg, sandboxEgressDir + "/proxy.sock", strconv.Itoa(e.nextra), "--"}
	return a, append(bridge, argv...), env, nil
}

// goProxy is GOPROXY for network registries: the worker's own module cache first (served
// by the proxy itself: moduleCacheHost), so a module version the worker holds is copied, not
// downloaded, then the proxy the worker's environment names (Go's default when none). The
// cache serves no version lists, so `go get -u` still sees every published version.
func (r *Runner) goProxy(worker string) string {
	if worker == "" {
		worker = "https://proxy.golang.org,direct"
	}
	if r.moduleCache() == "" {
		return worker
	}
	return "http://" + moduleCacheHost + "," + worker
}

// moduleCacheHost is the name the proxy serves the worker's module cache under; .invalid can
// never be a real host.
const moduleCacheHost = "worker-modcache.invalid"

// moduleCache is the worker's module download cache, "" when there is none.
func (r *Runner) moduleCache() string {
	if r.GoModCache == "" {
		return ""
	}
	dl := filepath.Join(r.GoModCache, "cache", "download")
	if fi, err := os.Stat(dl); err != nil || !fi.IsDir() {
		return ""
	}
	return dl
}

// proxyEnv names the variables the bridge sets. Not ALL_PROXY: some tools read it as SOCKS.
var proxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}

// bridgeMain is the bridge inside the sandbox: it listens on the sandbox's loopback, forwards
// every connection to the proxy's socket, runs the command with the proxy variables set, and
// exits as the command did (128+signal when killed, as bubblewrap reports it).
func bridgeMain(args []string) int {
	if len(args) < 4 || args[2] != "--" {
		fmt.Fprintln(os.Stderr, "outerloop egress bridge: usage: "+BridgeArg+" SOCKET NEXTRA -- ARGV...")
		return 125
	}
	sock := args[0]
	nextra, err := strconv.Atoi(args[1])
	if err != nil || nextra < 0 {
		fmt.Fprintln(os.Stderr, "outerloop egress bridge: bad extra file count", args[1])
		return 125
	}
	// Whatever descriptor came in beyond the command's own (the binary's, should bubblewrap
	// keep it open) is not the command's.
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= 3+nextra {
				unix.CloseOnExec(fd)
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "outerloop egress bridge: loopback:", err)
		return 125
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go bridgeConn(c, sock)
		}
	}()
	env := os.Environ()
	url := "http://" + l.Addr().String()
	for _, k := range proxyEnv {
		env = setEnv(env, k, url)
	}
	env = setEnv(env, "NO_PROXY", "localhost,127.0.0.1,::1")
	env = setEnv(env, "no_proxy", "localhost,127.0.0.1,::1")
	cmd := exec.Command(args[3], args[4:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdin, os.Stdout, os.Stderr, env
	for i := range nextra {
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(3+i), "extra"))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "outerloop egress bridge:", err)
		return 127
	}
	for _, f := range cmd.ExtraFiles {
		_ = f.Close()
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 127
	}
	return 0
}

// bridgeConn carries one connection of the command to the proxy's socket.
func bridgeConn(c net.Conn, sock string) {
	defer c.Close()
	u, err := net.Dial("unix", sock)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(u, c)
	go cp(c, u)
	<-done
	<-done
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}
