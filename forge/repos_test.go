package forge

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"outerloop/lib/giteatest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// countingTransport counts the requests whose path contains sub.
type countingTransport struct {
	sub  string
	base http.RoundTripper // its own: another test's httptest server closes the default one's connections
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, c.sub) {
		c.n.Add(1)
	}
	return c.base.RoundTrip(r)
}

func randomSuffix() string { return strings.ToLower(rand.Text()[:10]) }

func TestGiteaListsAnOrganisationsRepositoriesPageByPage(t *testing.T) {
	t.Parallel()
	srv := giteatest.Shared(t)
	org := srv.NewFleetOrg(t)
	e := &giteaEnv{srv: srv}
	list := func(t *testing.T, pageSize int, q RepoQuery) ([]ListedRepo, int) {
		t.Helper()
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		ct := &countingTransport{sub: "/orgs/" + org + "/repos", base: tr}
		f := e.forge(t, srv.URL, srv.Getenv("GITEA_TOKEN"), func(c *Config) {
			c.listPageSize, c.HTTPClient = pageSize, &http.Client{Transport: ct}
		}).(RepoLister)
		rs, err := f.ListRepos(bg, q)
		if err != nil {
			t.Fatal(err)
		}
		return rs, int(ct.n.Load())
	}

	t.Run("AllOnPagesOfFive", func(t *testing.T) {
		rs, pages := list(t, 5, RepoQuery{Owner: org})
		if pages != 3 {
			t.Fatalf("%d pages of 5 for 12 repositories, want 3", pages)
		}
		var names []string
		for _, r := range rs {
			names = append(names, r.Repo)
			_, name, _ := strings.Cut(r.Repo, "/")
			if !r.CanPull || r.DefaultBranch != "main" || !strings.HasSuffix(r.CloneURL, "/"+org+"/"+name+".git") {
				t.Errorf("%+v", r)
			}
			if r.Archived != (name == "r08") || r.Empty != (name == "r09") {
				t.Errorf("%s: archived %v, empty %v", name, r.Archived, r.Empty)
			}
			if want := name[0] == 'r'; slices.Contains(r.Topics, "fleet") != want {
				t.Errorf("%s: topics %v", name, r.Topics)
			}
		}
		slices.Sort(names)
		if len(names) != 12 || names[0] != org+"/r00" || names[11] != org+"/x11" || len(slices.Compact(names)) != 12 {
			t.Fatalf("listed %v", names)
		}
	})
	t.Run("TheTotalCountEndsAFullLastPage", func(t *testing.T) {
		rs, pages := list(t, 4, RepoQuery{Owner: org})
		if len(rs) != 12 || pages != 3 {
			t.Fatalf("%d repositories on %d pages of 4, want 12 on 3 (no empty fourth page)", len(rs), pages)
		}
	})
	t.Run("ATopicKeepsItsRepositories", func(t *testing.T) {
		rs, _ := list(t, 50, RepoQuery{Owner: org, Topic: "Fleet"})
		if len(rs) != 10 {
			t.Fatalf("%d repositories with the topic, want 10: %+v", len(rs), rs)
		}
		for _, r := range rs {
			if !strings.Contains(r.Repo, "/r") {
				t.Fatalf("%s has no topic fleet", r.Repo)
			}
		}
	})
}

