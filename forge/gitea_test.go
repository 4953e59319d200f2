package forge

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/lib/testwait"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// giteaEnv is one test's repository on the package's Gitea, a local clone with main pushed,
// and a forge client whose log output is kept.
type giteaEnv struct {
	srv  *giteatest.Server
	repo giteatest.Repo
	dir  string // local repository
	base string // main's commit
	f    Forge
	logs *testlog.Buffer
}

func newGiteaEnv(t *testing.T, prefix string) *giteaEnv {
	t.Helper()
	srv := giteatest.Shared(t)
	e := &giteaEnv{srv: srv, repo: srv.NewRepo(t, prefix), logs: &testlog.Buffer{}}
	e.dir, e.base = localRepo(t)
	srv.PushDir(t, e.dir, e.repo, "main")
	e.f = e.forge(t, srv.URL, srv.Getenv("GITEA_TOKEN"))
	t.Cleanup(func() { noSecret(t, "the forge's log", e.logs.String(), e.secrets()...) })
	return e
}

// forge builds a client with the default retries: Gitea catches up in its own time (indexing
// a pushed branch took most of a second here under load).
func (e *giteaEnv) forge(t *testing.T, baseURL string, getenv func(string) string, opts ...func(*Config)) Forge {
	t.Helper()
	cfg := Config{Name: "tea", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitea, BaseURL: baseURL,
		TokenEnv: "GITEA_TOKEN"}, Getenv: getenv, Logger: newLogger(e.logs),
		// A local Gitea on a loaded machine may take longer than production's 30 s to create a
		// pull request (it tests mergeability): a request is bounded by the test's deadline.
		RequestTimeout: testwait.Left(t)}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// secrets are the token and every encoding of it git or HTTP could carry.
func (e *giteaEnv) secrets() []string {
	tok := e.srv.Token()
	return []string{tok, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok)),
		base64.StdEncoding.EncodeToString([]byte(e.srv.Admin + ":" + tok))}
}

// push pushes sha to branch with the forge's auth, expecting the branch at expected.
func (e *giteaEnv) push(t *testing.T, sha, branch, expected string) error {
	t.Helper()
	auth, err := e.f.GitAuth(e.repo.CloneURL)
	if err != nil {
		t.Fatal(err)
	}
	return Push(bg, PushRequest{Forge: "tea", Dir: e.dir, URL: e.repo.CloneURL, SHA: sha, Branch: branch,
		Expected: expected, Auth: auth})
}

// branchCommit commits a change on a new local branch off main and returns its SHA.
func (e *giteaEnv) branchCommit(t *testing.T, branch, file, content string) string {
	t.Helper()
	gitRun(t, e.dir, "checkout", "-q", "-B", branch, e.base)
	return commitFile(t, e.dir, file, content, "change "+file)
}

