// Package giteatest gives tests a real Gitea server: built once by scripts/setup-gitea.sh
// (OUTERLOOP_GITEA_BIN, or .cache/gitea/<version>/gitea under the module root), started on a
// free port in a temporary work path with SQLite, an admin user and an access token, and
// killed at cleanup. Start gives a test its own server; Shared starts one per test package,
// stopped by Main (call it from TestMain), and tests isolate themselves by creating their own
// repositories (NewRepo).
//
// Without the binary the test is skipped, except in CI (CI set), where it fails: the test
// command builds it. The token never appears in a log, a URL or an argv: it reaches git
// through an http.extraHeader in the environment, and the API through the Authorization header.
package giteatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"outerloop/lib/testwait"
)

// Version is the Gitea scripts/setup-gitea.sh builds.
const Version = "v1.27.3"

// Server is a running Gitea.
type Server struct {
	URL   string // http://127.0.0.1:PORT, no trailing slash
	Admin string // the admin user's name (owner of NewRepo's repositories)
	Dir   string // the work path

	token string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	stop  chan struct{}
	once  sync.Once
}

// Token returns the admin's access token (all scopes). Do not log it.
func (s *Server) Token() string { return s.token }

// Getenv returns a getenv function that answers name with the token (and nothing else), for
// clients that read their token from a variable at use.
func (s *Server) Getenv(name string) func(string) string {
	return func(k string) string {
		if k == name {
			return s.token
		}
		return ""
	}
}

// Binary returns the Gitea binary, or skips (fails in CI) the test when it is not built.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return bin
}

func findBinary() (string, error) {
	if p := os.Getenv("OUTERLOOP_GITEA_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("giteatest: OUTERLOOP_GITEA_BIN=%s: %w (run scripts/setup-gitea.sh)", p, err)
		}
		return p, nil
	}
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			p := filepath.Join(d, ".cache", "gitea", Version, "gitea")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			break
		}
	}
	return "", errors.New("giteatest: Gitea not built: run scripts/setup-gitea.sh or set OUTERLOOP_GITEA_BIN")
}

// Start runs a Gitea for this test and kills it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start(Binary(t), t.TempDir(), testwait.Deadline(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	dir string
	err error
}

