package forge_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/publish"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A forge kind, end to end: "memory" keeps its pull requests in memory and pushes to a real git
// remote (a bare repository behind git http-backend). It is registered next to the built-ins,
// named in forges: like any forge, and delivery publishes through it: the commit is pushed, a
// pull request opened, then updated by the next attempt.
func Example_aForgeKind() {
	ctx := context.Background()
	const token = "mem-T0ken-for-the-example"
	getenv := func(k string) string { return map[string]string{"MEM_TOKEN": token}[k] }
	remote := newExampleRemote("acme/docs", token) // a bare repository behind git http-backend
	defer remote.Close()

	// 1. Register the kind: the built-ins plus "memory", given to NewSet in the base Config.
	kinds := forge.BuiltinKinds()
	kinds["memory"] = newMemForge
	forges := map[string]config.ForgeConfig{ // the forges: section of the config
		"mem": {Kind: "memory", BaseURL: remote.URL, TokenEnv: "MEM_TOKEN"},
	}
	set, err := forge.NewSet(forges, forge.Config{Kinds: kinds, Getenv: getenv})
	check(err)

	// 2. Deliver through it: the publisher looks the forge up by deliver.forge.
	p := publish.New(publish.Options{Forges: set})
	tmpl := &config.Template{Name: "docs-fix", Deliver: config.Deliver{Forge: "mem", Repo: "acme/docs",
		Mode: workitems.DeliverPullRequest, Branch: config.DefaultBranchPattern, Title: "docs: fix typos", Labels: []string{"outerloop"}}}
	it := &workitems.Item{ID: "docs-fix@1", Template: tmpl.Name, Attempt: 1}
	for attempt, text := range []string{"teh\n", "the\n"} {
		del := remote.commit(text) // what an attempt committed in the item's workspace
		res, err := p.Publish(ctx, delivery.Publication{Template: tmpl, Item: it, Attempt: attempt + 1, Workspace: remote.workspace, Delivery: del})
		check(err)
		pushed := remote.branch(res.Delivery.Branch) == del.Commit
		fmt.Printf("attempt %d: %s #%d, %s at the commit: %v\n", attempt+1, res.Delivery.Outcome, res.Delivery.PR.Number, res.Delivery.Branch, pushed)
	}
	mem := set["mem"].(*memForge)
	fmt.Printf("pull requests: %d, labels %v\n", len(mem.prs), mem.prs[0].Labels)
	fmt.Println("git saw the token only in its Authorization header:", remote.sawTokenOnlyInHeader(token))

	// Output:
	// attempt 1: pr_opened #1, outerloop/docs-fix at the commit: true
	// attempt 2: pr_updated #1, outerloop/docs-fix at the commit: true
	// pull requests: 1, labels [outerloop]
	// git saw the token only in its Authorization header: true
}

// memForge is the new kind's client. It implements what delivery calls (publish.Forge) but
// Merge; the rest of forge.Forge (CI, reviews, merging) it leaves to forge.Unsupported.
type memForge struct {
	forge.Unsupported
	cfg forge.Config

	mu  sync.Mutex
	prs []*forge.PullRequest // by number - 1
}

// newMemForge is the kind's forge.Constructor: cfg is the forges: entry with defaults applied.
func newMemForge(cfg forge.Config) (forge.Forge, error) {
	return &memForge{Unsupported: forge.Unsupported{ForgeName: cfg.Name}, cfg: cfg}, nil
}

func (f *memForge) Name() string              { return f.cfg.Name }
func (f *memForge) Kind() workitems.ForgeKind { return f.cfg.Kind }

// Repository: where git pushes (an http(s) URL without credentials) and the default branch.
func (f *memForge) Repository(_ context.Context, repo string) (*forge.Repository, error) {
	return &forge.Repository{Repo: repo, DefaultBranch: "main", CloneURL: f.cfg.BaseURL + "/" + repo + ".git"}, nil
}

