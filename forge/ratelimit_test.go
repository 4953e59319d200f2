package forge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"outerloop/lib/fakeclock"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// scriptedServer answers each request with the next scripted header set and status (then 200
// with no headers), counting the requests it saw.
type scriptedServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   int
	// answers, in order: status and headers.
	answers []scripted
}

type scripted struct {
	status int
	header map[string]string
}

func newScriptedServer(t *testing.T, answers ...scripted) *scriptedServer {
	s := &scriptedServer{answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		a := scripted{status: http.StatusOK}
		if s.n < len(s.answers) {
			a = s.answers[s.n]
		}
		s.n++
		s.mu.Unlock()
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// gateClient is a client through a gate over the server's own transport (not the shared
// default one, whose idle connections another test's server closes).
func gateClient(s *scriptedServer, clock *fakeclock.Clock, maxWait time.Duration) *http.Client {
	return &http.Client{Transport: &rateGate{base: s.srv.Client().Transport, clock: clock, maxWait: maxWait}}
}

func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// waitedRequest sends the second request in the background and checks it is held, not sent,
// until the clock passes d; it returns once the request has completed.
func waitedRequest(t *testing.T, s *scriptedServer, c *http.Client, clock *fakeclock.Clock, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := get(bg, c, s.srv.URL)
		done <- err
	}()
	if !clock.BlockUntil(1, nil) {
		t.Fatal("the request never waited")
	}
	if got := s.requests(); got != 1 {
		t.Fatalf("%d requests sent while the gate is closed, want 1", got)
	}
	clock.Advance(d - time.Second)
	if clock.Waiters() != 1 {
		t.Fatal("the request went out before the reset")
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := s.requests(); got != 2 {
		t.Fatalf("%d requests, want 2", got)
	}
}

func TestRateGateHoldsLaterRequestsUntilRetryAfter(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
			s := newScriptedServer(t, scripted{status: status, header: map[string]string{"Retry-After": "30"}})
			c := gateClient(s, clock, time.Minute)
			if code, err := get(bg, c, s.srv.URL); err != nil || code != status {
				t.Fatalf("first answer %d, %v", code, err)
			}
			waitedRequest(t, s, c, clock, 30*time.Second)
		})
	}
}

