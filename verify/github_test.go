package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/forge"
	"outerloop/lib/fakeclock"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

const shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// fakeGitHub speaks the REST shapes of check runs and commit statuses, with Link pagination,
// an optional primary rate limit on the first request, and re-request recording.
type fakeGitHub struct {
	mu          sync.Mutex
	runs        []map[string]any
	statuses    []map[string]any
	rateLimited int // requests still to answer with a primary rate limit
	secondary   int // requests still to answer with a secondary rate limit
	rerequested []string
	requests    int
	auth        []string
}

func (f *fakeGitHub) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	page := func(r *http.Request, items []map[string]any, per int) ([]map[string]any, int) {
		p, _ := strconv.Atoi(r.URL.Query().Get("page"))
		p = max(p, 1)
		lo, hi := (p-1)*per, min(p*per, len(items))
		if lo >= len(items) {
			return nil, 0
		}
		next := 0
		if hi < len(items) {
			next = p + 1
		}
		return items[lo:hi], next
	}
	link := func(w http.ResponseWriter, r *http.Request, next int) {
		if next > 0 {
			u := *r.URL
			q := u.Query()
			q.Set("page", strconv.Itoa(next))
			u.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, u.String()))
		}
	}
	limited := func(w http.ResponseWriter, r *http.Request) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests++
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		if f.secondary > 0 {
			f.secondary--
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`))
			return true
		}
		if f.rateLimited == 0 {
			return false
		}
		f.rateLimited--
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "0")
		// A reset already past in real time, so go-github's own pre-check lets the retry through.
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}`))
		return true
	}
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", func(w http.ResponseWriter, r *http.Request) {
		if limited(w, r) {
			return
		}
		if r.URL.Query().Get("filter") != "all" {
			t.Errorf("check runs listed without filter=all: %s", r.URL)
		}
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		per = min(max(per, 1), 2) // small pages, so pagination is exercised
		items, next := page(r, f.runs, per)
		link(w, r, next)
		_ = json.NewEncoder(w).Encode(map[string]any{"total_count": len(f.runs), "check_runs": items})
	})
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/statuses", func(w http.ResponseWriter, r *http.Request) {
		if limited(w, r) {
			return
		}
		items, next := page(r, f.statuses, 1)
		link(w, r, next)
		_ = json.NewEncoder(w).Encode(items)
	})
	mux.HandleFunc("POST /repos/{owner}/{repo}/check-runs/{id}/rerequest", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.rerequested = append(f.rerequested, r.PathValue("id"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	return mux
}

func run(id int, name, sha, status, conclusion string, started time.Time) map[string]any {
	m := map[string]any{"id": id, "name": name, "head_sha": sha, "status": status,
		"started_at": started.Format(time.RFC3339), "html_url": fmt.Sprintf("https://ci/runs/%d", id),
		"output": map[string]any{"title": name + " " + conclusion}}
	if conclusion != "" {
		m["conclusion"] = conclusion
	}
	return m
}

// sleepRecorder is a workitems.Clock whose waits return at once and are recorded.
type sleepRecorder struct {
	mu    sync.Mutex
	slept *[]time.Duration
}

func (c *sleepRecorder) Now() time.Time { return time.Now() }

func (c *sleepRecorder) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	*c.slept = append(*c.slept, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// newFakeGitHubSource is the CI source the app builds for a github forge, pointed at the fake.
func newFakeGitHubSource(t *testing.T, f *fakeGitHub, slept *[]time.Duration, maxRateWait time.Duration) (*ForgeCI, *bytes.Buffer) {
	t.Helper()
	srv := httptest.NewServer(f.handler(t))
	t.Cleanup(srv.Close)
	env := func(k string) string {
		if k == "OL_TEST_GH_TOKEN" {
			return "s3cr3t-token"
		}
		return ""
	}
	var logs bytes.Buffer
	g, err := forge.New(forge.Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
		BaseURL: srv.URL, TokenEnv: "OL_TEST_GH_TOKEN"}, Getenv: env, HTTPClient: srv.Client(),
		Clock: &sleepRecorder{slept: slept}, MaxRateWait: maxRateWait,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return NewForgeCI(g), &logs
}

func TestGitHubSource(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	f := &fakeGitHub{
		runs: []map[string]any{
			run(1, "build", shaA, "completed", "failure", t0),
			run(2, "build", shaA, "completed", "success", t0.Add(time.Minute)), // the re-run wins
			run(3, "test", shaA, "in_progress", "", t0),
			run(4, "lint", shaB, "completed", "success", t0), // another commit: discarded
			run(5, "deploy", shaA, "completed", "action_required", t0),
			run(6, "e2e", shaA, "completed", "startup_failure", t0),
			run(7, "flaky", shaA, "completed", "cancelled", t0),
		},
		statuses: []map[string]any{
			{"id": 11, "context": "jenkins", "state": "failure", "created_at": t0.Format(time.RFC3339)},
			{"id": 12, "context": "jenkins", "state": "success", "created_at": t0.Add(time.Hour).Format(time.RFC3339)},
			{"id": 13, "context": "gitlab", "state": "error", "created_at": t0.Format(time.RFC3339)},
		},
		rateLimited: 1,
		secondary:   1,
	}
	var slept []time.Duration
	g, logs := newFakeGitHubSource(t, f, &slept, 0)
	checks, err := g.Checks(context.Background(), "acme/payments", shaA)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]CIState{}
	for _, c := range checks {
		if c.SHA != shaA {
			t.Errorf("check %s has sha %s", c.Name, c.SHA)
		}
		got[c.Name] = c.State
	}
	want := map[string]CIState{"build": CISuccess, "test": CIPending, "deploy": CIActionRequired, "e2e": CIInfraError,
		"flaky": CICancelled, "jenkins": CISuccess, "gitlab": CIInfraError}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("states\n got %v\nwant %v", got, want)
	}
	if len(slept) != 2 {
		t.Fatalf("rate limit waits %v, want two (secondary, then primary)", slept)
	}
	// 7 runs in pages of 2 → 4 requests, 3 statuses in pages of 1 → 3, plus two rate-limited.
	if f.requests != 9 {
		t.Fatalf("%d requests, want 9 (all pages)", f.requests)
	}
	if !slices.Contains(f.auth, "Bearer s3cr3t-token") {
		t.Fatalf("token not sent: %q", f.auth)
	}
	if !strings.Contains(logs.String(), "rate limited, waiting") || strings.Contains(logs.String(), "s3cr3t-token") {
		t.Fatalf("the waits are logged, the token never:\n%s", logs)
	}
	if err := g.Rerun(context.Background(), "acme/payments", shaA, []string{"e2e", "flaky", "gitlab"}); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(f.rerequested); !slices.Equal(f.rerequested, []string{"6", "7"}) {
		t.Fatalf("re-requested %v", f.rerequested)
	}
}

func TestGitHubSourceGivesUpOnALongRateLimit(t *testing.T) {
	t.Parallel()
	f := &fakeGitHub{rateLimited: 100}
	var slept []time.Duration
	g, logs := newFakeGitHubSource(t, f, &slept, time.Nanosecond) // any wait is too long
	_, err := g.Checks(context.Background(), "acme/payments", shaA)
	if err == nil || !errorsIs(err, ErrRateLimited) || workitems.ClassOf(err) != workitems.ClassTransient {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t-token") || strings.Contains(logs.String(), "s3cr3t-token") {
		t.Fatalf("the token leaked: %v\n%s", err, logs)
	}
	if len(slept) != 0 {
		t.Fatalf("slept %v", slept)
	}
}

// The check-run state table moved with the GitHub client: forge.TestCheckRunStates.

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestVerifyWithGitHubChecks(t *testing.T) {
	t.Parallel()
	ws, sha := gitRepo(t, map[string]string{"a.txt": "a\n"})
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	f := &fakeGitHub{runs: []map[string]any{
		run(1, "build", sha, "completed", "success", t0),
		run(2, "test", sha, "completed", "success", t0),
		run(3, "test", sha, "completed", "failure", t0.Add(time.Minute)), // the latest run of test
		run(4, "test", shaB, "completed", "success", t0.Add(time.Hour)),  // another commit
	}}
	var slept []time.Duration
	g, _ := newFakeGitHubSource(t, f, &slept, 0)
	tmpl := template()
	// What config makes of {provider: github, repo: acme/payments}: the forge of kind github.
	tmpl.DoneCheck.CI = &config.CICheck{Forge: "gh", Provider: "github", Repo: "acme/payments", Required: []string{"build", "test"},
		Wait: workitems.Duration(time.Minute)}
	v := New(WithClock(fakeclock.New(testNow)), WithCI("gh", g))
	res, err := v.Verify(context.Background(), Request{Template: tmpl, Item: item(workitems.Attempt{N: 1}), Attempt: 1,
		Exit: completed(), Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Decision
	if d.Rule != "ci_failed" || d.Next == nil || !strings.Contains(d.Next.Input, "Failing CI checks: test") {
		t.Fatalf("got %s %+v", d.Rule, d.Next)
	}
	refs := fmt.Sprint(d.Evidence)
	if !strings.Contains(refs, "ci_check test failure @ "+sha[:12]) {
		t.Fatalf("evidence %s", refs)
	}
}
