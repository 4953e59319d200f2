package hooks_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/lib/testwait"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// chanSink passes events on as they come and keeps them all.
type chanSink struct {
	mu  sync.Mutex
	all []hooks.Event
	ch  chan hooks.Event
}

func (s *chanSink) Handle(_ context.Context, e hooks.Event) error {
	s.mu.Lock()
	s.all = append(s.all, e)
	s.mu.Unlock()
	s.ch <- e
	return nil
}

// withDelivery counts the events of one delivery id.
func (s *chanSink) withDelivery(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.all {
		if e.DeliveryID == id {
			n++
		}
	}
	return n
}

// chanObserver passes every outcome on.
type chanObserver struct{ ch chan hooks.Result }

func (o chanObserver) Delivery(_ string, _ hooks.Kind, r hooks.Result) {
	select {
	case o.ch <- r:
	default: // nobody is waiting for this one
	}
}

// recorded is a delivery as it reached the server: its headers, raw body and answer.
type recorded struct {
	header http.Header
	body   []byte
	code   int
}

// recorder keeps every request (by X-Gitea-Delivery) before the handler sees it.
type recorder struct {
	next    http.Handler
	mu      sync.Mutex
	byID    map[string][]recorded
	changed chan struct{} // closed and replaced at every record
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	r.next.ServeHTTP(rec, req)
	r.mu.Lock()
	id := req.Header.Get("X-Gitea-Delivery")
	r.byID[id] = append(r.byID[id], recorded{header: req.Header.Clone(), body: body, code: rec.Code})
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (r *recorder) get(id string) []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byID[id])
}

// await returns the requests of delivery id once there is one: the sink sees an event while
// the handler still runs, before the recorder has its answer.
func (r *recorder) await(t *testing.T, id string) []recorded {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t)) // Gitea delivers from a queue
	defer cancel()
	for {
		r.mu.Lock()
		got, changed := slices.Clone(r.byID[id]), r.changed
		r.mu.Unlock()
		if len(got) > 0 {
			return got
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no request recorded for delivery %s within %s", id, time.Since(began).Round(time.Second))
		}
	}
}

// giteaHooks is one test's repository on the package's Gitea with a webhook to a Handler.
type giteaHooks struct {
	srv    *giteatest.Server
	repo   giteatest.Repo
	dir    string
	url    string // the handler's POST /hooks/tea
	sink   *chanSink
	obs    chanObserver
	rec    *recorder
	secret string
}

