package forge

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGitHub answers GitHub's documented REST shapes (docs.github.com/rest, API version
// 2022-11-28) for one repository, acme/payments, whose git remote is a real `git http-backend`
// behind an httptest server that checks the Authorization header the way github.com takes a
// token over HTTPS (Basic, the token as password). GitHub itself is out of reach here.
type fakeGitHub struct {
	t     *testing.T
	token string
	api   *httptest.Server
	git   *httptest.Server
	bare  string // the remote's bare repository

	mu       sync.Mutex
	pulls    []map[string]any
	runs     []map[string]any
	statuses []map[string]any
	labels   map[int][]string
	comments map[int][]string
	reruns   []string
	readied  []string // node ids markPullRequestReadyForReview was sent
	requests []string // "METHOD path?query"
	auth     []string // Authorization headers the API saw
	gitAuth  []string // Authorization headers the git remote saw
	gitReqs  []string // "METHOD path" the git remote was sent (a push is POST …/git-receive-pack)
	bodies   []string // request bodies
	// Faults for the next requests, in order: "primary", "secondary", "429", "500", "401",
	// "graphql-rate-limit"; "none" lets one request through.
	faults []string
	// onPatch, when set, changes a pull request just before a PATCH of it is answered (someone
	// else acting between a client's read and its write).
	onPatch     func(p map[string]any)
	unmergeable bool
	now         time.Time
	// Reviews and review comments per pull request number, in GitHub's shapes, oldest first.
	reviews        map[int][]map[string]any
	reviewComments map[int][]map[string]any
	perms          map[string]string // collaborator permission by login; others are 404
	logins         map[string]string // GET /user: the login of each token
}

const ghRepo = "acme/payments"

