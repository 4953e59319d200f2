package forge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/publish"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// The pull request belongs to people too, on GitHub: the publisher (publish.New behind
// delivery.New) against the fake GitHub API and its git remote. A person, Pat, commits to
// outerloop's branch (pushed straight into the remote's bare repository, as another author),
// or edits the pull request's title and body through the API with a token of their own.
//
// The GitHub REST and GraphQL shapes the fake answers and these tests check:
//   - update a pull request: PATCH /repos/{owner}/{repo}/pulls/{pull_number}, title, body and
//     state ("open" or "closed") each optional, only those sent change
//     (https://docs.github.com/rest/pulls/pulls#update-a-pull-request);
//   - create a pull request: POST /repos/{owner}/{repo}/pulls with draft
//     (https://docs.github.com/rest/pulls/pulls#create-a-pull-request);
//   - a comment on a pull request is an issue comment: POST
//     /repos/{owner}/{repo}/issues/{issue_number}/comments with body
//     (https://docs.github.com/rest/issues/comments#create-an-issue-comment,
//     https://docs.github.com/rest/guides/working-with-comments);
//   - a pull request's head.sha is the most recent commit on its branch
//     (https://docs.github.com/rest/pulls/pulls#get-a-pull-request);
//   - the GraphQL mutation markPullRequestReadyForReview(input: {pullRequestId}) with the pull
//     request's node_id (https://docs.github.com/graphql/reference/mutations#markpullrequestreadyforreview).

const patToken = "ghp_patPersonT0kenForTests0000000000000"

// ghPeople is acme/payments on the fake GitHub with outerloop's template delivering to it.
type ghPeople struct {
	t      *testing.T
	fake   *forge.FakeGitHub
	d      *delivery.Deliverer
	tmpl   *config.Template
	branch string
}

