package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"outerloop/forge"
	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/lib/testlog"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The world a hostile repository meets (hostile_test.go): a worker whose own environment holds
// secrets, a real git remote that takes only the forge's token, a server that no push may
// reach, and host directories the test owns and the sandbox cannot see (under t.TempDir(),
// which is the sandbox's private /tmp). Everything here is on the host; the items' commands
// run in bubblewrap.

const (
	// hostileTokenVar is the forge token's variable: set in the worker's own environment, as a
	// deployment sets it, and read from there (app.Options.Getenv is left at os.Getenv).
	hostileTokenVar = "OL_HOSTILE_FORGE_TOKEN"
	// hostileRepo is the repository on the remote every hostile item works on and pushes to.
	hostileRepo = "acme/hostile"
	// hostileForgeKind is the forge kind of the remote: delivery through it pushes with
	// forge.Push and forge.NewGitAuth, as the built-in kinds do.
	hostileForgeKind workitems.ForgeKind = "hostile-remote"
)

// canary returns a secret value no code would make up: name and 16 random bytes, in hex.
func canary(name string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return name + "-" + hex.EncodeToString(b)
}

// gitRemote is a bare repository behind git http-backend that answers only requests carrying
// the token the way forge.NewGitAuth sends it (Basic, the token as password).
type gitRemote struct {
	*httptest.Server
	root, bare string
}

func newGitRemote(t *testing.T, token string) *gitRemote {
	t.Helper()
	root := t.TempDir()
	r := &gitRemote{root: root, bare: filepath.Join(root, hostileRepo+".git")}
	if err := os.MkdirAll(filepath.Dir(r.bare), 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, root, "init", "-q", "--bare", "-b", "main", r.bare)
	gitIn(t, r.bare, "config", "http.receivepack", "true")
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root,
		"GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="hostile"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Server.Close)

	work := t.TempDir()
	gitIn(t, work, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(work, "README.md"), "# hostile\n\nA repository whose script steps are hostile.\n")
	writeFile(t, filepath.Join(work, "main.txt"), "one\ntwo\n")
	gitIn(t, work, "add", "-A")
	gitIn(t, work, "commit", "-qm", "base")
	gitIn(t, work, "push", "-q", r.bare, "main")
	return r
}

// CloneURL is the repository's URL (no credentials in it).
func (r *gitRemote) CloneURL() string { return r.URL + "/" + hostileRepo + ".git" }

// branch returns the commit refs/heads/name points at on the remote, "" when there is none.
func (r *gitRemote) branch(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", r.bare, "rev-parse", "--verify", "-q", "refs/heads/"+name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// objects returns the contents of every object reachable from commit on the remote.
func (r *gitRemote) objects(t *testing.T, commit string) []byte {
	t.Helper()
	list := gitIn(t, r.bare, "rev-list", "--objects", commit)
	var ids bytes.Buffer
	for l := range strings.SplitSeq(list, "\n") {
		if id, _, _ := strings.Cut(l, " "); id != "" {
			ids.WriteString(id + "\n")
		}
	}
	cmd := exec.Command("git", "-C", r.bare, "cat-file", "--batch")
	cmd.Stdin = &ids
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cat-file on the remote: %v", err)
	}
	return out
}

// hostileForge is the remote as a forge kind: the repository and the git credential, which is
// all a branch delivery asks of a forge.
type hostileForge struct {
	forge.Unsupported
	cfg forge.Config
}

func (f *hostileForge) Name() string              { return f.cfg.Name }
func (f *hostileForge) Kind() workitems.ForgeKind { return f.cfg.Kind }

func (f *hostileForge) Repository(_ context.Context, repo string) (*forge.Repository, error) {
	return &forge.Repository{Repo: repo, DefaultBranch: "main", CloneURL: f.cfg.BaseURL + "/" + repo + ".git"}, nil
}

func (f *hostileForge) GitAuth(remoteURL string) (forge.GitAuth, error) {
	tok := f.cfg.Getenv(f.cfg.TokenEnv)
	if tok == "" {
		return forge.GitAuth{}, &forge.Error{Forge: f.Name(), Op: "git auth", Class: workitems.ClassInvalidInput, Err: forge.ErrMissingToken}
	}
	a, err := forge.NewGitAuth(remoteURL, tok)
	if err != nil {
		return forge.GitAuth{}, &forge.Error{Forge: f.Name(), Op: "git auth", Class: workitems.ClassInvalidInput, Err: err}
	}
	return a, nil
}

func hostileForgeKinds() forge.Kinds {
	return forge.Kinds{hostileForgeKind: func(cfg forge.Config) (forge.Forge, error) { return &hostileForge{cfg: cfg}, nil }}
}

