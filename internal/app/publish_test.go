package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/fakeclock"
	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The delivery flow end to end on a real Gitea: a script loop's fix is pushed, a pull request
// opened, a small CI in the test runs on exactly the pushed commit and posts commit statuses,
// the verifier reads them, and automerge lands the fix on the base branch.

const (
	tokenVar  = "OL_TEST_GITEA_TOKEN"
	secretVar = "OL_TEST_GITEA_HOOK_SECRET"
	// hookSecret signs the Gitea's webhook deliveries (forge tea's webhook_secret_env).
	hookSecret = "hook-s3cret-for-the-tests"
)

// forgeRepo creates a public repository on the shared Gitea holding the sample module (fixed
// or broken) on main. Public: workspaces fetch the template's repo: without credentials.
func forgeRepo(t *testing.T, gs *giteatest.Server, prefix string, fixed bool) giteatest.Repo {
	t.Helper()
	r := gs.NewRepo(t, prefix)
	gs.API(t, http.MethodPatch, "/repos/"+r.Slug, map[string]any{"private": false}, http.StatusOK, nil)
	dir := t.TempDir()
	if err := sample.Write(dir); err != nil {
		t.Fatal(err)
	}
	if fixed {
		if err := sample.Fix(dir); err != nil {
			t.Fatal(err)
		}
	}
	gs.Git(t, dir, "init", "-q", "-b", "main")
	gs.Git(t, dir, "add", "-A")
	gs.Git(t, dir, "commit", "-qm", "the sample module")
	gs.PushDir(t, dir, r, "main")
	return r
}

// fastWaits polls waiting items soon and often, so a test whose CI or review is found by the
// poller stays quick.
const fastWaits = "waits: {first_poll: 1s, poll_every: 200ms}"

// forgeConfig is a config with the Gitea as forge "tea", fastWaits and the given templates.
func forgeConfig(t *testing.T, gs *giteatest.Server, templates string) *config.Config {
	t.Helper()
	return forgeConfigWith(t, gs, fastWaits, templates)
}

// forgeConfigWith is forgeConfig with top (top-level YAML: waits:, the forge's
// webhook_secret_env through forgeExtra…) instead of fastWaits.
func forgeConfigWith(t *testing.T, gs *giteatest.Server, top, templates string) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`
defaults:
  max_attempts: 3
  budget: {wall_time: 3m, verify_reserve: 2m}
forges:
  tea: {kind: gitea, base_url: %q, token_env: %s, webhook_secret_env: %s}
%s
templates:
%s`, gs.URL, tokenVar, secretVar, top, templates)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openForge opens the system with the Gitea's token (and the webhook secret, hookSecret) in
// its environment and runs its poller of waiting items until the test ends.
func openForge(t *testing.T, gs *giteatest.Server, cfg *config.Config, logs *testlog.Buffer) *sys {
	t.Helper()
	token := gs.Getenv(tokenVar)
	s := openWith(t, cfg, func(o *app.Options) {
		o.Getenv = func(k string) string {
			if k == secretVar {
				return hookSecret
			}
			return token(k)
		}
		if logs != nil {
			o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, testLogWriter()), &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	})
	stop := s.RunPoller(context.Background())
	t.Cleanup(stop)
	return s
}

func testLogWriter() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// tinyCI is a CI server in miniature: whenever branch of repo points at a commit it has not
// tested, it checks out exactly that commit, runs script there and posts the commit status
// "test" (success or failure, the output's last line as description).
type tinyCI struct {
	mu     sync.Mutex
	tested []string // SHAs, in order
}

func (c *tinyCI) shas() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.tested...)
}

