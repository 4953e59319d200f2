package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/hooks"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/workitems"
)

// bodyTimeout is the test server's: short, so a trickling client is cut off soon.
const bodyTimeout = 300 * time.Millisecond

// served is the HTTP server as serve builds it (api.NewHTTPServer) in front of the API, a
// forge's webhooks, the CI evidence hook and a handler that outlives the body deadline after
// reading its body.
type served struct {
	addr string
	f    *fixture
	// entered has a value each time a request for /events or /slow reaches its handler;
	// polled has, for each request for /events, its context's error as its handler returned.
	entered chan string
	polled  chan error
	// release lets /slow answer; it answers whether its request's context was still alive.
	release chan struct{}
	sunk    chan hooks.Event
}

func serveBounded(t *testing.T) *served {
	t.Helper()
	f := newFixture(t, token)
	s := &served{f: f, entered: make(chan string, 8), polled: make(chan error, 8), release: make(chan struct{}), sunk: make(chan hooks.Event, 8)}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{forge}", hooks.Handler(hooks.Options{
		Forges: map[string]hooks.Forge{"gh": {Kind: workitems.ForgeGitHub, Secret: func() string { return "webhook-secret" }}},
		Sink:   hooks.SinkFunc(func(_ context.Context, e hooks.Event) error { s.sunk <- e; return nil })}))
	mux.Handle("POST /api/evidence", verify.EvidenceHandler(nil, token)) // refused bodies never reach the store
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.entered <- "slow"
		<-s.release
		_, _ = fmt.Fprintf(w, "read %d bytes; context: %v", len(body), r.Context().Err())
	})
	apiHandler := f.server.Handler()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			apiHandler.ServeHTTP(w, r)
			return
		}
		s.entered <- "events"
		apiHandler.ServeHTTP(w, r)
		s.polled <- r.Context().Err()
	}))
	srv := api.NewHTTPServer(mux, api.ServerOptions{BodyTimeout: bodyTimeout})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	s.addr = ln.Addr().String()
	return s
}

// trickled is how a server ended a request whose body came a byte at a time.
type trickled struct {
	status int   // the answer's status; 0 when the server closed without one
	err    error // why there was no answer
	sent   int   // body bytes sent before the answer
	closed bool  // the server closed the connection after it
}

// trickle sends head, which declares a body of more than a minute's worth of bytes, then the
// body one byte at a time until the server answers or hangs up.
func trickle(t *testing.T, addr, head string) trickled {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		got <- answer{resp, err}
	}()
	tick := time.NewTicker(10 * time.Millisecond) // the client's pace, not a synchronisation
	defer tick.Stop()
	giveUp := time.NewTimer(testwait.Left(t))
	defer giveUp.Stop()
	var tr trickled
	for {
		select {
		case a := <-got:
			if a.err != nil {
				tr.err, tr.closed = a.err, true
				return tr
			}
			tr.status = a.resp.StatusCode
			// The connection ends after the answer: the next read finds the server's close.
			_ = c.SetReadDeadline(testwait.Deadline(t))
			_, err := br.ReadByte()
			tr.closed = err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
			return tr
		case <-tick.C:
			if _, err := c.Write([]byte("x")); err == nil {
				tr.sent++
			}
		case <-giveUp.C:
			t.Fatalf("the server still reads a trickling body at the test's deadline (%d bytes sent)", tr.sent)
		}
	}
}

