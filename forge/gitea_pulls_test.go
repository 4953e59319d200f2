package forge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"outerloop/workitems"
)

// openPR pushes a commit on a new branch off main and opens a pull request from it.
func (e *giteaEnv) openPR(t *testing.T, branch, title string, draft bool) (*PullRequest, string) {
	t.Helper()
	sha := e.branchCommit(t, branch, strings.ReplaceAll(branch, "/", "-")+".txt", branch+"\n")
	if err := e.push(t, sha, branch, ""); err != nil {
		t.Fatal(err)
	}
	pr, err := e.f.CreatePullRequest(bg, e.repo.Slug, NewPullRequest{Title: title, Base: "main", Head: branch, Draft: draft})
	if err != nil {
		t.Fatal(err)
	}
	return pr, sha
}

// apiPull is pull request n as Gitea's API shows it, read past the client under test.
type apiPull struct {
	State  string `json:"state"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Draft  bool   `json:"draft"`
	Merged bool   `json:"merged"`
}

func (e *giteaEnv) apiPull(t *testing.T, n int) apiPull {
	t.Helper()
	var p apiPull
	e.srv.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d", e.repo.Slug, n), nil, http.StatusOK, &p)
	return p
}

// patchCounter is a client of e's Gitea through a proxy that counts the PATCHes of pull
// requests it passes on.
func (e *giteaEnv) patchCounter(t *testing.T) (Forge, *atomic.Int32) {
	t.Helper()
	target, _ := url.Parse(e.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var patches atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v1/repos/"+e.repo.Slug+"/pulls/") {
			patches.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	return e.forge(t, proxy.URL, e.srv.Getenv("GITEA_TOKEN")), &patches
}

func TestGiteaClosesAnOpenPullRequestAndRefusesAMergedOne(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "close")
	f, patches := e.patchCounter(t)
	pr, _ := e.openPR(t, "outerloop/obsolete", "Obsolete", false)

	closed, err := f.ClosePullRequest(bg, e.repo.Slug, pr.Number)
	if err != nil {
		t.Fatal(err)
	}
	if closed.State != workitems.PRClosed || closed.Number != pr.Number || closed.Merged() {
		t.Fatalf("closed %+v", closed)
	}
	if got := e.apiPull(t, pr.Number); got.State != "closed" || got.Merged {
		t.Fatalf("Gitea shows %+v", got)
	}
	if got, err := e.f.PullRequest(bg, e.repo.Slug, pr.Number); err != nil || got.State != workitems.PRClosed || got.ClosedBy != e.srv.Admin {
		t.Fatalf("read back %+v, %v", got, err)
	}

	// Closed already: returned as it is, nothing sent.
	again, err := f.ClosePullRequest(bg, e.repo.Slug, pr.Number)
	if err != nil || again.State != workitems.PRClosed {
		t.Fatalf("closing twice: %+v, %v", again, err)
	}
	if got := patches.Load(); got != 1 {
		t.Fatalf("%d PATCHes, want the one close", got)
	}

	landed, sha := e.openPR(t, "outerloop/landed", "Landed", false)
	if _, err := e.f.Merge(bg, e.repo.Slug, landed.Number, MergeRequest{Method: workitems.MergeMerge, ExpectedHeadSHA: sha}); err != nil {
		t.Fatal(err)
	}
	_, err = f.ClosePullRequest(bg, e.repo.Slug, landed.Number)
	wantErr(t, err, workitems.ClassInvalidInput, ErrNotOpen)
	if got := e.apiPull(t, landed.Number); !got.Merged {
		t.Fatalf("the merged pull request is now %+v", got)
	}

	_, err = f.ClosePullRequest(bg, e.repo.Slug, 999)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestGiteaMarksADraftReadyByItsTitle(t *testing.T) {
	t.Parallel()
	e := newGiteaEnv(t, "ready")
	f, patches := e.patchCounter(t)
	pr, _ := e.openPR(t, "outerloop/draft", "Bump deps", true)
	if got := e.apiPull(t, pr.Number); !got.Draft || got.Title != "WIP: Bump deps" {
		t.Fatalf("opened as %+v: want a WIP draft", got)
	}

	ready, err := f.MarkReady(bg, e.repo.Slug, pr.Number)
	if err != nil {
		t.Fatal(err)
	}
	if ready.Draft || ready.Title != "Bump deps" || ready.State != workitems.PROpen {
		t.Fatalf("marked ready: %+v", ready)
	}
	if got := e.apiPull(t, pr.Number); got.Draft || got.Title != "Bump deps" {
		t.Fatalf("Gitea shows %+v", got)
	}

	// Ready already: returned unchanged, nothing sent.
	n := patches.Load()
	again, err := f.MarkReady(bg, e.repo.Slug, pr.Number)
	if err != nil || again.Draft || again.Title != "Bump deps" || patches.Load() != n {
		t.Fatalf("again: %+v, %v (%d PATCHes, was %d)", again, err, patches.Load(), n)
	}

	// Edits no longer keep it a draft: it is not one.
	body, title := "evidence: all green", "Bump deps (attempt 2)"
	if p, err := f.EditPullRequest(bg, e.repo.Slug, pr.Number, PullRequestEdit{Body: &body}); err != nil || p.Draft || p.Title != "Bump deps" {
		t.Fatalf("body edited: %+v, %v", p, err)
	}
	if p, err := f.EditPullRequest(bg, e.repo.Slug, pr.Number, PullRequestEdit{Title: &title}); err != nil || p.Draft || p.Title != title {
		t.Fatalf("title edited: %+v, %v", p, err)
	}
	if got := e.apiPull(t, pr.Number); got.Draft || got.Title != title || got.Body != body {
		t.Fatalf("Gitea shows %+v", got)
	}

	// Each of Gitea's prefixes, in any case, and more than one: a person may have written them.
	setTitle := func(s string) {
		t.Helper()
		e.srv.API(t, http.MethodPatch, fmt.Sprintf("/repos/%s/pulls/%d", e.repo.Slug, pr.Number), map[string]string{"title": s},
			http.StatusCreated, nil)
	}
	for in, want := range map[string]string{"[WIP] Lint": "Lint", "wip:Vet": "Vet", "WIP: [wip]  Both": "Both", "[WIP]WIP:x": "x"} {
		setTitle(in)
		if got := e.apiPull(t, pr.Number); !got.Draft {
			t.Fatalf("Gitea does not read %q as a draft", in)
		}
		p, err := f.MarkReady(bg, e.repo.Slug, pr.Number)
		if err != nil || p.Draft || p.Title != want {
			t.Fatalf("%q marked ready: %+v, %v; want title %q", in, p, err, want)
		}
		if got := e.apiPull(t, pr.Number); got.Draft || got.Title != want {
			t.Fatalf("%q: Gitea shows %+v", in, got)
		}
	}

	// A title that is nothing but the prefix cannot lose it (Gitea keeps a title set to "").
	setTitle("WIP:")
	_, err = f.MarkReady(bg, e.repo.Slug, pr.Number)
	wantErr(t, err, workitems.ClassInvalidInput, nil)
	if got := e.apiPull(t, pr.Number); !got.Draft || got.Title != "WIP:" {
		t.Fatalf("after a refused MarkReady Gitea shows %+v", got)
	}

	// A closed draft is not made ready.
	e.srv.ClosePullRequest(t, e.repo, pr.Number)
	_, err = f.MarkReady(bg, e.repo.Slug, pr.Number)
	wantErr(t, err, workitems.ClassInvalidInput, ErrNotOpen)
	_, err = f.MarkReady(bg, e.repo.Slug, 999)
	wantErr(t, err, workitems.ClassNotFound, ErrNotFound)
}

func TestCutWIPRemovesGiteasDefaultPrefixes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]struct {
		title string
		cut   bool
	}{
		"WIP: a": {"a", true}, "WIP:a": {"a", true}, "[WIP] a": {"a", true}, "[WIP]a": {"a", true},
		"wip: a": {"a", true}, "[wip] a": {"a", true}, "WIP: [WIP] a": {"a", true}, "WIP:": {"", true},
		"a": {"a", false}, "a WIP: b": {"a WIP: b", false}, "WIP a": {"WIP a", false}, "Draft: a": {"Draft: a", false},
		"": {"", false}, "WI": {"WI", false},
	} {
		if title, cut := cutWIP(in); title != want.title || cut != want.cut {
			t.Errorf("cutWIP(%q) = %q, %v; want %q, %v", in, title, cut, want.title, want.cut)
		}
	}
}
