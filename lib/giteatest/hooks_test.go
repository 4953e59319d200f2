package giteatest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"outerloop/lib/testwait"
)

// TestAHookDeliversToALoopbackServer: the app.ini lets Gitea deliver to the tests' httptest
// servers, with the secret's signature.
func TestAHookDeliversToALoopbackServer(t *testing.T) {
	t.Parallel()
	s := Shared(t)
	got := make(chan http.Header, 4)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
	}))
	defer hs.Close()
	r := s.NewRepo(t, "hook")
	id := s.CreateHook(t, r.Slug, hs.URL+"/hook", "s3cret", []string{"issues"})
	if id == 0 {
		t.Fatal("no hook id")
	}
	s.API(t, http.MethodPost, "/repos/"+r.Slug+"/issues", map[string]string{"title": "deliver me"}, http.StatusCreated, nil)
	began := time.Now()
	select {
	case h := <-got:
		if h.Get("X-Gitea-Delivery") == "" || h.Get("X-Gitea-Signature") == "" {
			t.Fatalf("headers %v", h)
		}
	case <-testwait.After(t):
		t.Fatalf("Gitea delivered nothing to %s within %s%s", hs.URL, time.Since(began).Round(time.Second), logTail(s.Dir))
	}
}