func newFakeGitHub(t *testing.T, token string) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{t: t, token: token, labels: map[int][]string{}, comments: map[int][]string{},
		now: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), reviews: map[int][]map[string]any{},
		reviewComments: map[int][]map[string]any{}, perms: map[string]string{}, logins: map[string]string{token: "outerloop-bot"}}
	f.bare = filepath.Join(t.TempDir(), "acme", "payments.git")
	gitRun(t, filepath.Dir(filepath.Dir(f.bare)), "init", "-q", "--bare", f.bare)
	gitRun(t, f.bare, "config", "http.receivepack", "true")
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(filepath.Dir(f.bare)), "GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=x-access-token", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}}
	f.git = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		f.mu.Lock()
		f.gitAuth = append(f.gitAuth, h)
		f.gitReqs = append(f.gitReqs, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if h != "Basic "+base64.StdEncoding.EncodeToString([]byte("x-access-token:"+f.token)) {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(f.git.Close)
	f.api = httptest.NewServer(f.handler())
	t.Cleanup(f.api.Close)
	return f
}

func (f *fakeGitHub) cloneURL() string { return f.git.URL + "/acme/payments.git" }

// branchSHA is the remote's commit for a branch ("" when none).
func (f *fakeGitHub) branchSHA(branch string) string {
	out, err := exec.Command("git", "--git-dir", f.bare, "rev-parse", "--verify", "-q", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func (f *fakeGitHub) write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// fault answers the next queued fault, if any (GitHub's documented rate-limit answers).
func (f *fakeGitHub) fault(w http.ResponseWriter) bool {
	if len(f.faults) == 0 {
		return false
	}
	kind := f.faults[0]
	f.faults = f.faults[1:]
	switch kind {
	case "none":
		return false
	case "primary":
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Used", "5000")
		w.Header().Set("X-RateLimit-Resource", "core")
		// A reset already past in real time, so go-github's own pre-check lets the retry through.
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10))
		f.write(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
	case "primary-long":
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10))
		f.write(w, http.StatusTooManyRequests, map[string]string{"message": "API rate limit exceeded"})
	case "secondary":
		w.Header().Set("Retry-After", "0")
		f.write(w, http.StatusForbidden, map[string]string{"message": "You have exceeded a secondary rate limit.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
	case "secondary-429":
		w.Header().Set("Retry-After", "0")
		f.write(w, http.StatusTooManyRequests, map[string]string{"message": "You have exceeded a secondary rate limit.",
			"documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
	case "429":
		w.Header().Set("Retry-After", "0")
		f.write(w, http.StatusTooManyRequests, map[string]string{"message": "Too many requests"})
	case "graphql-rate-limit":
		// GraphQL's primary limit: 200, the headers of an exhausted limit, an error of type
		// RATE_LIMITED (docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api).
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Resource", "graphql")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10))
		f.write(w, http.StatusOK, map[string]any{"errors": []map[string]any{{"type": "RATE_LIMITED",
			"code": "graphql_rate_limit", "message": "API rate limit already exceeded for user ID 1."}}})
	case "500":
		f.write(w, http.StatusBadGateway, map[string]string{"message": "Server Error"})
	case "401":
		f.write(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials",
			"documentation_url": "https://docs.github.com/rest"})
	case "404":
		f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found",
			"documentation_url": "https://docs.github.com/rest"})
	default:
		f.t.Errorf("unknown fault %q", kind)
	}
	return true
}

func (f *fakeGitHub) pull(n int) map[string]any {
	for _, p := range f.pulls {
		if p["number"] == n {
			return p
		}
	}
	return nil
}

func (f *fakeGitHub) newPull(title, body, base, head string, draft bool) map[string]any {
	n := len(f.pulls) + 1
	p := map[string]any{"number": n, "id": 1000 + n, "node_id": ghNodeID(n), "state": "open", "draft": draft, "title": title, "body": body,
		"html_url": fmt.Sprintf("https://github.com/%s/pull/%d", ghRepo, n), "merged": false, "merged_at": nil,
		// An open pull request's merge_commit_sha is GitHub's test merge, not a merge.
		"merge_commit_sha": "feedfeedfeedfeedfeedfeedfeedfeedfeedfeed", "closed_at": nil,
		"base": map[string]any{"ref": base, "sha": f.branchSHA(base), "repo": map[string]any{"full_name": ghRepo}},
		"head": map[string]any{"ref": head, "sha": f.branchSHA(head), "label": "acme:" + head,
			"repo": map[string]any{"full_name": ghRepo}},
		"labels": []any{}}
	f.pulls = append(f.pulls, p)
	return p
}

// follow sets an open pull request's head.sha to its branch's commit: GitHub's head.sha is the
// most recent commit on the pull request's branch, so a push by anyone moves it (docs.github.com/rest/pulls/pulls#get-a-pull-request;
// #update-a-pull-request-branch calls it "the most recent commit on the pull request's branch").
// A closed or merged one keeps the head it ended with.
func (f *fakeGitHub) follow(p map[string]any) {
	if p["state"] != "open" {
		return
	}
	head := p["head"].(map[string]any)
	if sha := f.branchSHA(head["ref"].(string)); sha != "" {
		head["sha"] = sha
	}
}

// ghNodeID is pull request n's GraphQL global id (node_id), in GitHub's "PR_kwDO…" form.
func ghNodeID(n int) string { return fmt.Sprintf("PR_kwDOFake%04d", n) }

// closePull closes a pull request without merging (a person, fakeCloser, declining it).
func (f *fakeGitHub) closePull(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(n)
	p["state"], p["closed_at"] = "closed", f.now.Format(time.RFC3339)
}

// fakeCloser is who closes the fake's pull requests (the issue's closed_by).
const fakeCloser = "octo-maintainer"

// issue is pull request n as GET /issues/{n} shows it: a closed one names who closed it.
func (f *fakeGitHub) issue(n int) map[string]any {
	p := f.pull(n)
	if p == nil {
		return nil
	}
	is := map[string]any{"number": n, "state": p["state"], "title": p["title"], "body": p["body"], "closed_at": p["closed_at"],
		"html_url": p["html_url"], "pull_request": map[string]any{"html_url": p["html_url"], "merged_at": p["merged_at"]}}
	if p["state"] == "closed" {
		by := fakeCloser
		if m, ok := p["merged_by"].(map[string]any); ok {
			by, _ = m["login"].(string)
		}
		is["closed_by"] = map[string]any{"login": by, "type": "User"}
	}
	return is
}

func (f *fakeGitHub) handler() http.Handler {
	mux := http.NewServeMux()
	pre := "/repos/{owner}/{repo}"
	wrap := func(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var body []byte
			if r.Body != nil {
				body, _ = readAll(r)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
			f.auth = append(f.auth, r.Header.Get("Authorization"))
			f.bodies = append(f.bodies, string(body))
			if f.fault(w) {
				return
			}
			if strings.Contains(r.Pattern, "{owner}") && r.PathValue("owner")+"/"+r.PathValue("repo") != ghRepo {
				f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
				return
			}
			h(w, r, body)
		}
	}
	num := func(r *http.Request) int { n, _ := strconv.Atoi(r.PathValue("n")); return n }
	mux.HandleFunc("GET "+pre, wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		f.write(w, http.StatusOK, map[string]any{"id": 1, "full_name": ghRepo, "default_branch": "main",
			"clone_url": f.cloneURL(), "html_url": "https://github.com/" + ghRepo, "private": true})
	}))
	mux.HandleFunc("GET "+pre+"/pulls", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		q := r.URL.Query()
		var out []map[string]any
		for i := len(f.pulls) - 1; i >= 0; i-- { // sort=created, direction=desc
			p := f.pulls[i]
			head := p["head"].(map[string]any)
			if h := q.Get("head"); h != "" && h != "acme:"+head["ref"].(string) {
				continue
			}
			if s := q.Get("state"); s != "all" && s != "" && s != p["state"] {
				continue
			}
			f.follow(p)
			out = append(out, p)
		}
		f.write(w, http.StatusOK, out)
	}))
	mux.HandleFunc("POST "+pre+"/pulls", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var in struct {
			Title, Body, Base, Head string
			Draft                   bool
		}
		_ = json.Unmarshal(body, &in)
		for _, p := range f.pulls {
			if p["state"] == "open" && p["head"].(map[string]any)["ref"] == in.Head {
				f.write(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
					"errors":            []map[string]string{{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:" + in.Head + "."}},
					"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"})
				return
			}
		}
		if f.branchSHA(in.Head) == "" || in.Head == in.Base {
			f.write(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
				"errors":            []map[string]string{{"resource": "PullRequest", "field": "head", "code": "invalid"}},
				"documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"})
			return
		}
		f.write(w, http.StatusCreated, f.newPull(in.Title, in.Body, in.Base, in.Head, in.Draft))
	}))
	mux.HandleFunc("PATCH "+pre+"/pulls/{n}", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		p := f.pull(num(r))
		if p == nil {
			f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		f.follow(p) // the head it is closed with is the branch's
		if f.onPatch != nil {
			f.onPatch(p)
		}
		var in map[string]any
		_ = json.Unmarshal(body, &in)
		if st, ok := in["state"]; ok {
			if p["merged"] == true {
				f.write(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
					"errors":            []map[string]string{{"resource": "PullRequest", "field": "state", "code": "custom", "message": "state cannot be changed. The pull request has been merged."}},
					"documentation_url": "https://docs.github.com/rest/pulls/pulls#update-a-pull-request"})
				return
			}
			switch st {
			case "closed":
				if p["state"] == "open" {
					p["state"], p["closed_at"] = "closed", f.now.Format(time.RFC3339)
				}
			case "open":
				p["state"], p["closed_at"] = "open", nil
			}
		}
		for _, k := range []string{"title", "body"} {
			if v, ok := in[k]; ok {
				p[k] = v
			}
		}
		f.write(w, http.StatusOK, p)
	}))
	mux.HandleFunc("PUT "+pre+"/pulls/{n}/merge", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		p := f.pull(num(r))
		var in struct {
			SHA         string `json:"sha"`
			MergeMethod string `json:"merge_method"`
			CommitTitle string `json:"commit_title"`
		}
		_ = json.Unmarshal(body, &in)
		head := p["head"].(map[string]any)
		head["sha"] = f.branchSHA(head["ref"].(string)) // GitHub follows pushes
		switch {
		case p["state"] != "open" || f.unmergeable:
			f.write(w, http.StatusMethodNotAllowed, map[string]string{"message": "Pull Request is not mergeable",
				"documentation_url": "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"})
		case in.SHA != "" && in.SHA != head["sha"]:
			f.write(w, http.StatusConflict, map[string]string{"message": "Head branch was modified. Review and try the merge again.",
				"documentation_url": "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"})
		default:
			sha := fmt.Sprintf("%040x", 0xabc000+len(in.MergeMethod)) // a merge commit the fake makes up
			p["state"], p["merged"], p["merged_at"], p["closed_at"], p["merge_commit_sha"] = "closed", true,
				f.now.Format(time.RFC3339), f.now.Format(time.RFC3339), sha
			p["merged_by"] = map[string]any{"login": f.logins[f.token], "type": "User"}
			f.write(w, http.StatusOK, map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"})
		}
	}))
	mux.HandleFunc("POST "+pre+"/issues/{n}/labels", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var in []string
		if err := json.Unmarshal(body, &in); err != nil {
			f.write(w, http.StatusUnprocessableEntity, map[string]string{"message": "Invalid request."})
			return
		}
		n := num(r)
		var out []map[string]any
		f.labels[n] = append(f.labels[n], in...)
		for _, l := range f.labels[n] {
			out = append(out, map[string]any{"name": l, "color": "ededed"})
		}
		if p := f.pull(n); p != nil {
			p["labels"] = out
		}
		f.write(w, http.StatusOK, out)
	}))
	mux.HandleFunc("POST "+pre+"/issues/{n}/comments", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var in struct{ Body string }
		_ = json.Unmarshal(body, &in)
		f.comments[num(r)] = append(f.comments[num(r)], in.Body)
		f.write(w, http.StatusCreated, map[string]any{"id": 1, "body": in.Body})
	}))
	mux.HandleFunc("GET "+pre+"/commits/{ref}/check-runs", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.URL.Query().Get("filter") != "all" {
			f.t.Errorf("check runs listed without filter=all: %s", r.URL)
		}
		var out []map[string]any
		for _, c := range f.runs {
			if c["head_sha"] == r.PathValue("ref") {
				out = append(out, c)
			}
		}
		f.write(w, http.StatusOK, map[string]any{"total_count": len(out), "check_runs": out})
	}))
	mux.HandleFunc("GET "+pre+"/commits/{ref}/statuses", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		var out []map[string]any
		for _, s := range f.statuses {
			if s["sha"] == r.PathValue("ref") {
				out = append(out, s)
			}
		}
		f.write(w, http.StatusOK, out)
	}))
	mux.HandleFunc("POST "+pre+"/check-runs/{id}/rerequest", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		f.reruns = append(f.reruns, r.PathValue("id"))
		f.write(w, http.StatusCreated, map[string]any{})
	}))
	mux.HandleFunc("GET "+pre+"/pulls/{n}", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if p := f.pull(num(r)); p != nil {
			f.follow(p)
			f.write(w, http.StatusOK, p)
			return
		}
		f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found",
			"documentation_url": "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"})
	}))
	mux.HandleFunc("GET "+pre+"/issues/{n}", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if is := f.issue(num(r)); is != nil {
			f.write(w, http.StatusOK, is)
			return
		}
		f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found",
			"documentation_url": "https://docs.github.com/rest/issues/issues#get-an-issue"})
	}))
	// Reviews in chronological order, paged (per_page default 30, at most 100).
	mux.HandleFunc("GET "+pre+"/pulls/{n}/reviews", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		f.writePage(w, r, f.reviews[num(r)])
	}))
	// Review comments: ascending by id unless sort=created and direction=desc.
	mux.HandleFunc("GET "+pre+"/pulls/{n}/comments", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		list := f.reviewComments[num(r)]
		if q := r.URL.Query(); q.Get("sort") == "created" && q.Get("direction") == "desc" {
			list = slices.Clone(list)
			slices.Reverse(list)
		}
		f.writePage(w, r, list)
	}))
	mux.HandleFunc("GET "+pre+"/collaborators/{user}/permission", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		user := r.PathValue("user")
		p, ok := f.perms[user]
		if !ok {
			f.write(w, http.StatusNotFound, map[string]string{"message": "Not Found",
				"documentation_url": "https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user"})
			return
		}
		legacy := map[string]string{"maintain": "write", "triage": "read"}[p]
		f.write(w, http.StatusOK, map[string]any{"permission": cmpOr(legacy, p), "role_name": p,
			"user": map[string]any{"login": user, "id": 7, "type": "User"}})
	}))
	// GraphQL: markPullRequestReadyForReview with the pull request's node id in a variable,
	// nothing else. GraphQL answers its errors with 200 and an errors list: a query that does
	// not validate has no type; a node id that resolves to nothing is NOT_FOUND.
	mux.HandleFunc("POST /graphql", wrap(func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			f.write(w, http.StatusUnauthorized, map[string]string{"message": "This endpoint requires you to be authenticated.",
				"documentation_url": "https://docs.github.com/graphql/guides/forming-calls-with-graphql#authenticating-with-graphql"})
			return
		}
		var in struct {
			Query     string         `json:"query"`
			Variables map[string]any `json:"variables"`
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Query == "" {
			f.write(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON",
				"documentation_url": "https://docs.github.com/graphql"})
			return
		}
		m := markReadyQuery.FindStringSubmatch(in.Query)
		if m == nil || m[1] != m[2] {
			f.write(w, http.StatusOK, map[string]any{"errors": []map[string]any{{"path": []string{"query"},
				"extensions": map[string]any{"code": "undefinedField", "typeName": "Query"},
				"locations":  []map[string]int{{"line": 1, "column": 1}},
				"message":    "the fake answers markPullRequestReadyForReview { pullRequest { isDraft } } only"}}})
			return
		}
		id, _ := in.Variables[m[1]].(string)
		var p map[string]any
		for _, q := range f.pulls {
			if q["node_id"] == id {
				p = q
			}
		}
		if p == nil {
			f.write(w, http.StatusOK, map[string]any{"data": map[string]any{"markPullRequestReadyForReview": nil},
				"errors": []map[string]any{{"type": "NOT_FOUND", "path": []string{"markPullRequestReadyForReview"},
					"locations": []map[string]int{{"line": 2, "column": 3}},
					"message":   "Could not resolve to a node with the global id of '" + id + "'"}}})
			return
		}
		p["draft"] = false
		f.readied = append(f.readied, id)
		f.write(w, http.StatusOK, map[string]any{"data": map[string]any{"markPullRequestReadyForReview": map[string]any{
			"pullRequest": map[string]any{"isDraft": false}}}})
	}))
	mux.HandleFunc("GET /user", wrap(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		login, ok := f.logins[tok]
		if !ok {
			f.write(w, http.StatusUnauthorized, map[string]string{"message": "Requires authentication",
				"documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user"})
			return
		}
		f.write(w, http.StatusOK, map[string]any{"login": login, "id": 1, "type": "User"})
	}))
	return mux
}