func newGHPeople(t *testing.T, deliver func(*config.Deliver)) *ghPeople {
	t.Helper()
	fake := forge.NewFakeGitHub(t, pubToken)
	f, err := forge.New(forge.Config{Name: "github", ForgeConfig: config.ForgeConfig{Kind: workitems.ForgeGitHub,
		BaseURL: fake.APIURL(), TokenEnv: "GH_PUB_TOKEN"}, Getenv: func(k string) string {
		if k == "GH_PUB_TOKEN" {
			return pubToken
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	pub := publish.New(publish.Options{Forges: forge.Set{"github": f}})
	tmpl := &config.Template{Name: "bump", Goal: "Bump a.", Deliver: config.Deliver{Forge: "github", Repo: "acme/payments",
		Mode: workitems.DeliverPullRequest, Branch: config.DefaultBranchPattern, Title: "outerloop: bump a"}}
	if deliver != nil {
		deliver(&tmpl.Deliver)
	}
	p := &ghPeople{t: t, fake: fake, d: delivery.New(delivery.Options{Publisher: pub}), tmpl: tmpl,
		branch: tmpl.Deliver.BranchFor(tmpl.Name, "")}
	seed := t.TempDir()
	git(t, seed, "init", "-q")
	p.write(seed, "a.txt", "a0\n")
	p.write(seed, "b.txt", "b0\n")
	git(t, seed, "add", "-A")
	git(t, seed, "commit", "-qm", "start")
	git(t, seed, "push", "-q", fake.Bare(), "HEAD:refs/heads/main")
	return p
}

func (p *ghPeople) write(dir, name, body string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func ghTick(id string) *workitems.Item {
	return &workitems.Item{ID: id, Origin: workitems.Origin{Kind: workitems.OriginCron}}
}

// night is one item's attempt: a workspace cloned from main with a.txt set to content (nothing
// changed, the verifier's rule no_change, when content is ""), delivered as the verifier's close.
func (p *ghPeople) night(it *workitems.Item, content string) (*workitems.Delivery, *events) {
	p.t.Helper()
	ws := p.t.TempDir()
	git(p.t, ws, "clone", "-q", "--single-branch", "--branch", "main", p.fake.Bare(), ".")
	rule := workitems.RuleName("all_green")
	if content == "" {
		rule = workitems.RuleNoChange
	} else {
		p.write(ws, "a.txt", content)
	}
	if it.Template == "" {
		it.Template, it.Goal = p.tmpl.Name, p.tmpl.Goal
	}
	ev := &events{}
	res, err := p.d.Deliver(context.Background(), delivery.Request{Template: p.tmpl, Item: it, Attempt: 1, Workspace: ws,
		Base: git(p.t, ws, "rev-parse", "HEAD"), Events: ev,
		Decision: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: rule, Actor: "verifier"}})
	if err != nil {
		p.t.Fatalf("deliver %s: %v", it.ID, err)
	}
	if res.Delivery == nil {
		p.t.Fatalf("deliver %s: no delivery record", it.ID)
	}
	return res.Delivery, ev
}

// patPushes commits file=content to outerloop's branch as Pat Person and pushes it to the
// remote's repository, returning the commit.
func (p *ghPeople) patPushes(file, content string) string {
	p.t.Helper()
	dir := p.t.TempDir()
	pat := func(args ...string) string {
		p.t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=Pat Person", "-c", "user.email=pat@example.com",
			"-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			p.t.Fatalf("git %s as Pat: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	pat("clone", "-q", "--branch", p.branch, p.fake.Bare(), ".")
	p.write(dir, file, content)
	pat("commit", "-qam", "Pat's fix to "+file)
	sha := pat("rev-parse", "HEAD")
	pat("push", "-q", "origin", "HEAD:refs/heads/"+p.branch)
	if got := p.fake.BranchSHA(p.branch); got != sha {
		p.t.Fatalf("Pat pushed %s; the branch is at %s", sha, got)
	}
	return sha
}

// branchHas reports whether the remote branch's history contains sha, and returns file at its head.
func (p *ghPeople) branchHas(sha, file string) (bool, string) {
	p.t.Helper()
	head := p.fake.BranchSHA(p.branch)
	if head == "" {
		p.t.Fatalf("the branch %s is gone", p.branch)
	}
	body := git(p.t, p.fake.Bare(), "show", head+":"+file)
	err := exec.Command("git", "--git-dir", p.fake.Bare(), "merge-base", "--is-ancestor", sha, head).Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		p.t.Fatal(err)
	}
	return err == nil, body
}

// outerloops is what outerloop's token sent the API since request from (an index of Sent).
func (p *ghPeople) outerloops(from int) []forge.FakeRequest {
	var out []forge.FakeRequest
	for _, r := range p.fake.Sent()[from:] {
		if r.Auth == "Bearer "+pubToken {
			out = append(out, r)
		}
	}
	return out
}

// writes are the requests other than GETs.
func writes(rs []forge.FakeRequest) []forge.FakeRequest {
	return slices.DeleteFunc(slices.Clone(rs), func(r forge.FakeRequest) bool { return strings.HasPrefix(r.Line, "GET ") })
}

func lines(rs []forge.FakeRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Line)
	}
	return out
}

// pushes counts the pushes (and deletions: a push too) the git remote was sent.
func (p *ghPeople) pushes() int {
	n := 0
	for _, l := range p.fake.GitSent() {
		if l == "POST /acme/payments.git/git-receive-pack" {
			n++
		}
	}
	return n
}

func jsonKeys(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("request body %q: %v", body, err)
	}
	return m
}

// With deliver.on_foreign_commits stop (the default): after Pat pushes to outerloop's branch, the
// next night's different change is held: nothing pushed, the pull request neither edited nor
// pushed to, one issue comment naming Pat and the commit; the night after is held too without a
// second comment; a review round builds on Pat's commit.
func TestOnGitHubAPersonsCommitHoldsTheBranch(t *testing.T) {
	t.Parallel()
	p := newGHPeople(t, nil)
	first, _ := p.night(ghTick("bump@1"), "a1\n")
	if first.Outcome != workitems.DeliveryPROpened || first.PR == nil || p.fake.BranchSHA(p.branch) != first.PushedSHA {
		t.Fatalf("the first night: %+v", first)
	}
	n := first.PR.Number
	pat := p.patPushes("b.txt", "b by Pat\n")
	if head := p.fake.Pull(n)["head"].(map[string]any)["sha"]; head != pat {
		t.Fatalf("the fake's pull request head is %v; want Pat's %s", head, pat)
	}

	from, pushed := len(p.fake.Sent()), p.pushes()
	second, ev := p.night(ghTick("bump@2"), "a2\n")
	if second.Outcome != workitems.DeliveryHeld || second.Held == nil || second.Held.User != "Pat Person" || second.Held.SHA != pat ||
		second.PushedSHA != "" || second.PR == nil || second.PR.Number != n {
		t.Fatalf("the second night: %+v held %+v", second, second.Held)
	}
	if !slices.Contains(ev.steps, string(workitems.StepHeld)) || slices.Contains(ev.steps, string(workitems.StepPushed)) {
		t.Fatalf("steps %v", ev.steps)
	}
	if got := p.fake.BranchSHA(p.branch); got != pat || p.pushes() != pushed {
		t.Fatalf("the branch is at %s (Pat's %s); %d pushes to the remote during the held night", got, pat, p.pushes()-pushed)
	}
	w := writes(p.outerloops(from))
	if fmt.Sprint(lines(w)) != fmt.Sprintf("[POST /repos/acme/payments/issues/%d/comments]", n) {
		t.Fatalf("a held night writes one issue comment and nothing else; sent %v", lines(w))
	}
	cs := p.fake.Comments(n)
	if len(cs) != 1 || !strings.Contains(cs[0], "Pat Person pushed "+pat[:12]) || !strings.Contains(cs[0], "/outerloop rebase") ||
		jsonKeys(t, w[0].Body)["body"] != cs[0] {
		t.Fatalf("comments %q", cs)
	}

	from = len(p.fake.Sent())
	third, _ := p.night(ghTick("bump@3"), "a3\n")
	if third.Outcome != workitems.DeliveryHeld || p.fake.BranchSHA(p.branch) != pat || p.pushes() != pushed {
		t.Fatalf("the third night: %+v, head %s", third, p.fake.BranchSHA(p.branch))
	}
	if w := writes(p.outerloops(from)); len(w) != 0 || len(p.fake.Comments(n)) != 1 {
		t.Fatalf("the third night wrote %v; comments %q", lines(w), p.fake.Comments(n))
	}
	if pr := p.fake.Pull(n); pr["state"] != "open" || !strings.Contains(pr["body"].(string), "item=bump@1 ") {
		t.Fatalf("the held pull request changed: %v", pr)
	}

	// A reviewer asked bump@1 for changes: its next attempt is a commit on top of Pat's.
	round := &workitems.Item{ID: "bump@1", Decisions: []workitems.Decision{{Outcome: workitems.OutcomeRetry, Rule: workitems.RuleChangesRequested}}}
	built, ev := p.night(round, "a4\n")
	if built.Outcome != workitems.DeliveryPRUpdated || built.PushedSHA == "" || built.Held == nil || built.Held.SHA != pat ||
		p.fake.BranchSHA(p.branch) != built.PushedSHA || !slices.Contains(ev.steps, string(workitems.StepBuiltOn)) {
		t.Fatalf("the review round: %+v; steps %v", built, ev.steps)
	}
	if ok, a := p.branchHas(pat, "a.txt"); !ok || a != "a4" {
		t.Fatalf("after the review round: Pat's commit in the history %v, a.txt %q", ok, a)
	}
	if _, b := p.branchHas(pat, "b.txt"); b != "b by Pat" {
		t.Fatalf("b.txt %q: Pat's change is gone", b)
	}
	if len(p.fake.Comments(n)) != 1 {
		t.Fatalf("comments %q", p.fake.Comments(n))
	}
}

// With build_on: the next night's change is pushed as a new commit whose history has Pat's
// commit, the pull request updated, nobody told it was held; the night after builds on that.
func TestOnGitHubBuildOnPushesOnTopOfAPersonsCommit(t *testing.T) {
	t.Parallel()
	p := newGHPeople(t, func(d *config.Deliver) { d.OnForeignCommits = workitems.ForeignBuildOn })
	first, _ := p.night(ghTick("bump@1"), "a1\n")
	n := first.PR.Number
	pat := p.patPushes("b.txt", "b by Pat\n")
	for i, content := range []string{"a2\n", "a3\n"} {
		before, pushed := p.fake.BranchSHA(p.branch), p.pushes()
		got, ev := p.night(ghTick(fmt.Sprintf("bump@%d", i+2)), content)
		if got.Outcome != workitems.DeliveryPRUpdated || got.PR.Number != n || got.Held == nil || got.Held.SHA != pat ||
			got.PushedSHA == "" || p.fake.BranchSHA(p.branch) != got.PushedSHA || p.pushes() != pushed+1 {
			t.Fatalf("night %d: %+v (branch %s)", i+2, got, p.fake.BranchSHA(p.branch))
		}
		if !slices.Contains(ev.steps, string(workitems.StepBuiltOn)) {
			t.Fatalf("night %d: steps %v", i+2, ev.steps)
		}
		ok, a := p.branchHas(pat, "a.txt")
		_, b := p.branchHas(pat, "b.txt")
		prev, _ := p.branchHas(before, "a.txt")
		if !ok || !prev || a != strings.TrimSpace(content) || b != "b by Pat" {
			t.Fatalf("night %d: Pat's commit in the history %v, the previous head %v, a.txt %q, b.txt %q", i+2, ok, prev, a, b)
		}
		if item, tree := publish.MarkedTree(p.fake.Pull(n)["body"].(string)); item != fmt.Sprintf("bump@%d", i+2) || tree != got.Tree {
			t.Fatalf("night %d: the pull request's marker names %s %s", i+2, item, tree)
		}
	}
	if cs := p.fake.Comments(n); len(cs) != 0 {
		t.Fatalf("build_on told the pull request: %q", cs)
	}
}

// A person's title and body text survive outerloop's update: the PATCH outerloop sends carries
// the body alone, and the body keeps the person's text around outerloop's section.
func TestOnGitHubAPersonsTitleAndBodySurviveAnUpdate(t *testing.T) {
	t.Parallel()
	p := newGHPeople(t, nil)
	first, _ := p.night(ghTick("bump@1"), "a1\n")
	n := first.PR.Number
	opened := p.fake.Pull(n)
	if opened["title"] != "outerloop: bump a" || strings.Count(opened["body"].(string), "<!-- outerloop:begin") != 1 {
		t.Fatalf("opened %v", opened)
	}

	// Pat edits the pull request through the API, with Pat's token.
	const title = "Bump a (reviewed by Pat)"
	body := "Context a person wrote.\n\n" + opened["body"].(string) + "\n\nFooter a person wrote."
	edit, _ := json.Marshal(map[string]string{"title": title, "body": body})
	req, err := http.NewRequest(http.MethodPatch, fmt.Sprintf("%s/repos/acme/payments/pulls/%d", p.fake.APIURL(), n), bytes.NewReader(edit))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+patToken)
	req.Header.Set("Accept", "application/vnd.github+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || p.fake.Pull(n)["title"] != title {
		t.Fatalf("Pat's edit: %s, title %v", resp.Status, p.fake.Pull(n)["title"])
	}

	from := len(p.fake.Sent())
	second, _ := p.night(ghTick("bump@2"), "a2\n")
	if second.Outcome != workitems.DeliveryPRUpdated || second.PR.Number != n {
		t.Fatalf("the second night: %+v", second)
	}
	var patches []forge.FakeRequest
	for _, r := range p.outerloops(from) {
		if strings.HasPrefix(r.Line, "PATCH ") {
			patches = append(patches, r)
		}
	}
	if len(patches) != 1 || patches[0].Line != fmt.Sprintf("PATCH /repos/acme/payments/pulls/%d", n) {
		t.Fatalf("outerloop's PATCHes: %v", lines(patches))
	}
	sent := jsonKeys(t, patches[0].Body)
	if _, ok := sent["title"]; ok || len(sent) != 1 {
		t.Fatalf("outerloop's PATCH carries %v; want the body alone", patches[0].Body)
	}
	after := p.fake.Pull(n)
	got := after["body"].(string)
	item, tree := publish.MarkedTree(got)
	if after["title"] != title || sent["body"] != got || !strings.HasPrefix(got, "Context a person wrote.\n\n<!-- outerloop:begin") ||
		!strings.HasSuffix(got, "<!-- outerloop:end -->\n\nFooter a person wrote.") || strings.Count(got, "<!-- outerloop:begin") != 1 ||
		strings.Count(got, "<!-- outerloop:end -->") != 1 || item != "bump@2" || tree != second.Tree || strings.Contains(got, "item=bump@1 ") {
		t.Fatalf("after the update: title %q body:\n%s", after["title"], got)
	}
}

