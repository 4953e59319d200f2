package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"outerloop/console"
	"outerloop/lib/testwait"
	"outerloop/workitems"
)

// sse is one open event stream: its messages arrive on ch.
type sse struct {
	res *http.Response
	ch  chan sseMessage
}

type sseMessage struct {
	ID    string
	Event workitems.Event
}

func openStream(t *testing.T, url string, header http.Header) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sse{res: res, ch: make(chan sseMessage, 100)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); res.Body.Close(); <-done })
	go func() {
		defer close(done)
		defer close(s.ch)
		sc := bufio.NewScanner(res.Body)
		var m sseMessage
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				m.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m.Event)
			case line == "" && m.ID != "":
				s.ch <- m
				m = sseMessage{}
			}
		}
	}()
	return s
}

// ended reports whether the stream ended (false: still open at the test's deadline).
func (s *sse) ended(t *testing.T) bool {
	t.Helper()
	timeout := testwait.After(t)
	for {
		select {
		case _, ok := <-s.ch:
			if !ok {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func (s *sse) next(t *testing.T) sseMessage {
	t.Helper()
	select {
	case m, ok := <-s.ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-testwait.After(t):
		t.Fatal("no event by the test's deadline")
	}
	return sseMessage{}
}

func TestTheEventStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	f.item(t, "fix@1", "fix", "make TestAdd pass", nil)
	evs, err := f.app.Store.Events(ctx, "fix@1", "", 100, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %v %v", evs, err)
	}
	last := evs[len(evs)-1].ID

	t.Run("it sends events that happen after the page's last one, as JSON", func(t *testing.T) {
		s := openStream(t, srv.URL+"/items/fix@1/events?after="+last, nil)
		if ct := s.res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		if err := f.app.Store.Emit(ctx, workitems.Event{Item: "fix@1", Type: workitems.EventStep, Message: "ran <b>go test</b>", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		m := s.next(t)
		if m.Event.Type != workitems.EventStep || m.Event.Message != "ran <b>go test</b>" || m.ID == "" || m.ID == last {
			t.Fatalf("got %+v", m)
		}
		// A state change reaches the stream too.
		if _, err := f.app.Store.Update(ctx, "fix@1", nil, func(it *workitems.Item) ([]workitems.Event, error) {
			return nil, it.SetState(workitems.StateRunning)
		}); err != nil {
			t.Fatal(err)
		}
		if m := s.next(t); m.Event.Type != workitems.EventState || m.Event.To != workitems.StateRunning {
			t.Fatalf("got %+v", m)
		}
	})
	t.Run("a reconnect resumes after Last-Event-ID", func(t *testing.T) {
		s := openStream(t, srv.URL+"/items/fix@1/events", http.Header{"Last-Event-ID": {evs[0].ID}})
		m := s.next(t)
		all, _ := f.app.Store.Events(ctx, "fix@1", "", 100, 0)
		if len(all) < 2 || m.ID != all[1].ID {
			t.Fatalf("first resumed event %s, want %s", m.ID, all[1].ID)
		}
	})
}

func TestLiveStreamsAreBoundedAndEndOnClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t, testToken, func(o *console.Options) { o.MaxStreams = 1 })
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	f.item(t, "fix@1", "fix", "make TestAdd pass", nil)
	first := openStream(t, srv.URL+"/items/fix@1/events", nil)
	if m := first.next(t); m.Event.Type != workitems.EventCreated {
		t.Fatalf("first event %+v", m)
	}
	t.Run("a stream beyond the cap is refused with 503", func(t *testing.T) {
		res, err := http.Get(srv.URL + "/items/fix@1/events")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
	t.Run("Close ends the open streams", func(t *testing.T) {
		f.console.Close()
		if !first.ended(t) {
			t.Fatal("the stream is still open after Close")
		}
	})
}
