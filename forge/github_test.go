package forge

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/testlog"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// recClock is the real time, except that waits return at once and are recorded.
type recClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recClock) Now() time.Time { return time.Now() }

func (c *recClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

func (c *recClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

const ghToken = "ghp_s3cr3tT0kenForTests0000000000000000"

type ghEnv struct {
	fake  *fakeGitHub
	f     Forge
	clock *recClock
	logs  *testlog.Buffer
	dir   string // local repository
	base  string // main's commit, pushed
}

func newGHEnv(t *testing.T, getenv func(string) string) *ghEnv {
	t.Helper()
	e := &ghEnv{fake: newFakeGitHub(t, ghToken), clock: &recClock{}, logs: &testlog.Buffer{}}
	if getenv == nil {
		getenv = func(k string) string {
			if k == "GH_BOT_TOKEN" {
				return ghToken
			}
			return ""
		}
	}
	f, err := New(Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
		BaseURL: e.fake.api.URL, TokenEnv: "GH_BOT_TOKEN"}, Getenv: getenv, Clock: e.clock, Logger: newLogger(e.logs)})
	if err != nil {
		t.Fatal(err)
	}
	e.f = f
	e.dir, e.base = localRepo(t)
	t.Cleanup(func() { noSecret(t, "the forge's log", e.logs.String(), e.secrets()...) })
	return e
}

func (e *ghEnv) secrets() []string {
	return []string{ghToken, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + ghToken))}
}

func (e *ghEnv) push(t *testing.T, sha, branch, expected string) error {
	t.Helper()
	auth, err := e.f.GitAuth(e.fake.cloneURL())
	if err != nil {
		t.Fatal(err)
	}
	return Push(bg, PushRequest{Forge: "github", Dir: e.dir, URL: e.fake.cloneURL(), SHA: sha, Branch: branch,
		Expected: expected, Auth: auth})
}