// elsewhere is a server no git command of outerloop's may reach: every request is recorded
// (its line, then NUL and its credentials, see requests) and answered 401 with a Basic
// challenge (so that a git which came here asks for a credential).
type elsewhere struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newElsewhere(t *testing.T) *elsewhere {
	t.Helper()
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		e.mu.Lock()
		e.seen = append(e.seen, fmt.Sprintf("%s %s\x00%s %s", req.Method, req.URL, req.Header.Get("Authorization"), req.Header.Get("Proxy-Authorization")))
		e.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="elsewhere"`)
		http.Error(w, "who are you", http.StatusUnauthorized)
	}))
	t.Cleanup(e.Server.Close)
	return e
}

// requests returns the request lines it got, each with the secrets its credential headers
// carried (named, never shown).
func (e *elsewhere) requests(sec secrets) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.seen))
	for _, r := range e.seen {
		line, creds, _ := strings.Cut(r, "\x00")
		out = append(out, fmt.Sprintf("%s, its credentials carrying %v", line, sec.found([]byte(creds))))
	}
	return out
}

// hostTree is what a host directory holds, path by path (symlinks not followed): kind, mode,
// and a file's content hash or a link's target. Two equal trees mean nothing was written there.
type hostTree map[string]string

func snapshotHost(t *testing.T, root string) hostTree {
	t.Helper()
	tree := hostTree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			tree[rel] = "link " + target
		case d.IsDir():
			tree[rel] = "dir " + info.Mode().String()
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			tree[rel] = "file " + info.Mode().String() + " " + hex.EncodeToString(sum[:8])
		default:
			tree[rel] = "other " + info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return tree
}

// changes lists what differs between two snapshots of one directory.
func (before hostTree) changes(after hostTree) []string {
	var out []string
	for p, a := range after {
		if b, ok := before[p]; !ok {
			out = append(out, "new "+p+" ("+a+")")
		} else if a != b {
			out = append(out, "changed "+p+" ("+b+" → "+a+")")
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, "removed "+p)
		}
	}
	slices.Sort(out)
	return out
}

// secrets are named secret values; found reports which of them text holds.
type secrets map[string]string

func (s secrets) found(text []byte) []string {
	var out []string
	for name, v := range s {
		if bytes.Contains(text, []byte(v)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// gunzipped returns the decompressed bytes of a gzip value (evidence files are stored so), or
// b itself.
func gunzipped(b []byte) []byte {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return b
	}
	out, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return b
	}
	return out
}

// redisLeaks searches the keys and values of the deployment (the store's prefix and the asynq
// queues) that keep says to search, gzip values decompressed, for the secrets, and names the
// key and the secret.
func redisLeaks(t *testing.T, s *sys, keep func(key string) bool, sec secrets) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, pattern := range []string{s.env.Prefix + "*", "asynq:{" + s.env.Queue + "}*", "asynq:{" + s.env.Queue + "-urgent}*"} {
		iter := s.Redis.Scan(ctx, 0, pattern, 500).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			if !keep(k) {
				continue
			}
			var vals []string
			switch s.Redis.Type(ctx, k).Val() {
			case "string":
				vals = []string{s.Redis.Get(ctx, k).Val()}
			case "hash":
				for f, v := range s.Redis.HGetAll(ctx, k).Val() {
					vals = append(vals, f, v)
				}
			case "list":
				vals = s.Redis.LRange(ctx, k, 0, -1).Val()
			case "set":
				vals = s.Redis.SMembers(ctx, k).Val()
			case "zset":
				vals = s.Redis.ZRange(ctx, k, 0, -1).Val()
			case "stream":
				for _, m := range s.Redis.XRange(ctx, k, "-", "+").Val() {
					vals = append(vals, fmt.Sprint(m.Values))
				}
			}
			for _, v := range append(vals, k) {
				if f := sec.found(gunzipped([]byte(v))); len(f) > 0 {
					out = append(out, fmt.Sprintf("redis key %s holds %v", k, f))
				}
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("redis scan: %v", err)
		}
	}
	return out
}

// treeLeaks searches the regular files under root (symlinks not followed) for the secrets.
func treeLeaks(root string, sec secrets) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 16<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			if f := sec.found(b); len(f) > 0 {
				out = append(out, fmt.Sprintf("%s holds %v", p, f))
			}
		}
		return nil
	})
	return out
}

// hostileWorld is the shared fixture: the remote, the server elsewhere, the worker's secrets
// and the host directories, and the system (one worker) the items run on.
type hostileWorld struct {
	root      string // host directories the test owns: markers/, host/<case>/, config/
	markers   string // where a command run on the host would leave its marker
	cfgDir    string // the config directory (outerloop.yaml and secrets.env beside it)
	other     string // another item's workspace, holding secret.txt
	remote    *gitRemote
	elsewhere *elsewhere
	token     string
	// env are the secrets of the worker's own environment (forge token, model key); files are
	// those of host files (config directory, another workspace).
	env, files secrets
	// toolchain are host directories the templates put on the worker's PATH: toolchain
	// directories, which every command sees read-only at their own path (as GOROOT and the
	// module cache are seen).
	toolchain []string
	s         *sys
	logs      *testlog.Buffer
}

// hostileTemplate is one template of the world's config (see hostileCase).
type hostileTemplate struct {
	name  string
	loop  string // the loop: YAML flow mapping
	done  string // the done check: YAML flow mapping ("" → commands [true])
	extra string // more keys of the template, YAML flow style (sandbox: …)
}

// newHostileWorld sets the worker's environment (t.Setenv: the calling test may not be
// parallel, its subtests may), starts the remote and the server elsewhere, writes the host
// directories and the config, and opens the system with the sandbox on. templates(w) gives
// the config's templates once the world's paths are known.
func newHostileWorld(t *testing.T, templates func(w *hostileWorld) []hostileTemplate, mod func(*app.Options)) *hostileWorld {
	t.Helper()
	w := &hostileWorld{root: t.TempDir(), token: canary("forge-token"), logs: &testlog.Buffer{}}
	w.env = secrets{"the forge token": w.token, "the model key": "sk-test-canary-" + canary("openai")}
	t.Setenv(hostileTokenVar, w.token)
	t.Setenv("OPENAI_API_KEY", w.env["the model key"])
	w.markers = filepath.Join(w.root, "markers")
	w.cfgDir = filepath.Join(w.root, "config")
	for _, d := range []string{w.markers, w.cfgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.files = secrets{"the config directory's secret": canary("config-secret"), "another workspace's secret": canary("other-workspace")}
	writeFile(t, filepath.Join(w.cfgDir, "secrets.env"), "API_SECRET="+w.files["the config directory's secret"]+"\n")
	w.remote = newGitRemote(t, w.token)
	w.elsewhere = newElsewhere(t)

	// Another item's workspace on this host, where the work dir keeps one.
	env := redistest.New(t)
	workdir := t.TempDir()
	w.other = (&worker.Workspaces{Root: workdir, Deployment: env.Prefix}).Path("another-item", 1)
	if err := os.MkdirAll(w.other, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.other, "secret.txt"), w.files["another workspace's secret"]+"\n")

	tmpls := templates(w)
	if len(w.toolchain) > 0 {
		t.Setenv("PATH", strings.Join(append([]string{os.Getenv("PATH")}, w.toolchain...), string(filepath.ListSeparator)))
	}
	var y strings.Builder
	fmt.Fprintf(&y, `# outerloop.yaml of the hostile-repository tests
defaults:
  max_attempts: 1
  budget: {wall_time: 3m, verify_reserve: 1m}
forges:
  remote: {kind: %s, base_url: %q, token_env: %s}
templates:
`, hostileForgeKind, w.remote.URL, hostileTokenVar)
	for _, tm := range tmpls {
		done := tm.done
		if done == "" {
			done = `{commands: ["true"]}`
		}
		fmt.Fprintf(&y, "  - name: %s\n    repo: %s\n    goal: be hostile\n    loop: %s\n    done_check: %s\n    deliver: {forge: remote, repo: %s, mode: branch}\n",
			tm.name, w.remote.CloneURL(), tm.loop, done, hostileRepo)
		if tm.extra != "" {
			fmt.Fprintf(&y, "    %s\n", tm.extra)
		}
	}
	path := filepath.Join(w.cfgDir, "outerloop.yaml")
	writeFile(t, path, y.String())
	kinds := forge.BuiltinKinds()
	for k, c := range hostileForgeKinds() {
		kinds[k] = c
	}
	cfg, err := config.LoadConfigWith(path, config.Kinds{Forges: kinds})
	if err != nil {
		t.Fatalf("%v\n%s", err, y.String())
	}
	o := app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue, Workdir: workdir,
		KeepWorkspaces: true, // the tests read the workspaces after the items end
		ForgeKinds:     hostileForgeKinds(),
		Logger:         slog.New(slog.NewTextHandler(io.MultiWriter(w.logs, testLogWriter()), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&o)
	}
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	w.s = &sys{App: a, env: env}
	if err := a.Runner.Unavailable; err != nil {
		// The attacks are on what the worker does around a sandbox that holds; without one
		// they prove nothing. CI has bubblewrap: there it is a failure.
		if os.Getenv("CI") != "" {
			t.Fatalf("the sandbox cannot start here: %v", err)
		}
		t.Skipf("the sandbox cannot start here (install bubblewrap, allow user namespaces): %v", err)
	}
	if got := a.Workspaces.Path("another-item", 1); got != w.other {
		t.Fatalf("another item's workspace would be at %s, not %s: follow the work dir's layout here", got, w.other)
	}
	return w
}

// hostDir makes a case's host directory: secret.txt and a passing JUnit report (report.xml)
// holding secret, and repo/, a git repository with secret.txt committed.
func (w *hostileWorld) hostDir(t *testing.T, name, secret string) string {
	t.Helper()
	dir := filepath.Join(w.root, "host", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "secret.txt"), secret+"\n")
	writeFile(t, filepath.Join(dir, "report.xml"), `<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="host" tests="1" failures="0" errors="0" skipped="0">
  <testcase classname="host" name="`+secret+`"><system-out>`+secret+`</system-out></testcase>
</testsuite>
`)
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	gitIn(t, repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(repo, "secret.txt"), secret+"\n")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "a host repository")
	return dir
}

// allSecrets are the world's secrets and extra ones.
func (w *hostileWorld) allSecrets(extra secrets) secrets {
	all := secrets{}
	for _, m := range []secrets{w.env, w.files, extra} {
		for k, v := range m {
			all[k] = v
		}
	}
	// The header git sends carries the token base64-encoded.
	all["the forge token (in its Basic header)"] = base64.StdEncoding.EncodeToString([]byte("x-access-token:" + w.token))
	return all
}

// leaks lists every place outside the sandbox's reach where the item left a secret: its
// workspace on disk, its patch, its events, its evidence files, every Redis key of the
// deployment, the logs, and what its branch holds on the remote.
func (w *hostileWorld) leaks(t *testing.T, it *workitems.Item, sec secrets) []string {
	t.Helper()
	ctx := context.Background()
	s := w.s
	out := treeLeaks(filepath.Dir(s.Workspaces.Path(it.ID, 1)), sec)
	for n := 1; n <= len(it.Attempts); n++ {
		if p, err := s.Store.Patch(ctx, it.ID, n); err == nil {
			if f := sec.found(p); len(f) > 0 {
				out = append(out, fmt.Sprintf("the patch of attempt %d holds %v", n, f))
			}
		}
		files, err := s.EvidenceFiles.Files(ctx, it.ID, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if found := sec.found(f.Data); len(found) > 0 {
				out = append(out, fmt.Sprintf("evidence file %s of attempt %d holds %v", f.Name, n, found))
			}
		}
	}
	evs, err := s.Store.Events(ctx, it.ID, "", 5000, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(evs)
	if f := sec.found(b); len(f) > 0 {
		out = append(out, fmt.Sprintf("the events hold %v", f))
	}
	ib, _ := json.Marshal(it)
	if f := sec.found(ib); len(f) > 0 {
		out = append(out, fmt.Sprintf("the item record holds %v", f))
	}
	out = append(out, redisLeaks(t, s, func(k string) bool { return strings.Contains(k, it.ID) }, sec)...)
	if f := sec.found([]byte(w.logs.String())); len(f) > 0 {
		out = append(out, fmt.Sprintf("the logs hold %v", f))
	}
	if d := it.Delivery; d != nil && d.Branch != "" {
		if head := w.remote.branch(t, d.Branch); head != "" {
			if f := sec.found(w.remote.objects(t, head)); len(f) > 0 {
				out = append(out, fmt.Sprintf("branch %s on the remote holds %v", d.Branch, f))
			}
		}
	}
	return out
}

// why is everything the item says about how it ended: escalation, decisions, exit, delivery.
func why(it *workitems.Item) string {
	var parts []string
	if e := it.Escalation; e != nil {
		parts = append(parts, e.Reason, e.Summary, e.Cause, e.Output)
	}
	for _, d := range it.Decisions {
		parts = append(parts, string(d.Rule), d.Summary, d.Cause, d.Output)
		parts = append(parts, d.Reasons...)
	}
	for _, a := range it.Attempts {
		if a.Exit != nil {
			parts = append(parts, string(a.Exit.Reason), a.Exit.Message)
		}
		if a.Delivery != nil {
			parts = append(parts, a.Delivery.Error)
		}
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " | ")
}

// delivered returns the paths of the commit on the remote, and NOTES.md's content there.
func (w *hostileWorld) delivered(t *testing.T, commit string) (paths []string, notes string) {
	t.Helper()
	paths = strings.Split(gitIn(t, w.remote.bare, "ls-tree", "-r", "--name-only", commit), "\n")
	if slices.Contains(paths, "NOTES.md") {
		notes = gitIn(t, w.remote.bare, "show", commit+":NOTES.md")
	}
	return paths, notes
}

// underGitDir reports whether a delivered path is inside a .git directory (or is one).
func underGitDir(p string) bool {
	return slices.Contains(strings.Split(p, "/"), ".git")
}

func quoteAll(cmds []string) string {
	q := make([]string, len(cmds))
	for i, c := range cmds {
		q[i] = strconv.Quote(c)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