func newGiteaHooks(t *testing.T) *giteaHooks {
	t.Helper()
	srv := giteatest.Shared(t)
	rdb, prefix := testRedis(t)
	g := &giteaHooks{srv: srv, repo: srv.NewRepo(t, "hooks"), sink: &chanSink{ch: make(chan hooks.Event, 64)},
		obs: chanObserver{ch: make(chan hooks.Result, 64)}, secret: randomHex(t)}
	logs := &testlog.Buffer{}
	h := hooks.Handler(hooks.Options{
		Forges: hooks.FromConfig(map[string]config.ForgeConfig{"tea": {Kind: workitems.ForgeGitea, BaseURL: srv.URL,
			TokenEnv: "GITEA_TOKEN", WebhookSecretEnv: "GITEA_WEBHOOK_SECRET"}},
			func(k string) string {
				if k == "GITEA_WEBHOOK_SECRET" {
					return g.secret
				}
				return ""
			}),
		Sink: g.sink, Seen: hooks.NewRedisSeen(rdb, prefix, 0), Observer: g.obs,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	g.rec = &recorder{next: h, byID: map[string][]recorded{}, changed: make(chan struct{})}
	hs := httptest.NewServer(g.rec)
	t.Cleanup(hs.Close)
	g.url = hs.URL + "/hooks/tea"
	t.Cleanup(func() {
		if bytes.Contains([]byte(logs.String()), []byte(g.secret)) {
			t.Errorf("the webhook secret is in the logs")
		}
		if t.Failed() {
			t.Logf("handler logs:\n%s", logs.String())
		}
	})

	g.dir = t.TempDir()
	srv.Git(t, g.dir, "init", "-q")
	g.commit(t, "README.md", "# hooks\n")
	srv.PushDir(t, g.dir, g.repo, "main")
	srv.CreateHook(t, g.repo.Slug, g.url, g.secret,
		[]string{"status", "issues", "issue_comment", "pull_request", "pull_request_review"})
	return g
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// commit writes a file, commits it and returns HEAD.
func (g *giteaHooks) commit(t *testing.T, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	g.srv.Git(t, g.dir, "add", name)
	g.srv.Git(t, g.dir, "commit", "-qm", "change "+name)
	return g.srv.Git(t, g.dir, "rev-parse", "HEAD")
}

// next waits for the first event that match accepts, passing over the others (Gitea delivers
// what else happened meanwhile, in its own order).
func (g *giteaHooks) next(t *testing.T, what string, match func(hooks.Event) bool) hooks.Event {
	t.Helper()
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t)) // Gitea delivers from a queue
	defer cancel()
	var passed []string
	for {
		select {
		case e := <-g.sink.ch:
			if match(e) {
				return e
			}
			passed = append(passed, fmt.Sprintf("%s %+v", e.Kind, e))
		case <-ctx.Done():
			t.Fatalf("no %s delivered within %s; passed over: %v", what, time.Since(began).Round(time.Second), passed)
		}
	}
}

// openPR pushes a branch with a new commit and opens a pull request from it.
func (g *giteaHooks) openPR(t *testing.T, branch string) (int, string) {
	t.Helper()
	g.srv.Git(t, g.dir, "checkout", "-q", "-B", branch, "main")
	sha := g.commit(t, branch+".txt", branch+"\n")
	g.srv.PushDir(t, g.dir, g.repo, branch)
	return g.srv.OpenPullRequest(t, g.repo, branch, "main", "Change "+branch), sha
}

func TestGiteaDeliveriesBecomeEvents(t *testing.T) {
	t.Parallel()
	g := newGiteaHooks(t)
	main := g.srv.Git(t, g.dir, "rev-parse", "HEAD")

	t.Run("ACommitStatusIsACheckWithItsSHAAndState", func(t *testing.T) {
		g.srv.PostStatus(t, g.repo, main, "ci/test", "failure", "2 tests failed", "http://ci.example/run/1")
		e := g.next(t, "check", func(e hooks.Event) bool { return e.Kind == hooks.KindCheck })
		if e.SHA != main || e.Repo != g.repo.Slug || e.Forge != "tea" || e.DeliveryID == "" || e.Sender != g.srv.Admin {
			t.Fatalf("event %+v", e)
		}
		want := hooks.Check{Name: "ci/test", State: workitems.CheckFailure, URL: "http://ci.example/run/1", Summary: "2 tests failed"}
		if *e.Check != want {
			t.Fatalf("check %+v, want %+v", *e.Check, want)
		}
	})

	number, head := g.openPR(t, "feature")
	t.Run("OpeningAPullRequestIsOpened", func(t *testing.T) {
		e := g.next(t, "pull_request opened", func(e hooks.Event) bool {
			return e.Kind == hooks.KindPullRequest && e.PullRequest.Action == hooks.PROpened
		})
		if e.Number != number || !e.IsPR || e.SHA != head || e.Branch != "feature" || e.PullRequest.State != workitems.PROpen {
			t.Fatalf("event %+v %+v", e, *e.PullRequest)
		}
	})

	var comment hooks.Event
	t.Run("ACommentOnThePullRequestIsACommentOnAPR", func(t *testing.T) {
		g.srv.CommentIssue(t, g.repo, number, "/outerloop retry")
		comment = g.next(t, "comment", func(e hooks.Event) bool { return e.Kind == hooks.KindComment })
		if comment.Number != number || !comment.IsPR || comment.Comment.User != g.srv.Admin ||
			comment.Comment.Body != "/outerloop retry" || comment.Comment.URL == "" {
			t.Fatalf("event %+v %+v", comment, *comment.Comment)
		}
	})

	t.Run("TheSameDeliveryReplayedIsADuplicateAndTheSinkIsNotCalled", func(t *testing.T) {
		got := g.rec.await(t, comment.DeliveryID)
		if len(got) != 1 || got[0].code != http.StatusOK {
			t.Fatalf("recorded %d requests for %s", len(got), comment.DeliveryID)
		}
		code, rep := post(t, g.url, got[0].header, got[0].body)
		if code != http.StatusOK || rep.Result != hooks.ResultDuplicate || rep.Kind != hooks.KindComment {
			t.Fatalf("replay answered %d %+v", code, rep)
		}
		if n := g.sink.withDelivery(comment.DeliveryID); n != 1 {
			t.Fatalf("the sink got delivery %s %d times", comment.DeliveryID, n)
		}
	})

	t.Run("AReplayWithAnotherSecretIsUnauthorizedAndTheSinkIsNotCalled", func(t *testing.T) {
		got := g.rec.get(comment.DeliveryID)[0]
		h := got.header.Clone()
		h.Set("X-Gitea-Delivery", "forged-"+comment.DeliveryID)
		h.Set("X-Gitea-Signature", hexMAC("not-the-secret", got.body))
		h.Set("X-Hub-Signature-256", "sha256="+hexMAC("not-the-secret", got.body))
		code, rep := post(t, g.url, h, got.body)
		if code != http.StatusUnauthorized || rep.Result != hooks.ResultBadSignature {
			t.Fatalf("answered %d %+v", code, rep)
		}
		if n := g.sink.withDelivery("forged-" + comment.DeliveryID); n != 0 {
			t.Fatalf("the sink got the forged delivery")
		}
	})

	t.Run("AddingALabelIsLabeledWithTheCurrentLabels", func(t *testing.T) {
		var l struct {
			ID int64 `json:"id"`
		}
		g.srv.API(t, http.MethodPost, "/repos/"+g.repo.Slug+"/labels", map[string]string{"name": "outerloop", "color": "#f29513"},
			http.StatusCreated, &l)
		g.srv.API(t, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/labels", g.repo.Slug, number),
			map[string]any{"labels": []int64{l.ID}}, http.StatusOK, nil)
		e := g.next(t, "labeled", func(e hooks.Event) bool { return e.Kind == hooks.KindLabeled })
		if e.Number != number || !e.IsPR || !e.Labeled.Current || !slices.Equal(e.Labeled.Labels, []string{"outerloop"}) ||
			e.Labeled.User != g.srv.Admin || e.Labeled.Title != "Change feature" {
			t.Fatalf("event %+v %+v", e, *e.Labeled)
		}
	})

	t.Run("ClosingThePullRequestIsClosed", func(t *testing.T) {
		g.srv.ClosePullRequest(t, g.repo, number)
		e := g.next(t, "pull_request closed", func(e hooks.Event) bool {
			return e.Kind == hooks.KindPullRequest && e.PullRequest.Action == hooks.PRClosed
		})
		if e.Number != number || e.PullRequest.State != workitems.PRClosed || e.SHA != head || e.Sender != g.srv.Admin {
			t.Fatalf("event %+v %+v", e, *e.PullRequest)
		}
	})

	t.Run("ReopeningThePullRequestIsReopened", func(t *testing.T) {
		g.srv.API(t, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", g.repo.Slug, number), map[string]string{"state": "open"},
			http.StatusCreated, nil)
		e := g.next(t, "pull_request reopened", func(e hooks.Event) bool {
			return e.Kind == hooks.KindPullRequest && e.PullRequest.Action == hooks.PRReopened
		})
		if e.Number != number || e.PullRequest.State != workitems.PROpen {
			t.Fatalf("event %+v %+v", e, *e.PullRequest)
		}
	})

	t.Run("PushingToThePullRequestIsSynchronized", func(t *testing.T) {
		sha := g.commit(t, "more.txt", "more\n")
		g.srv.PushDir(t, g.dir, g.repo, "feature")
		e := g.next(t, "pull_request synchronized", func(e hooks.Event) bool {
			return e.Kind == hooks.KindPullRequest && e.PullRequest.Action == hooks.PRSynchronized
		})
		if e.Number != number || e.SHA != sha || e.Branch != "feature" {
			t.Fatalf("event %+v %+v", e, *e.PullRequest)
		}
		head = sha
	})

	t.Run("AnApprovalByAnotherUserIsAReview", func(t *testing.T) {
		reviewer := "reviewer-" + randomHex(t)[:8]
		g.srv.API(t, http.MethodPost, "/admin/users", map[string]any{"username": reviewer, "email": reviewer + "@example.com",
			"password": randomHex(t) + "Aa1!", "must_change_password": false}, http.StatusCreated, nil)
		g.srv.API(t, http.MethodPut, "/repos/"+g.repo.Slug+"/collaborators/"+reviewer, map[string]string{"permission": "write"},
			http.StatusNoContent, nil)
		sudo(t, g.srv, reviewer, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", g.repo.Slug, number),
			map[string]string{"event": "APPROVED", "body": "LGTM"}, http.StatusOK)
		e := g.next(t, "review", func(e hooks.Event) bool { return e.Kind == hooks.KindReview })
		want := hooks.Review{User: reviewer, State: "approved", Body: "LGTM"}
		if e.Number != number || !e.IsPR || e.SHA != head || e.Sender != reviewer || *e.Review != want {
			t.Fatalf("event %+v %+v", e, *e.Review)
		}
	})

	t.Run("MergingThePullRequestIsMerged", func(t *testing.T) {
		g.srv.MergePullRequest(t, g.repo, number)
		e := g.next(t, "pull_request merged", func(e hooks.Event) bool {
			return e.Kind == hooks.KindPullRequest && e.PullRequest.Action == hooks.PRMerged
		})
		if e.Number != number || e.PullRequest.State != workitems.PRMerged || e.PullRequest.MergedBy != g.srv.Admin ||
			e.PullRequest.MergeCommitSHA == "" || e.SHA != head {
			t.Fatalf("event %+v %+v", e, *e.PullRequest)
		}
	})
}

func TestGiteaDeliveriesSignedWithAnotherSecretAreRefused(t *testing.T) {
	t.Parallel()
	g := newGiteaHooks(t)
	// A second hook on the same repository whose secret the handler does not know.
	g.srv.CreateHook(t, g.repo.Slug, g.url, "not-the-secret", []string{"status"})
	main := g.srv.Git(t, g.dir, "rev-parse", "HEAD")
	g.srv.PostStatus(t, g.repo, main, "ci/lint", "success", "", "")

	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t)) // Gitea delivers from a queue
	defer cancel()
	for refused := false; !refused; {
		select {
		case r := <-g.obs.ch:
			refused = r == hooks.ResultBadSignature
		case <-ctx.Done():
			t.Fatalf("Gitea's delivery signed with another secret did not arrive within %s", time.Since(began).Round(time.Second))
		}
	}
	e := g.next(t, "check", func(e hooks.Event) bool { return e.Kind == hooks.KindCheck })
	if e.Check.Name != "ci/lint" || e.Check.State != workitems.CheckSuccess {
		t.Fatalf("event %+v", e)
	}
	// Both deliveries have arrived: exactly one reached the sink.
	g.sink.mu.Lock()
	n := len(g.sink.all)
	g.sink.mu.Unlock()
	if n != 1 {
		t.Fatalf("the sink got %d events, want only the correctly signed one", n)
	}
}