func startCI(t *testing.T, gs *giteatest.Server, r giteatest.Repo, branch, script string) *tinyCI {
	t.Helper()
	ci := &tinyCI{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		seen := map[string]bool{}
		tick := time.NewTicker(100 * time.Millisecond) // a CI polls its forge; Gitea's webhooks refuse loopback
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			code, body, err := gs.Do(ctx, http.MethodGet, "/repos/"+r.Slug+"/branches/"+branch, nil)
			var b struct {
				Commit struct{ ID string } `json:"commit"`
			}
			if err != nil || code != http.StatusOK || json.Unmarshal(body, &b) != nil || b.Commit.ID == "" || seen[b.Commit.ID] {
				continue
			}
			sha := b.Commit.ID
			seen[sha] = true
			dir, err := os.MkdirTemp("", "tinyci-")
			if err != nil {
				t.Error(err)
				return
			}
			run := func(name string, args ...string) (string, error) {
				cmd := exec.CommandContext(ctx, name, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
				out, err := cmd.CombinedOutput()
				return strings.TrimSpace(string(out)), err
			}
			state, desc := "success", "ok"
			if _, err := run("git", "init", "-q"); err != nil {
				state, desc = "error", "git init: "+err.Error()
			} else if out, err := run("git", "fetch", "-q", r.CloneURL, sha); err != nil {
				state, desc = "error", "fetch: "+out
			} else if _, err := run("git", "checkout", "-q", sha); err != nil {
				state, desc = "error", "checkout failed"
			} else if out, err := run("sh", "-c", script); err != nil {
				lines := strings.Split(out, "\n")
				state, desc = "failure", lines[len(lines)-1]
			}
			_ = os.RemoveAll(dir)
			if ctx.Err() != nil {
				return
			}
			ci.mu.Lock()
			ci.tested = append(ci.tested, sha)
			ci.mu.Unlock()
			if code, body, err := gs.Do(ctx, http.MethodPost, "/repos/"+r.Slug+"/statuses/"+sha,
				map[string]string{"context": "test", "state": state, "description": desc, "target_url": gs.URL + "/ci/" + sha}); err != nil || code != http.StatusCreated {
				t.Errorf("tinyci: posting the status: %d %s %v", code, body, err)
			}
		}
	}()
	return ci
}

func rawFile(t *testing.T, gs *giteatest.Server, r giteatest.Repo, ref, path string) string {
	t.Helper()
	code, body, err := gs.Do(context.Background(), http.MethodGet, "/repos/"+r.Slug+"/raw/"+path+"?ref="+ref, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("raw %s@%s: %d %v", path, ref, code, err)
	}
	return string(body)
}

type giteaPR struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Merged bool   `json:"merged"`
	Head   struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

func pulls(t *testing.T, gs *giteatest.Server, r giteatest.Repo) []giteaPR {
	t.Helper()
	var prs []giteaPR
	gs.API(t, http.MethodGet, "/repos/"+r.Slug+"/pulls?state=all", nil, http.StatusOK, &prs)
	return prs
}

func labelNames(pr giteaPR) []string {
	var out []string
	for _, l := range pr.Labels {
		out = append(out, l.Name)
	}
	return out
}

func TestACronTickFixIsPushedCheckedByCIOnThePushedCommitAndMerged(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "cron", false)
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: fix
    schedule: "*/10 * * * *"
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check:
      commands: ["go test -json ./..."]
      ci: {forge: tea, required: [test], wait: 2m}
    deliver: {forge: tea, repo: %s, labels: [outerloop], automerge: true, merge_method: merge}
