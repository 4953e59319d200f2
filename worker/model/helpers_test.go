package model_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
)

// canned is one reply of a fixtureServer.
type canned struct {
	status int
	header http.Header
	body   string
}

// sent is one request a fixtureServer received.
type sent struct {
	path   string
	header http.Header
	body   []byte
}

// fixtureServer serves canned replies in order (recorded SSE or error bodies) and records the
// requests; it works for any of the HTTP providers.
type fixtureServer struct {
	*httptest.Server
	mu      sync.Mutex
	replies []canned
	got     []sent
}

func newFixtureServer(t *testing.T, replies ...canned) *fixtureServer {
	t.Helper()
	fs := &fixtureServer{replies: replies}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fs.mu.Lock()
		fs.got = append(fs.got, sent{path: r.URL.Path, header: r.Header.Clone(), body: body})
		if len(fs.replies) == 0 {
			fs.mu.Unlock()
			t.Errorf("fixture server: no reply for request %d", len(fs.got))
			http.Error(w, "no reply", http.StatusTeapot)
			return
		}
		c := fs.replies[0]
		fs.replies = fs.replies[1:]
		fs.mu.Unlock()
		for k, v := range c.header {
			w.Header()[k] = v
		}
		if c.status == 0 {
			c.status = http.StatusOK
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(c.status)
		io.WriteString(w, c.body)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *fixtureServer) requests() []sent {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]sent(nil), fs.got...)
}

func fixture(t *testing.T, name string) canned {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return canned{body: string(b)}
}

func key(string) string { return "sk-test-key" }
