package giteatest

import (
	"net/http"
	"strings"
	"testing"
)

func TestNewCollaboratorCallsTheAPIAsThemselvesWithWriteAccess(t *testing.T) {
	t.Parallel()
	s := Shared(t)
	r := s.NewRepo(t, "collab")
	u := s.NewCollaborator(t, r, "reviewer")
	if !strings.HasPrefix(u.Name, "reviewer-") || u.Token() == "" || u.Token() == s.Token() {
		t.Fatalf("user %q with a token of its own? %v", u.Name, u.Token() != s.Token())
	}
	var me struct {
		Login string `json:"login"`
	}
	u.API(t, http.MethodGet, "/user", nil, http.StatusOK, &me)
	if me.Login != u.Name {
		t.Fatalf("GET /user as the new user: %q", me.Login)
	}
	var perm struct {
		Permission string `json:"permission"`
	}
	s.API(t, http.MethodGet, "/repos/"+r.Slug+"/collaborators/"+u.Name+"/permission", nil, http.StatusOK, &perm)
	if perm.Permission != "write" {
		t.Fatalf("permission %q, want write", perm.Permission)
	}
	// The private repository is visible to the collaborator.
	u.API(t, http.MethodGet, "/repos/"+r.Slug, nil, http.StatusOK, nil)
	if f := u.Getenv("T"); f("T") != u.Token() || f("GITEA_TOKEN") != "" {
		t.Fatal("Getenv answers only its variable")
	}
}