`, r.CloneURL, sample.FixCommand, r.Slug))
	logs := &testlog.Buffer{}
	s := openForge(t, gs, cfg, logs)
	ci := startCI(t, gs, r, "outerloop/fix", "go test ./...")

	clock := fakeclock.New(time.Date(2026, 11, 29, 3, 5, 0, 0, time.UTC))
	ticks := make(chan scheduler.TickResult, 10)
	sched, err := scheduler.New(s.Queue, scheduler.Options{Clock: clock, OnTick: func(r scheduler.TickResult) { ticks <- r }})
	if err != nil {
		t.Fatal(err)
	}
	sched.Start(context.Background())
	t.Cleanup(sched.Shutdown)
	s.startWorker(t, "forge-1")
	clock.BlockUntil(1, nil)
	clock.Advance(5 * time.Minute)
	tick := <-ticks
	for tick.Outcome == "misfire_dropped" {
		tick = <-ticks
	}
	if tick.Outcome != "created" {
		t.Fatalf("tick %+v", tick)
	}
	it := awaitState(t, s.Store, tick.Item, workitems.StateClosed, workitems.StateEscalated)
	d := it.Delivery
	if it.State != workitems.StateClosed || d == nil || d.Outcome != workitems.DeliveryMerged {
		t.Fatalf("want closed and merged: %s %+v %+v", it.State, d, it.Decisions)
	}
	if d.Branch != "outerloop/fix" || d.PushedSHA != d.Commit || d.PR == nil || d.PR.State != workitems.PRMerged || d.MergeCommit == "" ||
		d.Forge != "tea" || d.Repo != r.Slug {
		t.Fatalf("delivery %+v", d)
	}
	if got := ci.shas(); len(got) != 1 || got[0] != d.PushedSHA {
		t.Fatalf("CI must have run on exactly the pushed commit %s: %v", d.PushedSHA, got)
	}
	if len(d.Checks) != 1 || d.Checks[0].Name != "test" || d.Checks[0].State != workitems.CheckSuccess || !strings.Contains(d.Checks[0].URL, d.PushedSHA) {
		t.Fatalf("checks %+v", d.Checks)
	}
	// The base branch holds the fix, as the merge commit.
	if got := rawFile(t, gs, r, "main", "calc.go"); !strings.Contains(got, "a + b") {
		t.Fatalf("main after the merge:\n%s", got)
	}
	if head := gs.Git(t, t.TempDir(), "ls-remote", r.CloneURL, "refs/heads/main"); !strings.HasPrefix(head, d.MergeCommit) {
		t.Fatalf("main is %s, the merge commit %s", head, d.MergeCommit)
	}
	prs := pulls(t, gs, r)
	if len(prs) != 1 || !prs[0].Merged || prs[0].Head.SHA != d.PushedSHA || fmt.Sprint(labelNames(prs[0])) != "[outerloop]" {
		t.Fatalf("pull requests %+v", prs)
	}
	// Pushed and recorded, the item waited for CI holding no worker; the poller (no webhook is
	// configured here) found the status and the wake merged, then deleted the branch.
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed publish pushed pr_opened recorded ci merged branch_deleted]" {
		t.Fatalf("delivery events %s", steps)
	}
	if w := waitsOf(t, s, it.ID); w != "[waiting:ci woken:poll]" {
		t.Fatalf("waits %s", w)
	}
	assertNoToken(t, gs, s, logs, it.ID)
}

// assertNoToken searches the logs, the item's events, every Redis key and value of the
// deployment, the metrics and the remote URLs git recorded in the work dir for the token.
func assertNoToken(t *testing.T, gs *giteatest.Server, s *sys, logs *testlog.Buffer, ids ...string) {
	t.Helper()
	ctx := context.Background()
	tok := gs.Token()
	if len(tok) < 16 {
		t.Fatalf("the token is too short to search for: %d", len(tok))
	}
	if strings.Contains(logs.String(), tok) {
		t.Error("the token is in the logs")
	}
	if !strings.Contains(logs.String(), "verify decision") {
		t.Error("the logs were not collected (no verify decision line)")
	}
	for _, id := range ids {
		evs, err := s.Store.Events(ctx, id, "", 5000, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(evs)
		if len(evs) == 0 || strings.Contains(string(b), tok) {
			t.Errorf("events of %s: %d, token found: %v", id, len(evs), strings.Contains(string(b), tok))
		}
	}
	keys, err := s.Redis.Keys(ctx, s.env.Prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("redis keys: %v %d", err, len(keys))
	}
	for _, k := range keys {
		if strings.Contains(k, tok) {
			t.Errorf("redis key %s holds the token", k)
		}
		var v string
		switch s.Redis.Type(ctx, k).Val() {
		case "string":
			v = s.Redis.Get(ctx, k).Val()
		case "hash":
			v = fmt.Sprint(s.Redis.HGetAll(ctx, k).Val())
		case "list":
			v = fmt.Sprint(s.Redis.LRange(ctx, k, 0, -1).Val())
		case "set":
			v = fmt.Sprint(s.Redis.SMembers(ctx, k).Val())
		case "zset":
			v = fmt.Sprint(s.Redis.ZRange(ctx, k, 0, -1).Val())
		case "stream":
			v = fmt.Sprint(s.Redis.XRange(ctx, k, "-", "+").Val())
		}
		if strings.Contains(v, tok) {
			t.Errorf("redis key %s: its value holds the token", k)
		}
	}
	rec := httptest.NewRecorder()
	s.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), tok) {
		t.Errorf("metrics: %d, token found: %v", rec.Code, strings.Contains(rec.Body.String(), tok))
	}
	// Every git config under the work dir (mirrors, workspaces): no credential in a remote URL.
	_ = filepath.WalkDir(s.Workdir, func(p string, de os.DirEntry, err error) error {
		if err == nil && !de.IsDir() && de.Name() == "config" {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
}

// CI red on the first pushed commit: the item is retried with the failing check's name and
// summary in its input, the second attempt pushes a new commit to the same branch, the same
// pull request updates, CI is green on that commit and it is merged.
func TestCIRedOnThePushedCommitRetriesOnTheSamePullRequestUntilGreen(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "cired", false)
	// The fix is badly formatted until the input says gofmt (which only CI checks).
	script := `sed -i 's/a - b/a  +  b/' calc.go; if echo "$OUTERLOOP_INPUT" | grep -q gofmt; then gofmt -w calc.go; fi`
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: fmt
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check:
      commands: ["go test -json ./..."]
      ci: {forge: tea, required: [test], wait: 2m}
    deliver: {forge: tea, repo: %s, automerge: true, merge_method: squash}
`, r.CloneURL, script, r.Slug))
	s := openForge(t, gs, cfg, nil)
	ci := startCI(t, gs, r, "outerloop/fmt", `test -z "$(gofmt -l .)" || { echo "gofmt: not formatted: $(gofmt -l .)"; exit 1; }; go test ./...`)
	s.startWorker(t, "forge-red")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "fmt"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed || len(it.Attempts) != 2 {
		t.Fatalf("want closed after 2 attempts: %s %d %+v", it.State, len(it.Attempts), it.Decisions)
	}
	first, second := it.Attempts[0].Delivery, it.Attempts[1].Delivery
	if first == nil || first.Outcome != workitems.DeliveryPROpened || len(first.Checks) != 1 || first.Checks[0].State != workitems.CheckFailure {
		t.Fatalf("attempt 1: %+v", first)
	}
	if d := it.Attempts[0].Decision; d.Outcome != workitems.OutcomeRetry || d.Rule != "ci_failed" {
		t.Fatalf("attempt 1 decision %+v", d)
	}
	in := it.Attempts[1].Condition.Input
	if !strings.Contains(in, "Failing CI checks: test") || !strings.Contains(in, "gofmt: not formatted: calc.go") {
		t.Fatalf("the retry's input must carry the failing check and its summary: %q", in)
	}
	if second == nil || second.Outcome != workitems.DeliveryMerged || second.PR.Number != first.PR.Number || second.PushedSHA == first.PushedSHA ||
		second.Branch != first.Branch {
		t.Fatalf("attempt 2 must update the same pull request with a new commit: %+v vs %+v", second, first)
	}
	if got := ci.shas(); len(got) != 2 || got[0] != first.PushedSHA || got[1] != second.PushedSHA {
		t.Fatalf("CI ran on %v, pushed %s then %s", got, first.PushedSHA, second.PushedSHA)
	}
	if prs := pulls(t, gs, r); len(prs) != 1 || !prs[0].Merged {
		t.Fatalf("one pull request, merged: %+v", prs)
	}
	if got := rawFile(t, gs, r, "main", "calc.go"); !strings.Contains(got, "return a + b") {
		t.Fatalf("main after the merge:\n%s", got)
	}
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 2)); steps != "[committed publish pushed pr_updated recorded ci merged branch_deleted]" {
		t.Fatalf("attempt 2 delivery events %s", steps)
	}
	// Each attempt waited for CI on its own commit and was woken by the poller.
	if w := waitsOf(t, s, it.ID); w != "[waiting:ci woken:poll waiting:ci woken:poll]" {
		t.Fatalf("waits %s", w)
	}
}

