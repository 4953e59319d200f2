package api

import (
	"cmp"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"outerloop/workitems"
)

// Defaults of ServerOptions.
const (
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds a request body's arrival: the largest bodies the server takes
	// (a forge's webhook, 5 MiB) arrive in it at 1.5 Mbit/s.
	DefaultBodyTimeout = 30 * time.Second
	DefaultIdleTimeout = 2 * time.Minute
)

// ServerOptions configures NewHTTPServer; a zero field takes its default.
type ServerOptions struct {
	HeaderTimeout time.Duration // reading a request's head
	BodyTimeout   time.Duration // reading a request's body, from its handler's start (BoundBodies)
	IdleTimeout   time.Duration // a kept-alive connection waiting for its next request
	// Clock sets the body deadlines (nil: the system clock; a connection's deadline is wall
	// time, so only a test would pass another).
	Clock workitems.Clock
}

// NewHTTPServer returns the http.Server outerloop serves h with (API, console, webhooks):
// request heads and bodies are read within bounds, so a client sending a byte at a time holds
// a connection no longer than HeaderTimeout plus BodyTimeout. It has no ReadTimeout and no
// WriteTimeout: either would end the API's long polls and the console's live streams, which
// read no body and write for minutes.
func NewHTTPServer(h http.Handler, o ServerOptions) *http.Server {
	return &http.Server{
		Handler:           BoundBodies(h, cmp.Or(o.BodyTimeout, DefaultBodyTimeout), o.Clock),
		ReadHeaderTimeout: cmp.Or(o.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       cmp.Or(o.IdleTimeout, DefaultIdleTimeout),
	}
}

// BoundBodies returns h with the body of every request that has one bounded in time: it must
// have arrived d after h starts, or reading it fails with an error that is
// os.ErrDeadlineExceeded (a handler answers 408); its answer is then the connection's last.
// A request without a body (a GET long poll, a live stream) gets no deadline, and a body read
// to its end lifts the deadline (net/http's own read for the client's hang-up takes over), so
// a handler may run as long as it needs after reading its body. clock nil: the system clock.
func BoundBodies(h http.Handler, d time.Duration, clock workitems.Clock) http.Handler {
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			// An error means a writer without deadlines (HTTP/2 or a test recorder): the
			// body is then as bounded as that server makes it.
			if rc.SetReadDeadline(clock.Now().Add(d)) == nil {
				r.Body = &boundedBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// boundedBody lifts its connection's read deadline once it is read to its end: past the body
// the connection is read only to learn that the client went, which must not end the request
// (net/http lifts it too as it starts that read; this does not rely on it).
type boundedBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

// bodyTimedOut reports whether err is a request body's read that ran past its deadline
// (BoundBodies): the client is too slow, and the answer is 408.
func bodyTimedOut(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