// Shared returns the package's Gitea, starting it on first use; Main stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "giteatest-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		shared.srv, shared.err = start(bin, dir, testwait.Deadline(t))
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Main runs the package's tests, stops the shared Gitea and removes its work path, then runs
// the after checks (goleak.Find, say: once Gitea is gone nothing may still be waiting on it);
// a failing check fails the run. Call it from TestMain:
//
//	func TestMain(m *testing.M) { giteatest.Main(m, func() error { return goleak.Find() }) }
func Main(m *testing.M, after ...func() error) {
	code := m.Run()
	shared.mu.Lock()
	if shared.srv != nil {
		shared.srv.Close()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	for _, check := range after {
		if err := check(); err != nil && code == 0 {
			fmt.Fprintln(os.Stderr, "giteatest: after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

const appINI = `APP_NAME = outerloop-test
RUN_MODE = prod
RUN_USER = %[4]s
WORK_PATH = %[1]s
%[3]s
[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = http://127.0.0.1:%[2]d/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = %[1]s/data

[database]
DB_TYPE = sqlite3
PATH = %[1]s/data/gitea.db

[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
; webhooks may go to the tests' httptest servers on 127.0.0.1 (Gitea 1.27 reads this here;
; [webhook] ALLOWED_HOST_LIST is its deprecated spelling)
ALLOWED_HOST_LIST = loopback

[webhook]
; how long Gitea waits for a test's handler to answer before it gives the delivery up (and
; never redelivers it): a handler is quick, but a loaded machine running -race can take more
; than the 10 s this was
DELIVER_TIMEOUT = 120

[log]
MODE = file
LEVEL = Info
ROOT_PATH = %[1]s/log

[service]
DISABLE_REGISTRATION = true

[mailer]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false

[actions]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory
`

// start sets up a work path in dir and runs Gitea there, waiting until ready or deadline (the
// test's: a loaded machine starts Gitea slowly); a port taken meanwhile by another process is
// retried on a new one.
func start(bin, dir string, deadline time.Time) (*Server, error) {
	var err error
	for range 3 {
		var s *Server
		if s, err = startOnce(bin, dir, deadline); err == nil {
			return s, nil
		}
		if !errors.Is(err, errExitedEarly) {
			return nil, err
		}
		_ = os.RemoveAll(dir)
		if mkErr := os.MkdirAll(dir, 0o755); mkErr != nil {
			return nil, mkErr
		}
	}
	return nil, err
}

var errExitedEarly = errors.New("gitea exited before answering")

func startOnce(bin, dir string, deadline time.Time) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"custom/conf", "data", "repos", "log", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// Gitea built without bindata reads its translations and templates from the work path.
	for _, d := range []string{"options", "templates"} {
		src := filepath.Join(filepath.Dir(bin), d)
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("giteatest: %s missing next to the binary (run scripts/setup-gitea.sh): %w", d, err)
		}
		if err := os.Symlink(src, filepath.Join(dir, d)); err != nil {
			return nil, err
		}
	}
	root, user := "", "outerloop"
	if os.Geteuid() == 0 {
		root = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n"
		user = "root"
	} else if u := os.Getenv("USER"); u != "" {
		user = u
	}
	ini := filepath.Join(dir, "custom", "conf", "app.ini")
	if err := os.WriteFile(ini, fmt.Appendf(nil, appINI, dir, port, root, user), 0o600); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + os.TempDir(),
		"GITEA_WORK_DIR=" + dir, "LANG=C.UTF-8"}
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, append([]string{"--work-path", dir, "--config", ini}, args...)...)
		cmd.Env, cmd.Dir = env, dir
		var out bytes.Buffer
		cmd.Stdout = &out
		cmd.Stderr = io.Discard // warnings about root; the log file has the rest
		err := cmd.Run()
		return out.Bytes(), err
	}
	if _, err := run("migrate"); err != nil {
		return nil, fmt.Errorf("giteatest: gitea migrate: %w%s", err, logTail(dir))
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Admin: "outerloop", Dir: dir,
		done: make(chan struct{}), stop: make(chan struct{})}
	if _, err := run("admin", "user", "create", "--admin", "--username", s.Admin, "--password", randomHex(16)+"Aa1!",
		"--email", "outerloop@localhost", "--must-change-password=false"); err != nil {
		return nil, fmt.Errorf("giteatest: gitea admin user create: %w%s", err, logTail(dir))
	}
	out, err := run("admin", "user", "generate-access-token", "--username", s.Admin, "--token-name", "test-"+randomHex(4),
		"--scopes", "all", "--raw")
	if err != nil {
		return nil, fmt.Errorf("giteatest: gitea admin user generate-access-token: %w%s", err, logTail(dir))
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return nil, errors.New("giteatest: gitea printed no access token")
	}
	s.token = lines[len(lines)-1]

	if err := s.runWeb(bin, ini, env); err != nil {
		return nil, err
	}
	if err := s.waitReady(deadline); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// runWeb starts `gitea web` from a goroutine locked to its OS thread, which stays alive until
// the server is stopped: Pdeathsig (the kernel kills Gitea when that thread dies) then means
// "when this test process dies", so even a killed test run leaves no Gitea behind.
func (s *Server) runWeb(bin, ini string, env []string) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread exits with this goroutine, after Gitea is gone.
		cmd := exec.Command(bin, "--work-path", s.Dir, "--config", ini, "web")
		cmd.Env, cmd.Dir = env, s.Dir
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard // Gitea logs to its log file
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("giteatest: start gitea web: %w", err)
			close(s.done)
			return
		}
		s.cmd = cmd
		started <- nil
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-s.stop:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		case <-exited:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // anything it left in its group
		}
		close(s.done)
	}()
	return <-started
}

func (s *Server) waitReady(deadline time.Time) error {
	began := time.Now()
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		// A freshly started server's HTTP endpoint is the only readiness signal it gives.
		resp, err := c.Get(s.URL + "/api/v1/version")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("giteatest: %w%s", errExitedEarly, logTail(s.Dir))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("giteatest: gitea at %s not ready after %s: %v%s", s.URL, time.Since(began).Round(time.Second), err, logTail(s.Dir))
		}
	}
}

func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "log", "gitea.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return ""
	}
	return "\n" + strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// Close kills Gitea and waits for it.
func (s *Server) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Exited is closed once the Gitea process has exited (for tests that check it was stopped).
func (s *Server) Exited() <-chan struct{} { return s.done }

// Pid is the Gitea web process's id (0 before it started).
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// API calls Gitea's REST API (path after /api/v1) as the admin and decodes a JSON answer into
// out (when not nil). A status other than want fails the test.
func (s *Server) API(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	code, b, err := s.Do(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("giteatest: %s %s: %v", method, path, err)
	}
	if code != want {
		t.Fatalf("giteatest: %s %s: HTTP %d, want %d: %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("giteatest: %s %s: %v", method, path, err)
		}
	}
}

