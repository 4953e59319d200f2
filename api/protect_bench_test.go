package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"outerloop/api"
)

// BenchmarkProtect measures what the access gate adds to a request against the same handler
// without it: an anonymous open read, a read with a bearer token (one SHA-256 and a compare per
// credential), and a session read (HMAC check).
func BenchmarkProtect(b *testing.B) {
	auth, err := api.NewAuthWith(api.AuthOptions{ReadLogin: true, Credentials: []api.Credential{
		{Name: "alice", Role: api.RoleOperator, Token: aliceTok},
		{Name: "bob", Role: api.RoleViewer, Token: bobTok},
		{Name: api.OperatorTokenName, Role: api.RoleOperator, Token: sharedTok, Shared: true},
	}})
	if err != nil {
		b.Fatal(err)
	}
	noop := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	gated := api.Protect(noop, api.ProtectOptions{Auth: auth})
	session := auth.NewSession(api.Principal{Actor: "bob", Credential: "bob"})
	cases := []struct {
		name string
		h    http.Handler
		prep func(r *http.Request)
	}{
		{"baseline without the gate", noop, func(*http.Request) {}},
		{"open path", gated, func(r *http.Request) { r.URL.Path = "/healthz" }},
		{"bearer token", gated, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+bobTok) }},
		{"session cookie", gated, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: session}) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/api/items", nil)
			c.prep(r)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, r)
			}
			if w.Code != http.StatusNoContent {
				b.Fatalf("status %d", w.Code)
			}
		})
	}
}