func TestRateGateHoldsLaterRequestsUntilTheRateLimitResets(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	reset := clock.Now().Add(90 * time.Second)
	// A success that spent the last request of the window: the next one must wait.
	s := newScriptedServer(t, scripted{status: http.StatusOK, header: map[string]string{
		"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)}})
	c := gateClient(s, clock, 2*time.Minute)
	if _, err := get(bg, c, s.srv.URL); err != nil {
		t.Fatal(err)
	}
	waitedRequest(t, s, c, clock, 90*time.Second)
	// Open again: the next request goes straight out.
	if _, err := get(bg, c, s.srv.URL); err != nil || s.requests() != 3 || clock.Waiters() != 0 {
		t.Fatalf("after the reset: %v, %d requests, %d waiters", err, s.requests(), clock.Waiters())
	}
}

func TestRateGateReadsAnHTTPDateRetryAfter(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	s := newScriptedServer(t, scripted{status: http.StatusTooManyRequests, header: map[string]string{
		"Retry-After": clock.Now().Add(45 * time.Second).Format(http.TimeFormat)}})
	c := gateClient(s, clock, time.Minute)
	if _, err := get(bg, c, s.srv.URL); err != nil {
		t.Fatal(err)
	}
	waitedRequest(t, s, c, clock, 45*time.Second)
}

func TestRateGateRefusesAWaitPastMaxWaitWithoutSending(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	reset := clock.Now().Add(time.Hour)
	s := newScriptedServer(t, scripted{status: http.StatusForbidden, header: map[string]string{
		"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset.Unix(), 10)}})
	c := gateClient(s, clock, 2*time.Minute)
	if _, err := get(bg, c, s.srv.URL); err != nil {
		t.Fatal(err)
	}
	_, err := get(bg, c, s.srv.URL)
	var rl *rateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, ErrRateLimited) || !rl.Until.Equal(reset) {
		t.Fatalf("got %v, want a rate-limited error until %s", err, reset)
	}
	if s.requests() != 1 || clock.Waiters() != 0 {
		t.Fatalf("%d requests, %d waiters: the refused request must not be sent nor wait", s.requests(), clock.Waiters())
	}
}

func TestRateGateWaitEndsWithTheContext(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	s := newScriptedServer(t, scripted{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "60"}})
	c := gateClient(s, clock, 2*time.Minute)
	if _, err := get(bg, c, s.srv.URL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := get(ctx, c, s.srv.URL)
		done <- err
	}()
	clock.BlockUntil(1, nil)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || s.requests() != 1 {
		t.Fatalf("got %v after %d requests, want context.Canceled and nothing sent", err, s.requests())
	}
}

func TestRateGateIgnoresRefusalsWithoutALimit(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	s := newScriptedServer(t,
		scripted{status: http.StatusForbidden},                                                    // a plain refusal
		scripted{status: http.StatusOK, header: map[string]string{"Retry-After": "60"}},           // not a refusal
		scripted{status: http.StatusOK, header: map[string]string{"X-RateLimit-Remaining": "12"}}, // budget left
		scripted{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "soon"}})
	c := gateClient(s, clock, 2*time.Minute)
	for i := range 5 {
		if _, err := get(bg, c, s.srv.URL); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if s.requests() != 5 || clock.Waiters() != 0 {
		t.Fatalf("%d requests, %d waiters", s.requests(), clock.Waiters())
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0": 0, "17": 17 * time.Second, now.Add(time.Minute).Format(http.TimeFormat): time.Minute,
		now.Add(-time.Minute).Format(http.TimeFormat): 0,
	} {
		if got, ok := parseRetryAfter(v, now); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", v, got, ok, want)
		}
	}
	for _, v := range []string{"", "-3", "soon"} {
		if _, ok := parseRetryAfter(v, now); ok {
			t.Errorf("%q parsed", v)
		}
	}
}

func TestOneForgesCallsShareItsRateGate(t *testing.T) {
	t.Parallel()
	for _, kind := range workitems.AllForgeKinds() {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New(time.Now().Truncate(time.Second))
			s := newScriptedServer(t, scripted{status: http.StatusTooManyRequests, header: map[string]string{"Retry-After": "600"}})
			f, err := New(Config{Name: "f", ForgeConfig: config.ForgeConfig{Kind: kind, BaseURL: s.srv.URL,
				TokenEnv: "T"}, Getenv: func(string) string { return "tok" }, Clock: clock, MaxRateWait: time.Minute,
				HTTPClient: s.srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			reset := clock.Now().Add(10 * time.Minute)
			_, err = f.Repository(bg, "acme/one")
			if e := wantErr(t, err, workitems.ClassTransient, ErrRateLimited); !e.RetryAt.Equal(reset) {
				t.Fatalf("retry at %s, want %s", e.RetryAt, reset)
			}
			// Other operations on other repositories: refused before they are sent, with the reset.
			_, err = f.Checks(bg, "acme/two", "abc")
			if e := wantErr(t, err, workitems.ClassTransient, ErrRateLimited); !e.RetryAt.Equal(reset) {
				t.Fatalf("retry at %s, want %s", e.RetryAt, reset)
			}
			_, err = f.(RepoLister).ListRepos(bg, RepoQuery{Owner: "acme"})
			wantErr(t, err, workitems.ClassTransient, ErrRateLimited)
			if s.requests() != 1 || clock.Waiters() != 0 {
				t.Fatalf("%d requests sent, %d waiting past the limit", s.requests(), clock.Waiters())
			}
		})
	}
}
