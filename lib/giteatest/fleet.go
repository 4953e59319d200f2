package giteatest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// NewFleetOrg creates a private organisation of twelve repositories, default branch main:
// r00…r09 with the topics "fleet" and "go" (r08 archived, r09 empty: no commit), x10 and x11
// with the topic "other". A fleet of topic go is r00…r09 less what discovery skips.
func (s *Server) NewFleetOrg(t testing.TB) string {
	t.Helper()
	org := "fleet-" + randomHex(5)
	s.API(t, http.MethodPost, "/orgs", map[string]any{"username": org, "visibility": "private"}, http.StatusCreated, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	ctx := context.Background()
	for i := range 12 {
		wg.Go(func() {
			name, topics := fmt.Sprintf("r%02d", i), []string{"fleet", "go"}
			if i >= 10 {
				name, topics = fmt.Sprintf("x%02d", i), []string{"other"}
			}
			body := map[string]any{"name": name, "default_branch": "main", "private": true, "auto_init": i != 9}
			if code, b, err := s.Do(ctx, http.MethodPost, "/orgs/"+org+"/repos", body); err != nil || code != http.StatusCreated {
				errs <- fmt.Errorf("create %s: %d %v %s", name, code, err, b)
				return
			}
			if code, b, err := s.Do(ctx, http.MethodPut, "/repos/"+org+"/"+name+"/topics", map[string]any{"topics": topics}); err != nil || code != http.StatusNoContent {
				errs <- fmt.Errorf("topics of %s: %d %v %s", name, code, err, b)
				return
			}
			if i == 8 {
				if code, b, err := s.Do(ctx, http.MethodPatch, "/repos/"+org+"/"+name, map[string]any{"archived": true}); err != nil || code != http.StatusOK {
					errs <- fmt.Errorf("archive %s: %d %v %s", name, code, err, b)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("giteatest: %v", err)
	}
	return org
}

// NewFleetMember creates a member of org (a NewFleetOrg) who may write every repository of it
// but unreadable, and may only read the issues of that one: the organisation's listing shows it
// to the member, and says the member cannot pull it (Gitea's permissions.pull is the code
// unit's). Its token also reads the organisation.
func (s *Server) NewFleetMember(t testing.TB, org, unreadable string) *User {
	t.Helper()
	u := s.newUser(t, "member", "write:repository", "write:issue", "read:user", "read:organization")
	var repos []struct{ Name string }
	s.API(t, http.MethodGet, "/orgs/"+org+"/repos?limit=50", nil, http.StatusOK, &repos)
	team := func(name string, units map[string]string, repos ...string) {
		var tm struct{ ID int64 }
		s.API(t, http.MethodPost, "/orgs/"+org+"/teams", map[string]any{"name": name, "units_map": units,
			"includes_all_repositories": false}, http.StatusCreated, &tm)
		s.API(t, http.MethodPut, fmt.Sprintf("/teams/%d/members/%s", tm.ID, u.Name), nil, http.StatusNoContent, nil)
		for _, r := range repos {
			s.API(t, http.MethodPut, fmt.Sprintf("/teams/%d/repos/%s/%s", tm.ID, org, r), nil, http.StatusNoContent, nil)
		}
	}
	var writable []string
	for _, r := range repos {
		if r.Name != unreadable {
			writable = append(writable, r.Name)
		}
	}
	team("writers", map[string]string{"repo.code": "write", "repo.pulls": "write", "repo.issues": "write"}, writable...)
	team("triage", map[string]string{"repo.issues": "read"}, unreadable)
	return u
}