// writePage answers one page of list the way GitHub pages (page, per_page; a Link header with
// next, last, first and prev).
func (f *fakeGitHub) writePage(w http.ResponseWriter, r *http.Request, list []map[string]any) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	last := max((len(list)+per-1)/per, 1)
	link := func(p int, rel string) string {
		u := *r.URL
		v := u.Query()
		v.Set("page", strconv.Itoa(p))
		v.Set("per_page", strconv.Itoa(per))
		u.RawQuery = v.Encode()
		return "<" + f.api.URL + u.String() + `>; rel="` + rel + `"`
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
	lo, hi := min((page-1)*per, len(list)), min(page*per, len(list))
	f.write(w, http.StatusOK, append([]map[string]any{}, list[lo:hi]...))
}

// ghReview is a review in GitHub's shape; a PENDING one has no submitted_at.
func ghReview(id int64, user, state, body, commit string, at time.Time) map[string]any {
	m := map[string]any{"id": id, "node_id": fmt.Sprintf("PRR_%d", id), "user": map[string]any{"login": user, "id": 7, "type": "User"},
		"body": body, "state": state, "commit_id": commit, "author_association": "COLLABORATOR",
		"html_url":         fmt.Sprintf("https://github.com/%s/pull/1#pullrequestreview-%d", ghRepo, id),
		"pull_request_url": "https://api.github.com/repos/" + ghRepo + "/pulls/1"}
	if state != "PENDING" {
		m["submitted_at"] = at.Format(time.RFC3339)
	}
	return m
}

