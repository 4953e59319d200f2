package giteatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// User is a second account on the server, for what Gitea does not let one account do alone (a
// pull request's author cannot approve it). Its token never appears in a log or a URL.
type User struct {
	Name string // login

	srv   *Server
	token string
}

// Token returns the user's access token (repository, issue and user scopes). Do not log it.
func (u *User) Token() string { return u.token }

// Getenv returns a getenv function that answers name with the user's token, and nothing else.
func (u *User) Getenv(name string) func(string) string {
	return func(k string) string {
		if k == name {
			return u.token
		}
		return ""
	}
}

// NewUser creates a user whose name starts with prefix (the admin API, POST /admin/users),
// then an access token for it with its own password (POST /users/{name}/tokens, basic auth).
func (s *Server) NewUser(t testing.TB, prefix string) *User {
	t.Helper()
	return s.newUser(t, prefix, "write:repository", "write:issue", "read:user")
}

func (s *Server) newUser(t testing.TB, prefix string, scopes ...string) *User {
	t.Helper()
	name, password := prefix+"-"+randomHex(4), randomHex(16)+"Aa1!"
	s.API(t, http.MethodPost, "/admin/users", map[string]any{"username": name, "email": name + "@example.com",
		"password": password, "must_change_password": false}, http.StatusCreated, nil)
	code, b, err := doAs(context.Background(), s.URL, func(r *http.Request) { r.SetBasicAuth(name, password) },
		http.MethodPost, "/users/"+name+"/tokens", map[string]any{"name": "test-" + randomHex(4),
			"scopes": scopes})
	if err != nil || code != http.StatusCreated {
		t.Fatalf("giteatest: create a token for %s: HTTP %d, %v: %s", name, code, err, b)
	}
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.SHA1 == "" {
		t.Fatalf("giteatest: the token answer for %s has no token (%v)", name, err)
	}
	return &User{Name: name, srv: s, token: tok.SHA1}
}

// AddCollaborator gives user permission (read, write or admin) on r.
func (s *Server) AddCollaborator(t testing.TB, r Repo, user, permission string) {
	t.Helper()
	s.API(t, http.MethodPut, "/repos/"+r.Slug+"/collaborators/"+user, map[string]string{"permission": permission},
		http.StatusNoContent, nil)
}

// NewCollaborator is NewUser, added to r with write access: a reviewer who can approve.
func (s *Server) NewCollaborator(t testing.TB, r Repo, prefix string) *User {
	t.Helper()
	u := s.NewUser(t, prefix)
	s.AddCollaborator(t, r, u.Name, "write")
	return u
}

// API calls Gitea's REST API (path after /api/v1) as the user, as Server.API does as the admin.
func (u *User) API(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	code, b, err := u.Do(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("giteatest: as %s: %s %s: %v", u.Name, method, path, err)
	}
	if code != want {
		t.Fatalf("giteatest: as %s: %s %s: HTTP %d, want %d: %s", u.Name, method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("giteatest: as %s: %s %s: %v", u.Name, method, path, err)
		}
	}
}

// Do is API without the test: it returns the status and body.
func (u *User) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	return doAs(ctx, u.srv.URL, func(r *http.Request) { r.Header.Set("Authorization", "token "+u.token) }, method, path, body)
}

// doAs sends one API request authenticated by auth.
func doAs(ctx context.Context, base string, auth func(*http.Request), method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+"/api/v1"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	auth(req)
	req.Header.Set("Content-Type", "application/json")
	// Generous: on a loaded machine (the full suite on 2 cores) a repository's creation has
	// taken over 30 s; a fixture call that times out fails a test that is not about it.
	resp, err := (&http.Client{Timeout: apiTimeout}).Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
