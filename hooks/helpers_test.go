package hooks_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"outerloop/hooks"
	"outerloop/lib/fakeclock"
	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestMain(m *testing.M) { giteatest.Main(m, func() error { return goleak.Find() }) }

const (
	ghSecret  = "gh-webhook-secret"
	teaSecret = "tea-webhook-secret"
)

var received = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// recordingSink keeps what it is given; fail makes Handle return that error.
type recordingSink struct {
	mu     sync.Mutex
	events []hooks.Event
	fail   error
}

func (s *recordingSink) Handle(_ context.Context, e hooks.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.events = append(s.events, e)
	return nil
}

func (s *recordingSink) got() []hooks.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hooks.Event(nil), s.events...)
}

func (s *recordingSink) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// memSeen is a Seen in memory; err makes every call fail.
type memSeen struct {
	mu  sync.Mutex
	ids map[string]bool
	err error
}

func (m *memSeen) Mark(_ context.Context, forge, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return false, m.err
	}
	if m.ids == nil {
		m.ids = map[string]bool{}
	}
	if m.ids[forge+"/"+id] {
		return false, nil
	}
	m.ids[forge+"/"+id] = true
	return true, nil
}

func (m *memSeen) Unmark(_ context.Context, forge, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ids, forge+"/"+id)
	return m.err
}

func (m *memSeen) has(forge, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids[forge+"/"+id]
}

// countingObserver counts outcomes as "forge/kind/result".
type countingObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *countingObserver) Delivery(forge string, kind hooks.Kind, r hooks.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[forge+"/"+string(kind)+"/"+string(r)]++
}

func (o *countingObserver) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[key]
}

// harness is a Handler over two forges (gh: GitHub, tea: Gitea, with secrets) and one without
// a webhook secret (bare), with in-memory sink, Seen and observer.
type harness struct {
	h    http.Handler
	sink *recordingSink
	seen *memSeen
	obs  *countingObserver
	logs *testlog.Buffer
	env  map[string]string
	mu   sync.Mutex
}

func newHarness(t *testing.T, edit ...func(*hooks.Options)) *harness {
	t.Helper()
	hs := &harness{sink: &recordingSink{}, seen: &memSeen{}, obs: &countingObserver{}, logs: &testlog.Buffer{},
		env: map[string]string{"GH_HOOK": ghSecret, "TEA_HOOK": teaSecret}}
	forges := hooks.FromConfig(map[string]config.ForgeConfig{
		"gh":   {Kind: workitems.ForgeGitHub, WebhookSecretEnv: "GH_HOOK"},
		"tea":  {Kind: workitems.ForgeGitea, WebhookSecretEnv: "TEA_HOOK"},
		"bare": {Kind: workitems.ForgeGitea},
	}, hs.getenv)
	o := hooks.Options{Forges: forges, Sink: hs.sink, Seen: hs.seen, Observer: hs.obs,
		Logger: slog.New(slog.NewTextHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:  fakeclock.New(received)}
	for _, e := range edit {
		e(&o)
	}
	hs.h = hooks.Handler(o)
	t.Cleanup(func() {
		for _, s := range []string{ghSecret, teaSecret} {
			if strings.Contains(hs.logs.String(), s) {
				t.Errorf("a webhook secret is in the logs:\n%s", hs.logs.String())
			}
		}
	})
	return hs
}

func (hs *harness) getenv(k string) string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.env[k]
}

func (hs *harness) setenv(k, v string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.env[k] = v
}

// answer is a decoded reply.
type answer struct {
	Code    int
	Result  hooks.Result `json:"result"`
	Kind    hooks.Kind   `json:"kind"`
	Message string       `json:"message"`
}

func (hs *harness) do(t *testing.T, method, path string, h http.Header, body []byte) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	hs.h.ServeHTTP(rec, req)
	a := answer{Code: rec.Code}
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("answer %q: %v", rec.Body.String(), err)
		}
	}
	return a
}

func hexMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// githubHeaders are the headers GitHub sends with a delivery, signed with secret.
func githubHeaders(event, delivery, secret string, body []byte) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/044aadd")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Hook-ID", "292430182")
	if delivery != "" {
		h.Set("X-GitHub-Delivery", delivery)
	}
	h.Set("X-Hub-Signature-256", "sha256="+hexMAC(secret, body))
	return h
}

// giteaHeaders are the headers Gitea 1.27 sends (services/webhook/deliver.go), signed with
// secret; eventType is X-Gitea-Event-Type.
func giteaHeaders(eventType, delivery, secret string, body []byte) http.Header {
	h := http.Header{}
	sig := hexMAC(secret, body)
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitea-Delivery", delivery)
	h.Set("X-Gitea-Event", eventType)
	h.Set("X-Gitea-Event-Type", eventType)
	h.Set("X-Gitea-Signature", sig)
	h.Set("X-Gogs-Delivery", delivery)
	h.Set("X-Gogs-Signature", sig)
	h.Set("X-Hub-Signature-256", "sha256="+sig)
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Event", eventType)
	return h
}

func fixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var errSinkDown = errors.New("sink down")

// isCI reports whether the tests run in CI, where a missing service fails instead of skipping.
func isCI() bool { return os.Getenv("CI") != "" }