// A member whose only team on one repository reads its issues, not its code: the listing shows
// the repository, and says it cannot be pulled.
func TestGiteaListsARepositoryTheTokenCannotPull(t *testing.T) {
	t.Parallel()
	srv := giteatest.Shared(t)
	org := srv.NewFleetOrg(t)
	member := srv.NewFleetMember(t, org, "r03")
	f := (&giteaEnv{srv: srv}).forge(t, srv.URL, member.Getenv("GITEA_TOKEN")).(RepoLister)
	rs, err := f.ListRepos(bg, RepoQuery{Owner: org, Topic: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 10 {
		t.Fatalf("the member lists %d repositories of topic go, want 10", len(rs))
	}
	for _, r := range rs {
		if want := r.Repo != org+"/r03"; r.CanPull != want {
			t.Fatalf("%s: can pull %v, want %v", r.Repo, r.CanPull, want)
		}
	}
}

func TestGiteaListsAUsersRepositories(t *testing.T) {
	t.Parallel()
	srv := giteatest.Shared(t)
	repo := srv.NewRepo(t, "mine")
	f := (&giteaEnv{srv: srv}).forge(t, srv.URL, srv.Getenv("GITEA_TOKEN")).(RepoLister)
	rs, err := f.ListRepos(bg, RepoQuery{Owner: srv.Admin})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rs, func(r ListedRepo) bool { return r.Repo == repo.Slug })
	if i < 0 {
		t.Fatalf("%s not among the user's %d repositories", repo.Slug, len(rs))
	}
	if r := rs[i]; !r.Empty || !r.CanPull || r.CloneURL != repo.CloneURL {
		t.Fatalf("%+v", r)
	}
	_, err = f.ListRepos(bg, RepoQuery{Owner: "nobody-" + randomSuffix()})
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

// ghRepoJSON is one repository as GET /orgs/{org}/repos answers it (the fields read, and a few
// around them).
func ghRepoJSON(owner string, i int, topics []string, archived bool, size int, perms map[string]bool) map[string]any {
	name := fmt.Sprintf("svc-%02d", i)
	r := map[string]any{"id": 1000 + i, "node_id": "R_" + name, "name": name, "full_name": owner + "/" + name,
		"private": perms != nil, "owner": map[string]any{"login": owner, "type": "Organization"},
		"html_url":  "https://github.com/" + owner + "/" + name,
		"clone_url": "https://github.com/" + owner + "/" + name + ".git", "default_branch": "main",
		"archived": archived, "disabled": false, "size": size, "topics": topics, "visibility": "private"}
	if perms != nil {
		r["permissions"] = perms
	}
	return r
}

func TestGitHubListsRepositoriesFollowingTheLinkHeader(t *testing.T) {
	t.Parallel()
	const org = "acme"
	all := []map[string]any{}
	read := map[string]bool{"admin": false, "maintain": false, "push": false, "triage": false, "pull": true}
	for i := range 7 {
		all = append(all, ghRepoJSON(org, i, []string{"fleet"}, i == 2, 120+i, read))
	}
	all = append(all, ghRepoJSON(org, 7, []string{"fleet", "go"}, false, 0, read))                      // empty
	all = append(all, ghRepoJSON(org, 8, []string{"fleet"}, false, 10, map[string]bool{"pull": false})) // unreadable
	all = append(all, ghRepoJSON(org, 9, nil, false, 10, read))                                         // no topic
	var mu sync.Mutex
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path == "/orgs/someone/repos" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/repos/repos#list-organization-repositories"})
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if r.URL.Path == "/users/someone/repos" {
			// The anonymous shape of a public repository: no permissions.
			_ = json.NewEncoder(w).Encode([]map[string]any{ghRepoJSON("someone", 0, nil, false, 5, nil)})
			return
		}
		if r.URL.Path != "/orgs/acme/repos" {
			http.NotFound(w, r)
			return
		}
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		from, to := min((page-1)*per, len(all)), min(page*per, len(all))
		last := (len(all) + per - 1) / per
		link := func(p int, rel string) string {
			return fmt.Sprintf(`<http://%s%s?page=%d&per_page=%d>; rel="%s"`, r.Host, r.URL.Path, p, per, rel)
		}
		var links []string
		if page < last {
			links = append(links, link(page+1, "next"), link(last, "last"))
		}
		if page > 1 {
			links = append(links, link(1, "first"), link(page-1, "prev"))
		}
		if len(links) > 0 {
			w.Header().Set("Link", strings.Join(links, ", "))
		}
		_ = json.NewEncoder(w).Encode(all[from:to])
	}))
	t.Cleanup(api.Close)
	f, err := New(Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
		BaseURL: api.URL, TokenEnv: "T"}, Getenv: func(string) string { return ghToken }, Clock: &recClock{},
		HTTPClient: api.Client(), listPageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	l := f.(RepoLister)

	rs, err := l.ListRepos(bg, RepoQuery{Owner: org, Topic: "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4 || !strings.Contains(seen[0], "per_page=3") || !strings.Contains(seen[3], "page=4") {
		t.Fatalf("requests %v, want 4 pages of 3", seen)
	}
	if len(rs) != 9 {
		t.Fatalf("%d repositories with the topic, want 9", len(rs))
	}
	byName := map[string]ListedRepo{}
	for _, r := range rs {
		byName[r.Repo] = r
	}
	if r := byName["acme/svc-02"]; !r.Archived || r.Empty || !r.CanPull || r.CloneURL != "https://github.com/acme/svc-02.git" || r.DefaultBranch != "main" {
		t.Fatalf("archived one: %+v", r)
	}
	if r := byName["acme/svc-07"]; !r.Empty || !slices.Equal(r.Topics, []string{"fleet", "go"}) {
		t.Fatalf("empty one: %+v", r)
	}
	if r := byName["acme/svc-08"]; r.CanPull {
		t.Fatalf("unreadable one: %+v", r)
	}
	if _, ok := byName["acme/svc-09"]; ok {
		t.Fatal("a repository without the topic was kept")
	}
	if rs, _ := l.ListRepos(bg, RepoQuery{Owner: org}); len(rs) != 10 {
		t.Fatalf("%d repositories without a topic filter, want 10", len(rs))
	}

	// A user: the organisation endpoint is 404, the user's is read; a public repository listed
	// without permissions is readable.
	rs, err = l.ListRepos(bg, RepoQuery{Owner: "someone"})
	if err != nil || len(rs) != 1 || !rs[0].CanPull || rs[0].Repo != "someone/svc-00" {
		t.Fatalf("user listing %+v, %v", rs, err)
	}
}