// ghReviewComment is a review comment in GitHub's shape; line 0 is an outdated comment (line
// null, original_line kept).
func ghReviewComment(id, review int64, user, path string, line, originalLine int, body string, at time.Time) map[string]any {
	m := map[string]any{"id": id, "node_id": fmt.Sprintf("PRRC_%d", id), "pull_request_review_id": review,
		"diff_hunk": "@@ -1,3 +1,4 @@", "path": path, "commit_id": strings.Repeat("c", 40),
		"original_commit_id": strings.Repeat("c", 40), "user": map[string]any{"login": user, "id": 7, "type": "User"},
		"body": body, "created_at": at.Format(time.RFC3339), "updated_at": at.Format(time.RFC3339),
		"html_url":         fmt.Sprintf("https://github.com/%s/pull/1#discussion_r%d", ghRepo, id),
		"pull_request_url": "https://api.github.com/repos/" + ghRepo + "/pulls/1", "author_association": "COLLABORATOR",
		"original_line": originalLine, "side": "RIGHT", "subject_type": "line"}
	if line != 0 {
		m["line"] = line
	} else {
		m["line"] = nil
	}
	return m
}

// markReadyQuery is the mutation the fake serves: the variable it declares (1) and the one it
// passes as pullRequestId (2), which must be the same.
var markReadyQuery = regexp.MustCompile(`^\s*mutation\s*\(\s*\$(\w+)\s*:\s*ID!\s*\)\s*\{\s*markPullRequestReadyForReview\s*\(\s*input\s*:\s*\{\s*pullRequestId\s*:\s*\$(\w+)\s*\}\s*\)\s*\{\s*pullRequest\s*\{\s*isDraft\s*\}\s*\}\s*\}\s*$`)