func TestGiteaDeliversAPullRequestEndToEnd(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "flow")
	const branch = "outerloop/deps-bump"

	repo, err := e.f.Repository(bg, e.repo.Slug)
	if err != nil {
		t.Fatal(err)
	}
	if repo.DefaultBranch != "main" || repo.CloneURL != e.repo.CloneURL {
		t.Fatalf("repository %+v", repo)
	}
	if u, _ := url.Parse(repo.CloneURL); u.User != nil {
		t.Fatalf("clone URL carries credentials: %s", repo.CloneURL)
	}

	// Push over HTTP with the token in the environment only; record what was exec'd.
	sha1 := e.branchCommit(t, branch, "go.mod", "module sample\n\ngo 1.26\n")
	auth, err := e.f.GitAuth(repo.CloneURL)
	if err != nil {
		t.Fatal(err)
	}
	gitBin, argvLog := argvRecorder(t)
	rb := PushRequest{Forge: "tea", Dir: e.dir, URL: repo.CloneURL, Branch: branch, Auth: auth, Git: gitBin}
	if got, err := RemoteBranch(bg, rb); err != nil || got != "" {
		t.Fatalf("remote branch before the push: %q, %v", got, err)
	}
	push := rb
	push.SHA = sha1
	if err := Push(bg, push); err != nil {
		t.Fatal(err)
	}
	if got, err := RemoteBranch(bg, rb); err != nil || got != sha1 {
		t.Fatalf("remote branch after the push: %q, %v; want %s", got, err, sha1)
	}
	argv, _ := os.ReadFile(argvLog)
	noSecret(t, "git's argv", string(argv), e.secrets()...)
	wantArgv := "-C " + e.dir + " push --porcelain --force-with-lease=refs/heads/" + branch + ": " + repo.CloneURL + " " +
		sha1 + ":refs/heads/" + branch
	if !strings.Contains(string(argv), wantArgv) {
		t.Fatalf("exec'd argv\n%s\nwant a line\n%s", argv, wantArgv)
	}
	noSecret(t, "auth's String", fmt.Sprint(auth)+fmt.Sprintf("%#v", auth), e.secrets()...)

	// Open the pull request right after the push (Gitea may not have indexed the branch yet).
	pr, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "Bump deps", Body: "evidence: 12 tests passed",
		Base: "main", Head: branch})
	if err != nil {
		t.Fatal(err)
	}
	if pr.State != workitems.PROpen || pr.Head != branch || pr.Base != "main" || pr.HeadSHA != sha1 || pr.Number == 0 ||
		!strings.HasPrefix(pr.URL, e.srv.URL+"/"+e.repo.Slug+"/pulls/") {
		t.Fatalf("created %+v", pr)
	}
	_, err = e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "again", Base: "main", Head: branch})
	wantErr(t, err, workitems.ClassConflict, ErrPullRequestExists)

	found, err := e.f.PullRequestsFor(bg, e.repo.Slug, branch)
	if err != nil || found.Open == nil || found.Open.Number != pr.Number || found.LastClosed != nil {
		t.Fatalf("found %+v, %v", found, err)
	}
	if other, err := e.f.PullRequestsFor(bg, e.repo.Slug, "outerloop/other"); err != nil || other.Open != nil || other.LastClosed != nil {
		t.Fatalf("another branch: %+v, %v", other, err)
	}

	title, body := "Bump deps (attempt 2)", "evidence: 13 tests passed"
	edited, err := e.f.EditPullRequest(bg, e.repo.Slug, pr.Number, PullRequestEdit{Title: &title, Body: &body})
	if err != nil || edited.Title != title || edited.Body != body {
		t.Fatalf("edited %+v, %v", edited, err)
	}

	// Labels are ids on Gitea: missing ones are created, existing ones reused.
	if err := e.f.AddLabels(bg, e.repo.Slug, pr.Number, []string{"outerloop"}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.AddLabels(bg, e.repo.Slug, pr.Number, []string{"outerloop", "outerloop:needs-human"}); err != nil {
		t.Fatal(err)
	}
	var labels []struct{ Name string }
	e.srv.API(t, http.MethodGet, "/repos/"+e.repo.Slug+"/labels", nil, http.StatusOK, &labels)
	if len(labels) != 2 {
		t.Fatalf("repository labels %+v: want exactly the two added", labels)
	}
	if err := e.f.Comment(bg, e.repo.Slug, pr.Number, "Escalated: CI red twice on the same failure."); err != nil {
		t.Fatal(err)
	}
	var comments []struct{ Body string }
	e.srv.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/comments", e.repo.Slug, pr.Number), nil, http.StatusOK, &comments)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "CI red twice") {
		t.Fatalf("comments %+v", comments)
	}
	found, _ = e.f.PullRequestsFor(bg, e.repo.Slug, branch)
	if slices.Sort(found.Open.Labels); !slices.Equal(found.Open.Labels, []string{"outerloop", "outerloop:needs-human"}) {
		t.Fatalf("pull request labels %v", found.Open.Labels)
	}

	// Commit statuses → normalised checks, the latest per context.
	e.srv.PostStatus(t, e.repo, sha1, "build", "success", "built in 3s", "http://ci/build/1")
	e.srv.PostStatus(t, e.repo, sha1, "test", "pending", "running", "http://ci/test/1")
	e.srv.PostStatus(t, e.repo, sha1, "test", "failure", "TestParse failed", "http://ci/test/1")
	e.srv.PostStatus(t, e.repo, sha1, "lint", "warning", "2 warnings", "")
	e.srv.PostStatus(t, e.repo, sha1, "e2e", "error", "runner lost", "")
	checks, err := e.f.Checks(bg, e.repo.Slug, sha1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Check{
		{Name: "build", State: workitems.CheckSuccess, SHA: sha1, URL: "http://ci/build/1", Summary: "built in 3s"},
		{Name: "e2e", State: workitems.CheckInfraError, SHA: sha1, Summary: "runner lost"},
		{Name: "lint", State: workitems.CheckFailure, SHA: sha1, Summary: "2 warnings"},
		{Name: "test", State: workitems.CheckFailure, SHA: sha1, URL: "http://ci/test/1", Summary: "TestParse failed"},
	}
	if fmt.Sprint(checks) != fmt.Sprint(want) {
		t.Fatalf("checks\n got %+v\nwant %+v", checks, want)
	}
	if rr, err := e.f.RerunChecks(bg, e.repo.Slug, sha1, []string{"e2e"}); err != nil || len(rr) != 0 {
		t.Fatalf("statuses cannot be re-run: %v %v", rr, err)
	}

	// A retry pushes a second commit to the same branch, leased on the first.
	sha2 := commitFile(t, e.dir, "go.sum", "sum\n", "tidy")
	if err := e.push(t, sha2, branch, sha1); err != nil {
		t.Fatal(err)
	}
	// A push leased on what is no longer there loses.
	stale := commitFile(t, e.dir, "x.txt", "x\n", "late")
	e4 := wantErr(t, e.push(t, stale, branch, sha1), workitems.ClassConflict, ErrStaleLease)
	noSecret(t, "the push error", e4.Error(), e.secrets()...)
	e.srv.PostStatus(t, e.repo, sha2, "test", "success", "ok", "")
	if checks, _ := e.f.Checks(bg, e.repo.Slug, sha2); len(checks) != 1 || checks[0].State != workitems.CheckSuccess {
		t.Fatalf("checks of the new head %+v: the old head's are not its", checks)
	}

	// Merge is refused when the head is not what was checked, then done for the pushed SHA.
	_, err = e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: sha1})
	wantErr(t, err, workitems.ClassConflict, ErrHeadMoved)
	_, err = e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: workitems.MergeSquash})
	wantErr(t, err, workitems.ClassInvalidInput, nil)
	mergeSHA, err := e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: sha2,
		Title: "Bump deps (#" + fmt.Sprint(pr.Number) + ")", Message: "Outerloop-Item: deps-bump@20261201T030000Z"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := RemoteBranch(bg, PushRequest{Dir: e.dir, URL: repo.CloneURL, Branch: "main", Auth: auth}); got != mergeSHA {
		t.Fatalf("main is at %s, merge returned %s", got, mergeSHA)
	}
	found, err = e.f.PullRequestsFor(bg, e.repo.Slug, branch)
	if err != nil || found.Open != nil || found.LastClosed == nil || !found.LastClosed.Merged() ||
		found.LastClosed.MergeCommitSHA != mergeSHA || found.LastClosed.HeadSHA != sha2 {
		t.Fatalf("after the merge: %+v %+v, %v", found.Open, found.LastClosed, err)
	}
}