// post sends a request as Gitea would and decodes the answer.
func post(t *testing.T, url string, h http.Header, body []byte) (int, answer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, a
}

// sudo calls Gitea's API as user (the admin's token with Gitea's Sudo header).
func sudo(t *testing.T, srv *giteatest.Server, user, method, path string, body any, want int) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, srv.URL+"/api/v1"+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+srv.Token())
	req.Header.Set("Sudo", user)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		out, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s as %s: HTTP %d, want %d: %s", method, path, user, resp.StatusCode, want, out)
	}
}

func TestGiteaCheckStatesAreForgesStates(t *testing.T) {
	t.Parallel()
	g := newGiteaHooks(t)
	sha := g.srv.Git(t, g.dir, "rev-parse", "HEAD")
	states := []string{"pending", "success", "error", "failure", "warning", "skipped"}
	for _, s := range states {
		g.srv.PostStatus(t, g.repo, sha, "status-"+s, s, "", "")
	}
	var events []hooks.Event
	for range states {
		events = append(events, g.next(t, "check", func(e hooks.Event) bool { return e.Kind == hooks.KindCheck }))
	}
	f, err := forge.New(forge.Config{Name: "tea", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitea,
		BaseURL: g.srv.URL, TokenEnv: "GITEA_TOKEN"}, Getenv: g.srv.Getenv("GITEA_TOKEN"), RequestTimeout: testwait.Left(t)})
	if err != nil {
		t.Fatal(err)
	}
	checks, err := f.Checks(context.Background(), g.repo.Slug, sha)
	if err != nil {
		t.Fatal(err)
	}
	polled := map[string]workitems.CheckState{}
	for _, c := range checks {
		polled[c.Name] = c.State
	}
	compareStates(t, events, polled, len(states))
}