func readAll(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}

func checkRun(id int, name, sha, status, conclusion string, started time.Time) map[string]any {
	m := map[string]any{"id": id, "name": name, "head_sha": sha, "status": status, "started_at": started.Format(time.RFC3339),
		"html_url": fmt.Sprintf("https://github.com/acme/payments/runs/%d", id),
		"output":   map[string]any{"title": name + " " + cmpOr(conclusion, status), "summary": "details"}}
	if conclusion != "" {
		m["conclusion"] = conclusion
	}
	return m
}

func commitStatus(id int, context, sha, state, desc string, at time.Time) map[string]any {
	return map[string]any{"id": id, "context": context, "sha": sha, "state": state, "description": desc,
		"target_url": "https://ci.example.com/" + context, "created_at": at.Format(time.RFC3339)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// What the publisher's people tests (package forge_test) read of the fake, beside export_test.go.

// FakeRequest is one request the fake's API was sent.
type FakeRequest struct {
	Line string // "METHOD path?query"
	Auth string // its Authorization header
	Body string
}

// Sent is every request the API was sent, in order.
func (f *fakeGitHub) Sent() []FakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FakeRequest, len(f.requests))
	for i := range f.requests {
		out[i] = FakeRequest{Line: f.requests[i], Auth: f.auth[i], Body: f.bodies[i]}
	}
	return out
}

// GitSent is every "METHOD path" the git remote was sent, in order.
func (f *fakeGitHub) GitSent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.gitReqs)
}

// Comments are the bodies of pull request n's issue comments, oldest first.
func (f *fakeGitHub) Comments(n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.comments[n])
}

// Pull is a copy of pull request n as the API would answer it now (nil when there is none):
// state, draft, title, body, node_id, head.
func (f *fakeGitHub) Pull(n int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pull(n)
	if p == nil {
		return nil
	}
	f.follow(p)
	out := maps.Clone(p)
	out["head"] = maps.Clone(p["head"].(map[string]any))
	return out
}

// Readied is the node ids markPullRequestReadyForReview was sent for, in order.
func (f *fakeGitHub) Readied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.readied)
}