func TestGitHubDeliversAPullRequestEndToEnd(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	const branch = "outerloop/deps-bump"

	repo, err := e.f.Repository(bg, ghRepo)
	if err != nil || repo.DefaultBranch != "main" || repo.CloneURL != e.fake.cloneURL() {
		t.Fatalf("repository %+v, %v", repo, err)
	}
	// The push goes to a real git remote, with the token only in an extraHeader.
	gitBin, argvLog := argvRecorder(t)
	auth, err := e.f.GitAuth(repo.CloneURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(bg, PushRequest{Dir: e.dir, URL: repo.CloneURL, SHA: e.base, Branch: "main", Auth: auth, Git: gitBin}); err != nil {
		t.Fatal(err)
	}
	gitRun(t, e.dir, "checkout", "-q", "-b", "work")
	sha1 := commitFile(t, e.dir, "go.mod", "module sample\n", "bump")
	if err := e.push(t, sha1, branch, ""); err != nil {
		t.Fatal(err)
	}
	if e.fake.branchSHA(branch) != sha1 {
		t.Fatalf("remote branch %q, want %s", e.fake.branchSHA(branch), sha1)
	}
	argv, _ := os.ReadFile(argvLog)
	noSecret(t, "git's argv", string(argv), e.secrets()...)
	if want := "push --porcelain --force-with-lease=refs/heads/main: " + repo.CloneURL + " " + e.base + ":refs/heads/main"; !strings.Contains(string(argv), want) {
		t.Fatalf("argv %s\nwant %s", argv, want)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ghToken)); !slices.Contains(e.fake.gitAuth, want) {
		t.Fatalf("the git remote never saw the token's header: %q", e.fake.gitAuth)
	}

	pr, err := e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "Bump deps", Body: "evidence", Base: "main", Head: branch, Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 1 || pr.State != workitems.PROpen || !pr.Draft || pr.HeadSHA != sha1 || pr.MergeCommitSHA != "" ||
		pr.URL != "https://github.com/acme/payments/pull/1" {
		t.Fatalf("created %+v (an open PR's test merge commit is not a merge)", pr)
	}
	_, err = e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "again", Base: "main", Head: branch})
	wantErr(t, err, workitems.ClassConflict, ErrPullRequestExists)
	_, err = e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "no branch", Base: "main", Head: "outerloop/none"})
	fe := wantErr(t, err, workitems.ClassInvalidInput, nil)
	if fe.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(fe.Message, "Validation Failed") {
		t.Fatalf("%+v", fe)
	}

	found, err := e.f.PullRequestsFor(bg, ghRepo, branch)
	if err != nil || found.Open == nil || found.Open.Number != 1 || found.LastClosed != nil {
		t.Fatalf("found %+v %+v, %v", found.Open, found.LastClosed, err)
	}
	if !slices.ContainsFunc(e.fake.requests, func(r string) bool {
		return strings.HasPrefix(r, "GET /repos/acme/payments/pulls?") && strings.Contains(r, "head=acme%3Aouterloop%2Fdeps-bump") &&
			strings.Contains(r, "state=all")
	}) {
		t.Fatalf("pulls not listed by head: %v", e.fake.requests)
	}

	title := "Bump deps (attempt 2)"
	if p, err := e.f.EditPullRequest(bg, ghRepo, 1, PullRequestEdit{Title: &title}); err != nil || p.Title != title || p.Body != "evidence" {
		t.Fatalf("edited %+v, %v", p, err)
	}
	if err := e.f.AddLabels(bg, ghRepo, 1, []string{"outerloop", "outerloop:needs-human"}); err != nil {
		t.Fatal(err)
	}
	if err := e.f.Comment(bg, ghRepo, 1, "Escalated: needs a person."); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.fake.labels[1], []string{"outerloop", "outerloop:needs-human"}) || len(e.fake.comments[1]) != 1 {
		t.Fatalf("labels %v, comments %v", e.fake.labels[1], e.fake.comments[1])
	}

	// A retry's second commit on the same branch; then merge only what was checked.
	sha2 := commitFile(t, e.dir, "go.sum", "sum\n", "tidy")
	if err := e.push(t, sha2, branch, sha1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, e.push(t, commitFile(t, e.dir, "late.txt", "x\n", "late"), branch, sha1), workitems.ClassConflict, ErrStaleLease)
	_, err = e.f.Merge(bg, ghRepo, 1, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: sha1})
	wantErr(t, err, workitems.ClassConflict, ErrHeadMoved)
	e.fake.unmergeable = true
	_, err = e.f.Merge(bg, ghRepo, 1, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: sha2})
	wantErr(t, err, workitems.ClassConflict, ErrNotMergeable)
	e.fake.unmergeable = false
	mergeSHA, err := e.f.Merge(bg, ghRepo, 1, MergeRequest{Method: workitems.MergeSquash, ExpectedHeadSHA: sha2, Title: "Bump deps (#1)"})
	if err != nil || len(mergeSHA) != 40 {
		t.Fatalf("merge %q, %v", mergeSHA, err)
	}
	if last := e.fake.bodies[len(e.fake.bodies)-1]; !strings.Contains(last, `"merge_method":"squash"`) || !strings.Contains(last, `"sha":"`+sha2+`"`) {
		t.Fatalf("merge request body %s", last)
	}
	found, err = e.f.PullRequestsFor(bg, ghRepo, branch)
	if err != nil || found.Open != nil || found.LastClosed == nil || !found.LastClosed.Merged() || found.LastClosed.MergeCommitSHA != mergeSHA {
		t.Fatalf("after merge: %+v %+v, %v", found.Open, found.LastClosed, err)
	}

	// A person closes the next one without merging.
	if err := e.push(t, commitFile(t, e.dir, "b.txt", "b\n", "b"), "outerloop/lint", ""); err != nil {
		t.Fatal(err)
	}
	pr2, err := e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "Lint", Base: "main", Head: "outerloop/lint"})
	if err != nil {
		t.Fatal(err)
	}
	e.fake.closePull(pr2.Number)
	found, err = e.f.PullRequestsFor(bg, ghRepo, "outerloop/lint")
	if err != nil || found.Open != nil || found.LastClosed == nil || found.LastClosed.State != workitems.PRClosed || found.LastClosed.HeadSHA == "" {
		t.Fatalf("declined: %+v %+v, %v", found.Open, found.LastClosed, err)
	}

	for i, a := range e.fake.auth {
		if a != "Bearer "+ghToken {
			t.Fatalf("API request %d (%s) carried %q", i, e.fake.requests[i], a)
		}
	}
}