// Do is API without the test: it returns the status and body.
func (s *Server) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+"/api/v1"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "token "+s.token)
	req.Header.Set("Content-Type", "application/json")
	// Generous: on a loaded machine (the full suite on 2 cores) a repository's creation has
	// taken over 30 s; a fixture call that times out fails a test that is not about it.
	resp, err := (&http.Client{Timeout: apiTimeout}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// apiTimeout bounds one API call of the fixture.
const apiTimeout = 2 * time.Minute

// Repo is a repository on the server.
type Repo struct {
	Slug     string // owner/name
	CloneURL string // http URL, no credentials
}

// NewRepo creates an empty repository with a unique name starting with prefix, default branch
// main.
func (s *Server) NewRepo(t testing.TB, prefix string) Repo {
	t.Helper()
	name := prefix + "-" + randomHex(4)
	var r struct {
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
	}
	s.API(t, http.MethodPost, "/user/repos", map[string]any{"name": name, "default_branch": "main", "private": true},
		http.StatusCreated, &r)
	return Repo{Slug: r.FullName, CloneURL: r.CloneURL}
}

// GitEnv returns the environment entries that let git authenticate to the server with the
// token (an extraHeader scoped to the server), appended to env.
func (s *Server) GitEnv(env []string) []string {
	cred := base64.StdEncoding.EncodeToString([]byte(s.Admin + ":" + s.token))
	return append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http."+s.URL+"/.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic "+cred, "GIT_TERMINAL_PROMPT=0")
}

// Git runs git in dir with the server's credentials and returns its trimmed output.
func (s *Server) Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=giteatest", "-c", "user.email=giteatest@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = s.GitEnv(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("giteatest: git %s: %v\n%s", strings.Join(args, " "), err, strings.ReplaceAll(string(out), s.token, "[REDACTED]"))
	}
	return strings.TrimSpace(string(out))
}

// PushDir pushes the local repository dir's HEAD to branch of r and waits until Gitea has
// processed the push (WaitPushed).
func (s *Server) PushDir(t testing.TB, dir string, r Repo, branch string) {
	t.Helper()
	sha := s.Git(t, dir, "rev-parse", "HEAD")
	s.Git(t, dir, "push", "--quiet", r.CloneURL, "HEAD:refs/heads/"+branch)
	s.WaitPushed(t, r, branch, sha)
}

// WaitPushed waits until Gitea's API shows branch of r at sha and the repository as not empty:
// git push returns before Gitea's queue has processed it (until then a first push leaves the
// repository "empty", and its pull request endpoints answer 404).
func (s *Server) WaitPushed(t testing.TB, r Repo, branch, sha string) {
	t.Helper()
	began, deadline := time.Now(), testwait.Deadline(t)
	for {
		var b struct {
			Commit struct{ ID string } `json:"commit"`
		}
		var repo struct {
			Empty bool `json:"empty"`
		}
		// Gitea gives no event for "processed": its API state is the signal.
		code, body, err := s.Do(context.Background(), http.MethodGet, "/repos/"+r.Slug+"/branches/"+branch, nil)
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &b) == nil && b.Commit.ID == sha {
			code, body, err = s.Do(context.Background(), http.MethodGet, "/repos/"+r.Slug, nil)
			if err == nil && code == http.StatusOK && json.Unmarshal(body, &repo) == nil && !repo.Empty {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("giteatest: %s %s not at %s (and the repository not empty) after %s (HTTP %d, %v)",
				r.Slug, branch, sha, time.Since(began).Round(time.Second), code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PostStatus posts a commit status (state: pending, success, error, failure, warning).
func (s *Server) PostStatus(t testing.TB, r Repo, sha, context, state, description, targetURL string) {
	t.Helper()
	s.API(t, http.MethodPost, "/repos/"+r.Slug+"/statuses/"+sha, map[string]string{"context": context, "state": state,
		"description": description, "target_url": targetURL}, http.StatusCreated, nil)
}

// ClosePullRequest closes a pull request without merging it (what a person declining it does).
func (s *Server) ClosePullRequest(t testing.TB, r Repo, number int) {
	t.Helper()
	s.API(t, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", r.Slug, number), map[string]string{"state": "closed"},
		http.StatusCreated, nil)
}

// ProtectBranch forbids pushes to branch (for everyone, the admin included).
func (s *Server) ProtectBranch(t testing.TB, r Repo, branch string) {
	t.Helper()
	s.API(t, http.MethodPost, "/repos/"+r.Slug+"/branch_protections", map[string]any{"rule_name": branch,
		"enable_push": false}, http.StatusCreated, nil)
}
