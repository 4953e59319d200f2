package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"outerloop/workitems"
)

// streamID matches a Redis stream entry id ("1700000000000-0"), the only cursor accepted.
var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

// events streams an item's events as server-sent events, starting after ?after= (or the
// browser's Last-Event-ID on a reconnect). Each event is one JSON message whose SSE id is its
// stream id. A blocking read of at most EventBlock waits for new events; when none came, a
// comment keeps the connection alive and shows whether the client is still there.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx := r.Context()
	if _, err := c.store.Get(ctx, id); err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, workitems.ErrNotFound) {
			status = http.StatusNotFound
		}
		http.Error(w, err.Error(), status)
		return
	}
	select {
	case c.streams <- struct{}{}:
		defer func() { <-c.streams }()
	default:
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many live streams; try again later", http.StatusServiceUnavailable)
		return
	}
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if after != "" && !streamID.MatchString(after) {
		http.Error(w, fmt.Sprintf("after %q is not an event id", after), http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	secure(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	for ctx.Err() == nil {
		select {
		case <-c.closed:
			return
		default:
		}
		evs, err := c.store.Events(ctx, id, after, 100, c.o.EventBlock)
		if err != nil {
			if ctx.Err() == nil {
				c.o.Logger.Warn("console: event stream", "item", id, "err", err)
			}
			return // the browser reconnects with Last-Event-ID
		}
		if len(evs) == 0 {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		}
		for _, e := range evs {
			b, err := json.Marshal(e) // one line; <, > and & are escaped as \u003c…
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.ID, b); err != nil {
				return
			}
			after = e.ID
		}
		if rc.Flush() != nil {
			return
		}
	}
}
