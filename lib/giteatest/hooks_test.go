package giteatest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestAHookDeliversToALoopbackServer: the app.ini lets Gitea deliver to the tests' httptest
// servers, promptly, with the secret's signature.
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case h := <-got:
		if h.Get("X-Gitea-Delivery") == "" || h.Get("X-Gitea-Signature") == "" {
			t.Fatalf("headers %v", h)
		}
	case <-ctx.Done():
		t.Fatalf("Gitea delivered nothing to %s within 30s%s", hs.URL, logTail(s.Dir))
	}
}