func TestGiteaFindsTheClosedUnmergedPullRequest(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "declined")
	const branch = "outerloop/lint"
	sha := e.branchCommit(t, branch, "a.go", "package a\n")
	if err := e.push(t, sha, branch, ""); err != nil {
		t.Fatal(err)
	}
	pr, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "Lint", Base: "main", Head: branch, Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Draft || pr.Title != "WIP: Lint" {
		t.Fatalf("a draft on Gitea is a WIP title: %+v", pr)
	}
	retitled := "Lint again"
	if p, err := e.f.EditPullRequest(bg, e.repo.Slug, pr.Number, PullRequestEdit{Title: &retitled}); err != nil || !p.Draft ||
		p.Title != "WIP: Lint again" {
		t.Fatalf("a new title keeps the draft: %+v, %v", p, err)
	}
	e.srv.ClosePullRequest(t, e.repo, pr.Number)
	found, err := e.f.PullRequestsFor(bg, e.repo.Slug, branch)
	if err != nil {
		t.Fatal(err)
	}
	if found.Open != nil || found.LastClosed == nil || found.LastClosed.State != workitems.PRClosed || found.LastClosed.Merged() ||
		found.LastClosed.Number != pr.Number || found.LastClosed.HeadSHA != sha || found.LastClosed.ClosedAt.IsZero() {
		t.Fatalf("found %+v / %+v", found.Open, found.LastClosed)
	}
	_, err = e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: workitems.MergeMerge, ExpectedHeadSHA: sha})
	wantErr(t, err, workitems.ClassConflict, ErrNotMergeable)
}