func TestGitHubChecksAreTheLatestPerNameForTheSHA(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	e.fake.runs = []map[string]any{
		checkRun(1, "build", shaA, "completed", "failure", t0),
		checkRun(2, "build", shaA, "completed", "success", t0.Add(time.Minute)), // the re-run wins
		checkRun(3, "test", shaA, "in_progress", "", t0),
		checkRun(4, "lint", shaB, "completed", "success", t0), // another commit
		checkRun(5, "deploy", shaA, "completed", "action_required", t0),
		checkRun(6, "e2e", shaA, "completed", "startup_failure", t0),
		checkRun(7, "flaky", shaA, "completed", "cancelled", t0),
		checkRun(8, "docs", shaA, "completed", "skipped", t0),
	}
	e.fake.statuses = []map[string]any{
		commitStatus(11, "jenkins", shaA, "failure", "red", t0),
		commitStatus(12, "jenkins", shaA, "success", "green", t0.Add(time.Hour)),
		commitStatus(13, "gitlab", shaA, "error", "runner died", t0),
		commitStatus(14, "build", shaA, "failure", "a status of a check run's name", t0.Add(time.Hour)),
	}
	checks, err := e.f.Checks(bg, ghRepo, shaA)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workitems.CheckState{}
	for _, c := range checks {
		if c.SHA != shaA || c.URL == "" || c.Summary == "" {
			t.Errorf("check %+v lacks its SHA, URL or summary", c)
		}
		got[c.Name] = c.State
	}
	want := map[string]workitems.CheckState{"build": workitems.CheckSuccess, "test": workitems.CheckPending, "deploy": workitems.CheckActionRequired,
		"e2e": workitems.CheckInfraError, "flaky": workitems.CheckCancelled, "docs": workitems.CheckNeutral, "jenkins": workitems.CheckSuccess, "gitlab": workitems.CheckInfraError}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("states\n got %v\nwant %v", got, want)
	}
	rerun, err := e.f.RerunChecks(bg, ghRepo, shaA, []string{"e2e", "flaky", "gitlab"})
	if err != nil || !slices.Equal(rerun, []string{"e2e", "flaky"}) || !slices.Equal(e.fake.reruns, []string{"6", "7"}) {
		t.Fatalf("re-ran %v (ids %v), %v: statuses cannot be re-run", rerun, e.fake.reruns, err)
	}
}

func TestGitHubRateLimitsAreWaitedOutOrReturnedWithTheirReset(t *testing.T) {
	t.Parallel()
	t.Run("ShortLimitsAreWaitedOut", func(t *testing.T) {
		t.Parallel()
		e := newGHEnv(t, nil)
		e.fake.faults = []string{"secondary", "primary", "secondary-429"}
		if _, err := e.f.Repository(bg, ghRepo); err != nil {
			t.Fatalf("after three waits: %v", err)
		}
		// A 429 without GitHub's headers, with Retry-After.
		e.fake.faults = []string{"429"}
		if _, err := e.f.Repository(bg, ghRepo); err != nil {
			t.Fatal(err)
		}
		if w := e.clock.Waits(); len(w) != 4 {
			t.Fatalf("waits %v, want one per limit", w)
		}
		if len(e.fake.requests) != 6 {
			t.Fatalf("%d requests, want 6: %v", len(e.fake.requests), e.fake.requests)
		}
		if !strings.Contains(e.logs.String(), "rate limited, waiting") {
			t.Fatalf("no log line for the waits:\n%s", e.logs)
		}
	})
	t.Run("ALimitPastMaxRateWaitIsTransientWithItsReset", func(t *testing.T) {
		t.Parallel()
		e := newGHEnv(t, nil)
		f, _ := New(Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
			BaseURL: e.fake.api.URL, TokenEnv: "T"}, Getenv: func(string) string { return ghToken }, Clock: e.clock,
			MaxRateWait: time.Nanosecond})
		e.fake.faults = []string{"primary"}
		_, err := f.Repository(bg, ghRepo)
		fe := wantErr(t, err, workitems.ClassTransient, ErrRateLimited)
		if fe.RetryAt.IsZero() || fe.StatusCode != http.StatusForbidden || len(e.clock.Waits()) != 0 {
			t.Fatalf("%+v, waits %v", fe, e.clock.Waits())
		}
		e.fake.faults = []string{"secondary", "secondary", "secondary", "secondary"}
		_, err = e.f.Repository(bg, ghRepo) // four in a row: it stops after three waits
		wantErr(t, err, workitems.ClassTransient, ErrRateLimited)
	})
}

