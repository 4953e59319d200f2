package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"outerloop/scheduler"
	"outerloop/workitems"
)

// TestCloseAnswersALongPollUnderWay: a long poll waiting a minute for new events answers once
// the server closes (serve's shutdown calls Close), instead of holding http.Server.Shutdown for
// its whole wait. The client's timeout, far under the poll's wait, is what fails without it.
func TestCloseAnswersALongPollUnderWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	srv, s, store, q := f.srv, f.server, f.store, f.queue
	it, err := q.Submit(context.Background(), scheduler.Request{Template: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.Events(context.Background(), it.ID, "", 100, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of a new item: %v %v", evs, err)
	}
	last := evs[len(evs)-1].ID

	type answer struct {
		code int
		n    int
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Get(srv.URL + "/api/items/" + it.ID + "/events?wait=1m&after=" + last)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var m struct{ Events []workitems.Event }
		err = json.NewDecoder(resp.Body).Decode(&m)
		got <- answer{code: resp.StatusCode, n: len(m.Events), err: err}
	}()
	s.Close()
	a := <-got
	if a.err != nil || a.code != http.StatusOK || a.n != 0 {
		t.Fatalf("long poll after Close: %d, %d events, %v; want 200 with none, before its minute", a.code, a.n, a.err)
	}
}