func TestGiteaMergesWithEachMethod(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "methods")
	prevMain := e.base
	for _, m := range workitems.AllMergeMethods() {
		// Each branch changes its own file off the first commit, so every merge is clean.
		branch := "outerloop/" + string(m)
		head := e.branchCommit(t, branch, string(m)+".txt", string(m)+"\n")
		if err := e.push(t, head, branch, ""); err != nil {
			t.Fatal(err)
		}
		pr, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "by " + string(m), Base: "main", Head: branch})
		if err != nil {
			t.Fatal(err)
		}
		sha, err := e.f.Merge(bg, e.repo.Slug, pr.Number, MergeRequest{Method: m, ExpectedHeadSHA: head})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		e.srv.Git(t, e.dir, "fetch", "-q", e.repo.CloneURL, "main")
		if got := gitRun(t, e.dir, "rev-parse", "FETCH_HEAD"); got != sha {
			t.Fatalf("%s: main is at %s, merge returned %s", m, got, sha)
		}
		parents := strings.Fields(gitRun(t, e.dir, "rev-list", "--parents", "-n1", sha))[1:]
		files := gitRun(t, e.dir, "ls-tree", "--name-only", sha)
		if !strings.Contains(files, string(m)+".txt") {
			t.Fatalf("%s: merged tree lacks the change: %s", m, files)
		}
		switch m {
		case workitems.MergeMerge:
			if len(parents) != 2 || parents[0] != prevMain || parents[1] != head {
				t.Fatalf("merge commit parents %v, want [%s %s]", parents, prevMain, head)
			}
		case workitems.MergeSquash, workitems.MergeRebase:
			if len(parents) != 1 || parents[0] != prevMain {
				t.Fatalf("%s: parents %v, want [%s]", m, parents, prevMain)
			}
		}
		prevMain = sha
	}
}