// GitAuth reads the token now (a rotated one is picked up) and hands it to git in a header
// scoped to the remote's origin (forge.NewGitAuth): never in the URL, an argv or a log.
func (f *memForge) GitAuth(remoteURL string) (forge.GitAuth, error) {
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

func (f *memForge) PullRequestsFor(_ context.Context, _, branch string) (forge.BranchPullRequests, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out forge.BranchPullRequests
	for _, pr := range f.prs {
		switch {
		case pr.Head != branch:
		case pr.State == workitems.PROpen:
			c := *pr
			out.Open = &c
		case out.LastClosed == nil || pr.ClosedAt.After(out.LastClosed.ClosedAt):
			c := *pr
			out.LastClosed = &c
		}
	}
	return out, nil
}

func (f *memForge) CreatePullRequest(_ context.Context, repo string, n forge.NewPullRequest) (*forge.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, pr := range f.prs {
		if pr.State == workitems.PROpen && pr.Head == n.Head && pr.Base == n.Base {
			return nil, &forge.Error{Forge: f.Name(), Op: "create pull request", Repo: repo, Class: workitems.ClassConflict, Err: forge.ErrPullRequestExists}
		}
	}
	pr := &forge.PullRequest{Number: len(f.prs) + 1, State: workitems.PROpen, Draft: n.Draft, Title: n.Title, Body: n.Body, Base: n.Base, Head: n.Head}
	pr.URL = fmt.Sprintf("%s/%s/pulls/%d", f.cfg.BaseURL, repo, pr.Number)
	f.prs = append(f.prs, pr)
	c := *pr
	return &c, nil
}

func (f *memForge) EditPullRequest(_ context.Context, repo string, number int, e forge.PullRequestEdit) (*forge.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr, err := f.pr(repo, number)
	if err != nil {
		return nil, err
	}
	if e.Title != nil {
		pr.Title = *e.Title
	}
	if e.Body != nil {
		pr.Body = *e.Body
	}
	c := *pr
	return &c, nil
}

func (f *memForge) AddLabels(_ context.Context, repo string, number int, labels []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr, err := f.pr(repo, number)
	if err != nil {
		return err
	}
	for _, l := range labels {
		if !slices.Contains(pr.Labels, l) {
			pr.Labels = append(pr.Labels, l)
		}
	}
	return nil
}

func (f *memForge) Comment(_ context.Context, repo string, number int, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.pr(repo, number)
	return err
}

// pr is pull request number (f.mu held); a missing one is ErrNotFound, as every kind says it.
func (f *memForge) pr(repo string, number int) (*forge.PullRequest, error) {
	if number < 1 || number > len(f.prs) {
		return nil, &forge.Error{Forge: f.Name(), Op: "read pull request", Repo: repo, Class: workitems.ClassNotFound, Err: forge.ErrNotFound}
	}
	return f.prs[number-1], nil
}

// exampleRemote is the example's surroundings: a bare repository served by git http-backend,
// which refuses any request without the token in its Authorization header, and the item's
// workspace, a clone of its main.
type exampleRemote struct {
	*httptest.Server
	root, bare, workspace, base string

	mu    sync.Mutex
	urls  []string // every request's URL
	authd int      // requests that carried the token
}

func newExampleRemote(repo, token string) *exampleRemote {
	root, err := os.MkdirTemp("", "example-forge-kind-")
	check(err)
	r := &exampleRemote{root: root, bare: filepath.Join(root, repo+".git"), workspace: filepath.Join(root, "ws")}
	exampleGit(root, "init", "-q", "--bare", r.bare)
	exampleGit(r.bare, "config", "http.receivepack", "true")
	gitBin, err := exec.LookPath("git")
	check(err)
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root,
		"GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root}}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.urls = append(r.urls, req.URL.String())
		ok := req.Header.Get("Authorization") == want
		if ok {
			r.authd++
		}
		r.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="memory"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))

	check(os.Mkdir(r.workspace, 0o755))
	exampleGit(r.workspace, "init", "-q")
	check(os.WriteFile(filepath.Join(r.workspace, "README.md"), []byte("# docs\n"), 0o644))
	exampleGit(r.workspace, "add", "-A")
	exampleGit(r.workspace, "commit", "-qm", "base")
	exampleGit(r.workspace, "push", "-q", r.bare, "HEAD:refs/heads/main")
	r.base = exampleGit(r.workspace, "rev-parse", "HEAD")
	return r
}

func (r *exampleRemote) Close() {
	r.Server.Close()
	_ = os.RemoveAll(r.root)
}

// sawTokenOnlyInHeader reports whether git authenticated with the token and no URL carried it.
func (r *exampleRemote) sawTokenOnlyInHeader(token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.urls {
		if strings.Contains(u, token) {
			return false
		}
	}
	return r.authd > 0
}

// commit commits text as typos.md on main's commit in the workspace, as an attempt would.
func (r *exampleRemote) commit(text string) workitems.Delivery {
	exampleGit(r.workspace, "checkout", "-q", r.base)
	check(os.WriteFile(filepath.Join(r.workspace, "typos.md"), []byte(text), 0o644))
	exampleGit(r.workspace, "add", "-A")
	exampleGit(r.workspace, "commit", "-qm", "docs: fix typos")
	return workitems.Delivery{Mode: workitems.DeliverPullRequest, Base: r.base, Commit: exampleGit(r.workspace, "rev-parse", "HEAD"),
		Tree: exampleGit(r.workspace, "rev-parse", "HEAD^{tree}"), BaseTree: exampleGit(r.workspace, "rev-parse", r.base+"^{tree}"),
		FileCount: 1, Added: 1}
}

// branch is the remote's commit for branch ("" when none).
func (r *exampleRemote) branch(branch string) string {
	out, err := exec.Command("git", "--git-dir", r.bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func exampleGit(dir string, args ...string) string {
	cmd := exec.Command("git", append([]string{"-c", "user.name=example", "-c", "user.email=example@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		panic(fmt.Sprintf("git %s: %v\n%s", strings.Join(args, " "), err, out))
	}
	return strings.TrimSpace(string(out))
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