// Ticks of one template: the first opens a pull request; a second with the same result finds
// it and closes unchanged linking it; after a person closes it unmerged, a third with the same
// result opens no new one (declined). A template with nothing to change opens none.
func TestTicksWithTheSameResultShareOnePullRequestAndADeclinedOneIsNotReopened(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "ticks", false)
	done := forgeRepo(t, gs, "nothing", true)
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: bump
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %s, labels: [outerloop, deps]}
  - name: idle
    repo: %s
    goal: nothing to do
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %s}
`, r.CloneURL, sample.FixCommand, r.Slug, done.CloneURL, done.Slug))
	logs := &testlog.Buffer{}
	s := openForge(t, gs, cfg, logs)
	s.startWorker(t, "forge-ticks")
	ctx := context.Background()
	run := func(tmpl string) *workitems.Item {
		t.Helper()
		it, err := s.Queue.Submit(ctx, scheduler.Request{Template: tmpl})
		if err != nil {
			t.Fatal(err)
		}
		return awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	}
	one := run("bump")
	if one.State != workitems.StateClosed || one.Delivery.Outcome != workitems.DeliveryPROpened || one.Delivery.PR.State != workitems.PROpen {
		t.Fatalf("first tick: %s %+v", one.State, one.Delivery)
	}
	prs := pulls(t, gs, r)
	if len(prs) != 1 || prs[0].State != "open" || fmt.Sprint(labelNames(prs[0])) != "[deps outerloop]" {
		t.Fatalf("pull requests %+v", prs)
	}

	two := run("bump")
	d := two.Delivery
	last := two.Decisions[len(two.Decisions)-1]
	if two.State != workitems.StateClosed || d.Outcome != workitems.DeliveryUnchanged || d.PR.Number != prs[0].Number ||
		d.SameAs == nil || d.SameAs.Item != one.ID || last.Rule != workitems.RuleAlreadyDelivered || d.PushedSHA != "" {
		t.Fatalf("second tick must close unchanged linking the open PR: %s %+v %+v", two.State, d, last)
	}
	if got := pulls(t, gs, r); len(got) != 1 || got[0].Head.SHA != prs[0].Head.SHA {
		t.Fatalf("nothing pushed, no new pull request: %+v", got)
	}
	if steps := fmt.Sprint(deliverySteps(t, s.Store, two.ID, 1)); steps != "[committed publish dedupe recorded]" {
		t.Fatalf("delivery events %s", steps)
	}

	gs.ClosePullRequest(t, r, prs[0].Number)
	three := run("bump")
	d = three.Delivery
	last = three.Decisions[len(three.Decisions)-1]
	if three.State != workitems.StateClosed || d.Outcome != workitems.DeliveryDeclined || last.Rule != workitems.RuleDeclined ||
		d.PR.Number != prs[0].Number || d.PR.State != workitems.PRClosed || !strings.Contains(last.Reasons[0], "declined") {
		t.Fatalf("third tick after the person closed the PR: %s %+v %+v", three.State, d, last)
	}
	if got := pulls(t, gs, r); len(got) != 1 || got[0].State != "closed" {
		t.Fatalf("no new pull request for a declined tree: %+v", got)
	}

	idle := run("idle")
	if idle.State != workitems.StateClosed || idle.Delivery.Outcome != workitems.DeliveryUnchanged || idle.Decisions[0].Rule != workitems.RuleNoChange {
		t.Fatalf("nothing to change: %s %+v", idle.State, idle.Delivery)
	}
	if got := pulls(t, gs, done); len(got) != 0 {
		t.Fatalf("nothing to change must open no pull request: %+v", got)
	}
	if out := gs.Git(t, t.TempDir(), "ls-remote", done.CloneURL, "refs/heads/outerloop/idle"); out != "" {
		t.Fatalf("nothing to change must push nothing: %s", out)
	}
	assertNoToken(t, gs, s, logs, one.ID, two.ID, three.ID, idle.ID)
}

// Bad input at delivery: each is an event and an escalation at once, the commit and patch kept.
func TestForgeDeliveryBadInputEscalatesAtOnce(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	for _, tc := range []struct {
		name, prefix string
		getenv       func(string) string
		prepare      func(t *testing.T, r giteatest.Repo)
		class        workitems.ErrorClass
		cause        string
	}{
		{name: "missing token variable", prefix: "notoken", getenv: func(string) string { return "" },
			class: workitems.ClassInvalidInput, cause: "$" + tokenVar + " is not set"},
		{name: "protected branch", prefix: "protected", getenv: gs.Getenv(tokenVar),
			prepare: func(t *testing.T, r giteatest.Repo) { gs.ProtectBranch(t, r, "outerloop/bad") },
			class:   workitems.ClassPermission, cause: "protected branch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := forgeRepo(t, gs, tc.prefix, false)
			if tc.prepare != nil {
				tc.prepare(t, r)
			}
			cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: bad
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %s}
`, r.CloneURL, sample.FixCommand, r.Slug))
			s := openWith(t, cfg, func(o *app.Options) { o.Getenv = tc.getenv })
			s.startWorker(t, "bad-"+tc.prefix)
			it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "bad"})
			if err != nil {
				t.Fatal(err)
			}
			it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
			d := it.Delivery
			if it.State != workitems.StateEscalated || len(it.Attempts) != 1 || it.Escalation.Reason != string(workitems.RuleDeliveryFailed) ||
				d.Outcome != workitems.DeliveryFailed || d.ErrorClass != tc.class || !strings.Contains(d.Error, tc.cause) {
				t.Fatalf("want escalated at once (%s, %q): %s %+v %+v", tc.class, tc.cause, it.State, it.Escalation, d)
			}
			if p, err := s.Store.Patch(context.Background(), it.ID, 1); err != nil || !strings.Contains(string(p), "a + b") {
				t.Fatalf("the undelivered patch is kept: %v", err)
			}
			if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed publish failed recorded]" {
				t.Fatalf("delivery events %s", steps)
			}
			if got := pulls(t, gs, r); len(got) != 0 {
				t.Fatalf("no pull request: %+v", got)
			}
		})
	}
}