func TestGitHubErrorsAreClassified(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	for _, c := range []struct {
		fault    string
		class    workitems.ErrorClass
		sentinel error
	}{
		{"500", workitems.ClassTransient, nil},
		{"401", workitems.ClassPermission, ErrAuth},
		{"404", workitems.ClassNotFound, ErrNotFound},
	} {
		e.fake.faults = []string{c.fault}
		_, err := e.f.Repository(bg, ghRepo)
		fe := wantErr(t, err, c.class, c.sentinel)
		if !strings.Contains(fe.Error(), "forge github: get repository acme/payments") {
			t.Fatalf("error text %q", fe)
		}
	}
	_, err := e.f.Repository(bg, "acme/elsewhere")
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
	_, err = e.f.Merge(bg, ghRepo, 1, MergeRequest{Method: workitems.MergeMerge})
	wantErr(t, err, workitems.ClassInvalidInput, nil)
	auth, _ := NewGitAuth(e.fake.cloneURL(), "wrong-token")
	err = Push(bg, PushRequest{Dir: e.dir, URL: e.fake.cloneURL(), SHA: e.base, Branch: "main", Auth: auth})
	fe := wantErr(t, err, workitems.ClassPermission, ErrAuth)
	noSecret(t, "the push error", fe.Error(), "wrong-token")
}

func TestGitHubWithoutATokenReadsAnonymouslyAndRefusesWrites(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, func(string) string { return "" })
	if _, err := e.f.Repository(bg, ghRepo); err != nil {
		t.Fatal(err)
	}
	if e.fake.auth[0] != "" {
		t.Fatalf("anonymous read sent %q", e.fake.auth[0])
	}
	if !strings.Contains(e.logs.String(), "env=GH_BOT_TOKEN") {
		t.Fatalf("the warning names the variable:\n%s", e.logs)
	}
	n := len(e.fake.requests)
	_, err := e.f.CreatePullRequest(bg, ghRepo, NewPullRequest{Title: "t", Base: "main", Head: "x"})
	fe := wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
	if len(e.fake.requests) != n || !strings.Contains(fe.Error(), "$GH_BOT_TOKEN is not set") {
		t.Fatalf("a write went out without a token (%d requests) or the error does not say why: %v", len(e.fake.requests)-n, fe)
	}
	wantErr(t, e.f.Comment(bg, ghRepo, 1, "x"), workitems.ClassInvalidInput, ErrMissingToken)
	_, err = e.f.GitAuth(e.fake.cloneURL())
	wantErr(t, err, workitems.ClassInvalidInput, ErrMissingToken)
}

func TestGitAuthEnvScopesTheHeaderAndKeepsExistingConfig(t *testing.T) {
	t.Parallel()
	a, err := NewGitAuth("https://gitea.example.com:3000/acme/pay.git", "tok")
	if err != nil {
		t.Fatal(err)
	}
	env := a.Env([]string{"PATH=/bin", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.autocrlf", "GIT_CONFIG_VALUE_0=false"})
	want := []string{"PATH=/bin", "GIT_CONFIG_KEY_0=core.autocrlf", "GIT_CONFIG_VALUE_0=false",
		"GIT_CONFIG_KEY_1=credential.helper", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=http.https://gitea.example.com:3000/.extraHeader",
		"GIT_CONFIG_VALUE_2=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:tok")),
		"GIT_CONFIG_COUNT=3", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS="}
	if !slices.Equal(env, want) {
		t.Fatalf("env\n got %q\nwant %q", env, want)
	}
	if a.Scope() != "https://gitea.example.com:3000/" || strings.Contains(fmt.Sprintf("%v %+v %#v %s", a, a, a, a), "eC1hY2Nlc3") {
		t.Fatalf("formatting shows the secret: %v", a)
	}
	if _, err := NewGitAuth("https://u:p@h/a/b", "tok"); err == nil || strings.Contains(err.Error(), ":p@") {
		t.Fatalf("credentials in the URL: %v", err)
	}
	if _, err := NewGitAuth("https://h/a/b", ""); err == nil {
		t.Fatal("an empty token gives no auth")
	}
}