// A night that finds nothing to change (rule no_change) comments on the open pull request, then
// closes it (PATCH state closed) and deletes the branch; when Pat holds the branch it only
// comments, once, and keeps both.
func TestOnGitHubANightWithNothingToChangeClosesThePullRequest(t *testing.T) {
	t.Parallel()
	t.Run("outerloop's alone", func(t *testing.T) {
		t.Parallel()
		p := newGHPeople(t, nil)
		first, _ := p.night(ghTick("bump@1"), "a1\n")
		n := first.PR.Number
		from, pushed := len(p.fake.Sent()), p.pushes()
		obs, ev := p.night(ghTick("bump@2"), "")
		if obs.Outcome != workitems.DeliveryObsolete || obs.PR == nil || obs.PR.Number != n || obs.PR.State != workitems.PRClosed || obs.PushedSHA != "" {
			t.Fatalf("the obsolete night: %+v", obs)
		}
		for _, s := range []workitems.DeliveryStep{workitems.StepUnchanged, workitems.StepObsolete, workitems.StepBranchDeleted} {
			if !slices.Contains(ev.steps, string(s)) {
				t.Fatalf("no %s step: %v", s, ev.steps)
			}
		}
		w := writes(p.outerloops(from))
		want := fmt.Sprintf("[POST /repos/acme/payments/issues/%d/comments PATCH /repos/acme/payments/pulls/%d]", n, n)
		if fmt.Sprint(lines(w)) != want {
			t.Fatalf("sent %v; want %s (the comment before the close)", lines(w), want)
		}
		if m := jsonKeys(t, w[1].Body); m["state"] != "closed" || len(m) != 1 {
			t.Fatalf("the close sent %s", w[1].Body)
		}
		cs := p.fake.Comments(n)
		if len(cs) != 1 || !strings.Contains(cs[0], "closes this pull request as no longer needed: the attempt found nothing to change") {
			t.Fatalf("comments %q", cs)
		}
		if pr := p.fake.Pull(n); pr["state"] != "closed" || pr["closed_at"] == nil || pr["merged"] != false {
			t.Fatalf("the fake's pull request: state %v closed_at %v merged %v", pr["state"], pr["closed_at"], pr["merged"])
		}
		if h := p.fake.BranchSHA(p.branch); h != "" || p.pushes() != pushed+1 {
			t.Fatalf("the branch is at %q; %d pushes (a deletion is one)", h, p.pushes()-pushed)
		}
		if main := p.fake.BranchSHA("main"); main == "" {
			t.Fatal("main is gone")
		}
	})
	t.Run("held by a person", func(t *testing.T) {
		t.Parallel()
		p := newGHPeople(t, nil)
		first, _ := p.night(ghTick("bump@1"), "a1\n")
		n := first.PR.Number
		pat := p.patPushes("b.txt", "b by Pat\n")
		from := len(p.fake.Sent())
		for _, id := range []string{"bump@2", "bump@3"} {
			obs, _ := p.night(ghTick(id), "")
			if obs.Outcome != workitems.DeliveryObsolete || obs.Held == nil || obs.Held.SHA != pat || obs.PR.State != workitems.PROpen {
				t.Fatalf("%s: %+v", id, obs)
			}
		}
		if w := writes(p.outerloops(from)); fmt.Sprint(lines(w)) != fmt.Sprintf("[POST /repos/acme/payments/issues/%d/comments]", n) {
			t.Fatalf("two held nights with nothing to change sent %v; want one comment", lines(w))
		}
		if cs := p.fake.Comments(n); len(cs) != 1 || !strings.Contains(cs[0], "found nothing left to change") {
			t.Fatalf("comments %q", cs)
		}
		if pr := p.fake.Pull(n); pr["state"] != "open" || p.fake.BranchSHA(p.branch) != pat {
			t.Fatalf("the pull request is %v, the branch at %s (Pat's %s)", pr["state"], p.fake.BranchSHA(p.branch), pat)
		}
	})
}