func TestGiteaCreateRetriesTheNotFoundOfABranchNotYetIndexed(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "indexing")
	target, _ := url.Parse(e.srv.URL)
	var creates, refused atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	// In front of the real Gitea: the first create is answered as Gitea answers while it is
	// still indexing a pushed branch.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/repos/"+e.repo.Slug+"/pulls" {
			if creates.Add(1) == 1 {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"message":"not found","url":"` + e.srv.URL + `/api/swagger"}`))
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	f := e.forge(t, proxy.URL, e.srv.Getenv("GITEA_TOKEN"))

	sha := e.branchCommit(t, "outerloop/indexed", "a.txt", "a\n")
	if err := e.push(t, sha, "outerloop/indexed", ""); err != nil {
		t.Fatal(err)
	}
	pr, err := f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "t", Base: "main", Head: "outerloop/indexed"})
	if err != nil {
		t.Fatal(err)
	}
	// Gitea itself may refuse a few more times while it indexes; the client waits it out.
	if creates.Load() < 2 || refused.Load() != 1 || pr.HeadSHA != sha {
		t.Fatalf("%d creates (%d refused by the proxy), pr %+v: want a 404 then success", creates.Load(), refused.Load(), pr)
	}

	// A branch that never appears stays not found once the retries are spent.
	creates.Store(1)
	f = e.forge(t, proxy.URL, e.srv.Getenv("GITEA_TOKEN"), func(c *Config) { c.RetryBase = time.Millisecond })
	_, err = f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "t", Base: "main", Head: "outerloop/never-pushed"})
	fe := wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	if got := creates.Load() - 1; got != 6 || fe.StatusCode != http.StatusNotFound {
		t.Fatalf("%d tries (HTTP %d), want the default 6", got, fe.StatusCode)
	}
}

func TestGiteaBadInputIsAClearClassifiedError(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "bad")
	sha := e.branchCommit(t, "outerloop/bad", "a.txt", "a\n")

	t.Run("AMissingTokenVariableFailsWritesBeforeSendingThem", func(t *testing.T) {
		if err := e.push(t, sha, "outerloop/bad", ""); err != nil {
			t.Fatal(err)
		}
		f := e.forge(t, e.srv.URL, func(string) string { return "" })
		_, err := f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "t", Base: "main", Head: "outerloop/bad"})
		fe := wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
		if !strings.Contains(fe.Error(), "$GITEA_TOKEN is not set") || !strings.Contains(fe.Error(), "forge tea: create pull request "+e.repo.Slug) {
			t.Fatalf("error text: %v", fe)
		}
		var pulls []any
		e.srv.API(t, http.MethodGet, "/repos/"+e.repo.Slug+"/pulls?state=all", nil, http.StatusOK, &pulls)
		if len(pulls) != 0 {
			t.Fatalf("a pull request was created without a token: %v", pulls)
		}
		_, err = f.GitAuth(e.repo.CloneURL)
		wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
		// Reads of a private repository without a token: Gitea says it does not exist.
		_, err = f.Repository(bg, e.repo.Slug)
		wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	})
	t.Run("AWrongTokenIsAnAuthFailure", func(t *testing.T) {
		auth, err := NewGitAuth(e.repo.CloneURL, "not-the-token")
		if err != nil {
			t.Fatal(err)
		}
		err = Push(bg, PushRequest{Forge: "tea", Dir: e.dir, URL: e.repo.CloneURL, SHA: sha, Branch: "outerloop/other", Auth: auth})
		fe := wantErr(t, err, workitems.ClassPermission, ErrAuth)
		if fe.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d: %v", fe.StatusCode, fe)
		}
		noSecret(t, "the error", fe.Error(), "not-the-token", base64.StdEncoding.EncodeToString([]byte("x-access-token:not-the-token")))
	})
	t.Run("AProtectedBranchRefusesThePush", func(t *testing.T) {
		e.srv.ProtectBranch(t, e.repo, "main")
		err := e.push(t, sha, "main", e.base)
		fe := wantErr(t, err, workitems.ClassPermission, ErrProtectedBranch)
		if !strings.Contains(fe.Message, "remote rejected") {
			t.Fatalf("message %q", fe.Message)
		}
	})
	t.Run("CredentialsInARemoteURLAreRefused", func(t *testing.T) {
		u := strings.Replace(e.repo.CloneURL, "http://", "http://bot:hunter2@", 1)
		_, err := e.f.GitAuth(u)
		fe := wantErr(t, err, workitems.ClassInvalidInput, nil)
		noSecret(t, "the error", fe.Error(), "hunter2")
		err = Push(bg, PushRequest{Dir: e.dir, URL: u, SHA: sha, Branch: "x"})
		fe = wantErr(t, err, workitems.ClassInvalidInput, nil)
		noSecret(t, "the error", fe.Error(), "hunter2")
	})
	t.Run("BadPushArgumentsChangeNothing", func(t *testing.T) {
		for _, r := range []PushRequest{
			{Dir: e.dir, URL: e.repo.CloneURL, SHA: "HEAD", Branch: "x"},
			{Dir: e.dir, URL: e.repo.CloneURL, SHA: sha, Branch: "bad..branch"},
			{Dir: e.dir, URL: e.repo.CloneURL, SHA: sha, Branch: "x", Expected: "main"},
			{Dir: e.dir, URL: "ssh://git@host/a/b", SHA: sha, Branch: "x"},
		} {
			wantErr(t, Push(bg, r), workitems.ClassInvalidInput, nil)
		}
	})
	t.Run("APullRequestAPIErrorIsClassified", func(t *testing.T) {
		_, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: "t", Base: "main", Head: "main"})
		fe := wantErr(t, err, workitems.ClassInvalidInput, nil)
		if fe.StatusCode != http.StatusUnprocessableEntity || fe.Message == "" {
			t.Fatalf("%+v", fe)
		}
		_, err = e.f.Repository(bg, e.srv.Admin+"/no-such-repo")
		wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
		_, err = e.f.Repository(bg, "not-a-slug")
		wantErr(t, err, workitems.ClassInvalidInput, nil)
		_, err = e.f.Merge(bg, e.repo.Slug, 1, MergeRequest{Method: "octopus", ExpectedHeadSHA: sha})
		wantErr(t, err, workitems.ClassInvalidInput, nil)
	})
	t.Run("AnUnreachableForgeIsTransient", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		f := e.forge(t, dead.URL, e.srv.Getenv("GITEA_TOKEN"))
		_, err := f.Repository(bg, e.repo.Slug)
		wantErr(t, err, workitems.ClassTransient, nil)
		auth, _ := NewGitAuth(dead.URL+"/a/b.git", "tok")
		err = Push(bg, PushRequest{Dir: e.dir, URL: dead.URL + "/a/b.git", SHA: sha, Branch: "x", Auth: auth})
		wantErr(t, err, workitems.ClassTransient, nil)
	})
	t.Run("AnUnknownForgeKeyIsNamed", func(t *testing.T) {
		set, err := NewSet(map[string]config.ForgeConfig{"tea": {Kind: workitems.ForgeGitea, BaseURL: e.srv.URL, TokenEnv: "T"}}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if f, err := set.Get("tea"); err != nil || f.Name() != "tea" || f.Kind() != workitems.ForgeGitea {
			t.Fatalf("%v %v", f, err)
		}
		_, err = set.Get("gitlab")
		fe := wantErr(t, err, workitems.ClassInvalidInput, ErrUnknownForge)
		if !strings.Contains(fe.Error(), "gitlab") {
			t.Fatal(fe)
		}
		_, err = New(Config{ForgeConfig: config.ForgeConfig{Kind: "gitlab"}})
		wantErr(t, err, workitems.ClassInvalidInput, nil)
	})
}

// A hook in the pushed repository is the item's code: the push runs none of them (with the
// forge's credentials in its environment), on the real Gitea.
func TestAPushRunsNoHookOfThePushedRepository(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "hooks")
	sha := e.branchCommit(t, "outerloop/hook", "HOOK.md", "x\n")
	ran := filepath.Join(t.TempDir(), "ran")
	hook := filepath.Join(e.dir, ".git", "hooks", "pre-push")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nenv > '"+ran+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.push(t, sha, "outerloop/hook", ""); err != nil {
		t.Fatalf("push with a failing pre-push hook in the repository: %v", err)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the repository's pre-push hook ran (%v)", err)
	}
	if got, err := RemoteBranch(bg, PushRequest{Forge: "tea", Dir: e.dir, URL: e.repo.CloneURL, Branch: "outerloop/hook",
		Auth: mustAuth(t, e)}); err != nil || got != sha {
		t.Fatalf("remote branch %q %v, want %s", got, err, sha)
	}
}

func mustAuth(t *testing.T, e *giteaEnv) GitAuth {
	t.Helper()
	auth, err := e.f.GitAuth(e.repo.CloneURL)
	if err != nil {
		t.Fatal(err)
	}
	return auth
}