// The base branch moves while the attempt runs (the loop waits on a pipe until the test has
// pushed to main): a change that still applies is re-made on the new base and merged; one that
// conflicts is retried from the new base (rule base_moved) and then merged.
func TestABaseThatMovedDuringTheAttemptIsRebasedOrRetried(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	for _, tc := range []struct {
		name, file, content string
		attempts            int
	}{
		{name: "clean: re-made on the new base", file: "NOTES.md", content: "notes\n", attempts: 1},
		{name: "conflict: retried from the new base", file: "calc.go",
			content: "package calc\n\n// Add returns a+b (it is still broken).\nfunc Add(a, b int) int { return a - b }\n", attempts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := forgeRepo(t, gs, "moved", false)
			fifo := filepath.Join(t.TempDir(), "go")
			if err := exec.Command("mkfifo", fifo).Run(); err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf(`if [ -z "$OUTERLOOP_INPUT" ]; then cat %s >/dev/null; fi; sed -i 's/a - b/a + b/' calc.go; sed -i 's/a+b/a and b/' calc.go`, fifo)
			cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: moved
    repo: %s
    goal: make TestAdd pass
    sandbox: {mode: off}   # the step waits on a FIFO outside its workspace
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %s, automerge: true, merge_method: merge}
`, r.CloneURL, script, r.Slug))
			s := openForge(t, gs, cfg, nil)
			s.startWorker(t, "moved")
			it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "moved"})
			if err != nil {
				t.Fatal(err)
			}
			awaitState(t, s.Store, it.ID, workitems.StateRunning)
			// Someone lands a commit on main while the loop runs.
			dir := t.TempDir()
			gs.Git(t, dir, "clone", "-q", r.CloneURL, ".")
			if err := os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			gs.Git(t, dir, "add", "-A")
			gs.Git(t, dir, "commit", "-qm", "meanwhile on main")
			moved := gs.Git(t, dir, "rev-parse", "HEAD")
			gs.PushDir(t, dir, r, "main")
			if err := os.WriteFile(fifo, []byte("go\n"), 0o644); err != nil { // blocks until the loop reads
				t.Fatal(err)
			}
			it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
			d := it.Delivery
			if it.State != workitems.StateClosed || len(it.Attempts) != tc.attempts || d.Outcome != workitems.DeliveryMerged || d.Base != moved {
				t.Fatalf("want merged on the moved base %s after %d attempts: %s %d %+v %+v", moved, tc.attempts, it.State, len(it.Attempts), d, it.Decisions)
			}
			if parent := gs.Git(t, dir, "fetch", "-q", r.CloneURL, "main"); parent != "" {
				t.Fatal(parent)
			}
			if got := gs.Git(t, dir, "rev-parse", d.PushedSHA+"^"); got != moved {
				t.Fatalf("the pushed commit's parent is %s, want the moved base %s", got, moved)
			}
			if got := rawFile(t, gs, r, "main", "calc.go"); !strings.Contains(got, "return a + b") || !strings.Contains(got, "a and b") {
				t.Fatalf("main after the merge:\n%s", got)
			}
			first := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1))
			if tc.attempts == 1 && first != "[committed publish base_moved pushed pr_opened merged branch_deleted recorded]" {
				t.Fatalf("delivery events %s", first)
			}
			if tc.attempts == 2 {
				// Nothing was pushed; the retry is told to the publisher (the branch is known)
				// before it is recorded.
				if dec := it.Attempts[0].Decision; dec.Outcome != workitems.OutcomeRetry || dec.Rule != workitems.RuleBaseMoved ||
					!strings.Contains(dec.Summary, "conflicts: calc.go") || first != "[committed publish base_moved recorded]" {
					t.Fatalf("attempt 1: %+v, events %s", dec, first)
				}
				if in := it.Attempts[1].Condition.Input; !strings.Contains(in, "The base branch moved") || !strings.Contains(in, "calc.go") {
					t.Fatalf("attempt 2 input %q", in)
				}
			}
		})
	}
}

// CI that never reports on the pushed commit escalates the item, and its pull request is
// labelled outerloop:needs-human with a comment giving the reason.
func TestMissingCIOnThePushedCommitEscalatesAndLabelsThePullRequest(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "noci", false)
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: noci
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check:
      commands: ["go test -json ./..."]
      ci: {forge: tea, required: [test], wait: 0s}
    deliver: {forge: tea, repo: %s, automerge: true}
`, r.CloneURL, sample.FixCommand, r.Slug))
	s := openForge(t, gs, cfg, nil)
	s.startWorker(t, "noci")
	it, err := s.Queue.Submit(context.Background(), scheduler.Request{Template: "noci"})
	if err != nil {
		t.Fatal(err)
	}
	it = awaitState(t, s.Store, it.ID, workitems.StateClosed, workitems.StateEscalated)
	d := it.Delivery
	if it.State != workitems.StateEscalated || it.Escalation.Reason != "ci_missing" || d.Outcome != workitems.DeliveryPROpened ||
		d.MergeCommit != "" || len(d.Checks) != 1 || d.Checks[0].State != workitems.CheckPending {
		t.Fatalf("want escalated (ci_missing) with the PR open and unmerged: %s %+v %+v\n%v", it.State, it.Escalation, d, trail(t, s, it.ID))
	}
	prs := pulls(t, gs, r)
	if len(prs) != 1 || prs[0].State != "open" || fmt.Sprint(labelNames(prs[0])) != "["+workitems.LabelNeedsHuman+"]" {
		t.Fatalf("pull requests %+v", prs)
	}
	var comments []struct {
		Body string `json:"body"`
	}
	gs.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/comments", r.Slug, prs[0].Number), nil, http.StatusOK, &comments)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "ci_missing") || !strings.Contains(comments[0].Body, "test") {
		t.Fatalf("comments %+v", comments)
	}
	// It waited (ci.wait 0s still reads CI once, at the first poll), the deadline woke it, and
	// the escalation was told to the pull request (label and comment: followup).
	if steps := fmt.Sprint(deliverySteps(t, s.Store, it.ID, 1)); steps != "[committed publish pushed pr_opened recorded ci followup]" {
		t.Fatalf("delivery events %s", steps)
	}
	if w := waitsOf(t, s, it.ID); w != "[waiting:ci woken:deadline]" {
		t.Fatalf("waits %s", w)
	}
}