// deliver.draft_until: ci_green opens the pull request with draft true; Ready sends GraphQL's
// markPullRequestReadyForReview with the pull request's node id, once; the next update leaves it
// ready.
func TestOnGitHubDraftUntilCIGreen(t *testing.T) {
	t.Parallel()
	p := newGHPeople(t, func(d *config.Deliver) { d.DraftUntil = workitems.DraftUntilCIGreen })
	first, _ := p.night(ghTick("bump@1"), "a1\n")
	if first.Outcome != workitems.DeliveryPROpened || first.PR == nil || !first.PR.Draft {
		t.Fatalf("opened %+v; want a draft", first.PR)
	}
	n := first.PR.Number
	var creates []forge.FakeRequest
	for _, r := range p.outerloops(0) {
		if r.Line == "POST /repos/acme/payments/pulls" {
			creates = append(creates, r)
		}
	}
	if len(creates) != 1 || jsonKeys(t, creates[0].Body)["draft"] != true {
		t.Fatalf("the create: %v", creates)
	}
	pr := p.fake.Pull(n)
	node, _ := pr["node_id"].(string)
	if pr["draft"] != true || node == "" {
		t.Fatalf("the fake's pull request: draft %v node_id %q", pr["draft"], node)
	}

	from := len(p.fake.Sent())
	ev := &events{}
	ready, err := p.d.Ready(context.Background(), delivery.Ready{Template: p.tmpl, Item: ghTick("bump@1"), Attempt: 1, Delivery: *first, Events: ev, Why: "CI green"})
	if err != nil {
		t.Fatal(err)
	}
	if ready.PR == nil || ready.PR.Draft || ready.PR.Number != n || !slices.Contains(ev.steps, string(workitems.StepReady)) {
		t.Fatalf("after Ready: %+v; steps %v", ready.PR, ev.steps)
	}
	var gql []forge.FakeRequest
	for _, r := range writes(p.outerloops(from)) {
		if r.Line != "POST /graphql" {
			t.Fatalf("Ready sent %s", r.Line)
		}
		gql = append(gql, r)
	}
	if len(gql) != 1 {
		t.Fatalf("%d GraphQL requests", len(gql))
	}
	var sent struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal([]byte(gql[0].Body), &sent); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sent.Query, "markPullRequestReadyForReview") || len(sent.Variables) != 1 || !slices.Contains(mapValues(sent.Variables), any(node)) {
		t.Fatalf("the mutation: %s %v; want the node id %s", sent.Query, sent.Variables, node)
	}
	if fmt.Sprint(p.fake.Readied()) != "["+node+"]" || p.fake.Pull(n)["draft"] != false {
		t.Fatalf("the fake readied %v; draft %v", p.fake.Readied(), p.fake.Pull(n)["draft"])
	}

	// Ready again with the record that still says draft: the pull request is read, nothing sent.
	from = len(p.fake.Sent())
	if again, err := p.d.Ready(context.Background(), delivery.Ready{Template: p.tmpl, Item: ghTick("bump@1"), Attempt: 1, Delivery: *first, Why: "CI green"}); err != nil ||
		again.PR.Draft || len(writes(p.outerloops(from))) != 0 {
		t.Fatalf("Ready again: %+v %v; sent %v", again.PR, err, lines(writes(p.outerloops(from))))
	}

	// The next night's update leaves it ready: its PATCH carries no draft.
	from = len(p.fake.Sent())
	second, _ := p.night(ghTick("bump@2"), "a2\n")
	if second.Outcome != workitems.DeliveryPRUpdated || second.PR.Draft || p.fake.Pull(n)["draft"] != false {
		t.Fatalf("the second night: %+v; the fake's draft %v", second.PR, p.fake.Pull(n)["draft"])
	}
	for _, r := range writes(p.outerloops(from)) {
		if strings.HasPrefix(r.Line, "PATCH ") {
			if _, ok := jsonKeys(t, r.Body)["draft"]; ok {
				t.Fatalf("the update sent draft: %s", r.Body)
			}
		}
	}
	if len(p.fake.Readied()) != 1 {
		t.Fatalf("readied %v", p.fake.Readied())
	}
}

func mapValues(m map[string]any) []any {
	var out []any
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