// A body that arrives a byte at a time — a forge's webhook, an API action behind its token, CI
// evidence — is answered 408 once the body deadline passes, and its connection is closed: the
// sender holds it no longer. Nothing reaches the webhook's sink.
func TestABodySentAByteAtATimeIsCutOffAtTheBodyDeadline(t *testing.T) {
	t.Parallel()
	s := serveBounded(t)
	for _, tc := range []struct {
		name, head string
		size       int
	}{
		{"AForgesWebhook", "POST /hooks/gh HTTP/1.1\r\nHost: outerloop\r\nContent-Type: application/json\r\n" +
			"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: d1\r\nX-Hub-Signature-256: sha256=00\r\n", 100000},
		{"AnAPIAction", "POST /api/items HTTP/1.1\r\nHost: outerloop\r\nAuthorization: Bearer " + token + "\r\n" +
			"X-Outerloop-Actor: tester\r\nContent-Type: application/json\r\n", 60000},
		{"CIEvidence", "POST /api/evidence HTTP/1.1\r\nHost: outerloop\r\nAuthorization: Bearer " + token + "\r\n" +
			"Content-Type: application/json\r\n", 100000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := trickle(t, s.addr, tc.head+fmt.Sprintf("Content-Length: %d\r\n\r\n", tc.size))
			if got.status != http.StatusRequestTimeout || !got.closed {
				t.Fatalf("%+v, want 408 and the connection closed", got)
			}
			if got.sent >= tc.size {
				t.Fatalf("the whole body was sent (%d bytes): nothing was cut off", got.sent)
			}
		})
	}
	t.Cleanup(func() {
		select {
		case e := <-s.sunk:
			t.Errorf("the sink got %+v", e)
		default:
		}
	})
}

// The body deadline is a body's only: a long poll (no body) started before a trickling request
// is still waiting when that request has been cut off — past the deadline — and answers the
// event that comes after; a request whose body arrived at once is still served after it.
func TestALongPollAndAHandlerThatReadItsBodyOutliveTheBodyDeadline(t *testing.T) {
	t.Parallel()
	s := serveBounded(t)
	ctx := context.Background()
	it, err := s.f.queue.Submit(ctx, scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.f.store.Events(ctx, it.ID, "", 100, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of a new item: %v %v", evs, err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	do := func(req *http.Request, to chan<- answer) {
		c := &http.Client{Timeout: 2 * time.Minute}
		resp, err := c.Do(req)
		if err != nil {
			to <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		to <- answer{resp.StatusCode, string(b), err}
	}
	poll, slow := make(chan answer, 1), make(chan answer, 1)
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.addr+"/api/items/"+it.ID+"/events?wait=1m&after="+evs[len(evs)-1].ID, nil)
	go do(req, poll)
	if e := <-s.entered; e != "events" {
		t.Fatalf("entered %q", e)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://"+s.addr+"/slow", strings.NewReader(strings.Repeat("b", 5000)))
	go do(req, slow)
	if e := <-s.entered; e != "slow" {
		t.Fatalf("entered %q", e)
	}
	// Both handlers started before this request's, which is cut off only once its deadline
	// passed: from here on both have run longer than the body deadline.
	if got := trickle(t, s.addr, "POST /slow HTTP/1.1\r\nHost: outerloop\r\nContent-Length: 100000\r\n\r\n"); got.status == http.StatusOK {
		t.Fatalf("the trickling request was served: %+v", got)
	}
	if err := s.f.store.Emit(ctx, workitems.Event{Item: it.ID, Type: workitems.EventStep, Message: "after the deadline"}); err != nil {
		t.Fatal(err)
	}
	a := <-poll
	var m struct{ Events []workitems.Event }
	if a.err != nil || a.code != http.StatusOK || json.Unmarshal([]byte(a.body), &m) != nil || len(m.Events) != 1 || m.Events[0].Message != "after the deadline" {
		t.Fatalf("long poll: %d %q %v, want 200 with the event emitted after the deadline", a.code, a.body, a.err)
	}
	if err := <-s.polled; err != nil {
		t.Fatalf("the long poll's context ended before it answered: %v", err)
	}
	close(s.release)
	if a := <-slow; a.err != nil || a.code != http.StatusOK || a.body != "read 5000 bytes; context: <nil>" {
		t.Fatalf("a handler that read its body: %d %q %v, want it served with its context alive", a.code, a.body, a.err)
	}
}
