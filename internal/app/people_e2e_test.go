package app_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/lib/giteatest"
	"outerloop/publish"
	"outerloop/scheduler"
	"outerloop/workitems"
)

// The pull request belongs to people too (issue 39), end to end: the deployment (real Redis,
// real workers, the branch ledger in Redis) delivers to the shared Gitea, whose webhooks reach
// the deployment's hooks handler (newHookRig); Pat, a second Gitea user with write access,
// pushes to outerloop's branch as "Pat Person". Every step is awaited on the item's state, a
// webhook seen or the forge's state, never on a sleep.

// pat is a person with write access to a rig's repository: the one who pushes to outerloop's
// branch.
type pat struct {
	*giteatest.User
	gs   *giteatest.Server
	repo giteatest.Repo
}

func newPat(t *testing.T, h *hookRig) *pat {
	t.Helper()
	return &pat{User: h.gs.NewCollaborator(t, h.repo, "pat"), gs: h.gs, repo: h.repo}
}

// git runs git in dir as Pat: Pat's token, Pat Person as author and committer.
func (p *pat) git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cred := base64.StdEncoding.EncodeToString([]byte(p.Name + ":" + p.Token()))
	cmd := exec.Command("git", append([]string{"-c", "user.name=Pat Person", "-c", "user.email=pat@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http."+p.gs.URL+"/.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic "+cred)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s as Pat: %v\n%s", strings.Join(args, " "), err, strings.ReplaceAll(string(out), p.Token(), "[REDACTED]"))
	}
	return strings.TrimSpace(string(out))
}

// pushes commits file=content on top of branch and pushes it with Pat's own token; it returns
// once Gitea shows the branch at the new commit.
func (p *pat) pushes(t *testing.T, branch, file, content string) string {
	t.Helper()
	dir := t.TempDir()
	p.git(t, dir, "clone", "-q", "--branch", branch, p.repo.CloneURL, ".")
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	p.git(t, dir, "add", file)
	p.git(t, dir, "commit", "-qm", "Pat's fix to "+file)
	sha := p.git(t, dir, "rev-parse", "HEAD")
	p.git(t, dir, "push", "-q", "origin", "HEAD:refs/heads/"+branch)
	p.gs.WaitPushed(t, p.repo, branch, sha)
	return sha
}

// branchHead is branch's commit on the Gitea ("" when the branch does not exist).
func branchHead(t *testing.T, gs *giteatest.Server, r giteatest.Repo, branch string) string {
	t.Helper()
	sha, _, _ := strings.Cut(gs.Git(t, t.TempDir(), "ls-remote", r.CloneURL, "refs/heads/"+branch), "\t")
	return sha
}

// branchHistory is every commit reachable from branch on the Gitea.
func branchHistory(t *testing.T, gs *giteatest.Server, r giteatest.Repo, branch string) []string {
	t.Helper()
	dir := t.TempDir()
	gs.Git(t, dir, "init", "-q")
	gs.Git(t, dir, "fetch", "-q", r.CloneURL, "refs/heads/"+branch)
	return strings.Fields(gs.Git(t, dir, "rev-list", "FETCH_HEAD"))
}

// prComments counts the comments of pull request n that contain s.
func prComments(t *testing.T, gs *giteatest.Server, r giteatest.Repo, n int, s string) int {
	t.Helper()
	var cs []struct {
		Body string `json:"body"`
	}
	gs.API(t, http.MethodGet, fmt.Sprintf("/repos/%s/issues/%d/comments", r.Slug, n), nil, http.StatusOK, &cs)
	c := 0
	for _, m := range cs {
		if strings.Contains(m.Body, s) {
			c++
		}
	}
	return c
}

// stepsOf are the item's delivery steps over all its attempts, oldest first.
func stepsOf(t *testing.T, h *hookRig, id string) []string {
	t.Helper()
	var out []string
	for _, e := range events(t, h.sys, id, workitems.EventDelivery) {
		out = append(out, e.Data["step"])
	}
	return out
}

func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// publishKey is the ledger's key of a delivery's branch.
func publishKey(d workitems.Delivery) publish.BranchKey {
	return publish.BranchKey{Forge: d.Forge, Repo: d.Repo, Branch: d.Branch}
}

// prActions is outerloop_pull_request_actions_total of template by action, as /metrics serves it.
func prActions(t *testing.T, h *hookRig, template string) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(h.Metrics.Handler())
	defer srv.Close()
	out := map[string]float64{}
	for k, v := range scrapeValues(t, srv.URL) {
		rest, ok := strings.CutPrefix(k, "outerloop_pull_request_actions_total{action=\"")
		if !ok {
			continue
		}
		action, labels, _ := strings.Cut(rest, "\"")
		if labels == `,template="`+template+`"}` {
			out[action] = v
		}
	}
	return out
}

// lastDecision is the item's newest decision.
func lastDecision(it *workitems.Item) workitems.Decision {
	return it.Decisions[len(it.Decisions)-1]
}

// awaitPREnded waits for the hooks handler's answer to the pull_request delivery saying pull
// request n was closed (and merged, or not). The recorder keeps what it saw while nobody
// listened (up to its buffer), and records a delivery once the handler returned: the sink has
// done with it by then.
func (h *hookRig) awaitPREnded(t *testing.T, n int, merged bool) hookDelivery {
	t.Helper()
	return h.hooks.next(t, fmt.Sprintf("of pull request #%d closed (merged %v)", n, merged), func(d hookDelivery) bool {
		var p struct {
			Action      string `json:"action"`
			Number      int    `json:"number"`
			PullRequest struct {
				Merged bool `json:"merged"`
			} `json:"pull_request"`
		}
		return d.Header.Get("X-Gitea-Event-Type") == "pull_request" && json.Unmarshal(d.Body, &p) == nil &&
			p.Action == "closed" && p.Number == n && p.PullRequest.Merged == merged
	})
}

// 1. A manual item's branch held by Pat, then handed back: the pull request waits for CI; Pat
// pushes a commit to outerloop's branch; CI is red on outerloop's commit, so the item retries;
// the retry finds Pat's commit and (on_foreign_commits stop, a manual item) escalates as
// held_by_person_escalate, pushing nothing and telling the pull request once. The admin's
// `/outerloop rebase` (a webhook to the sink) hands the branch back: the next attempt replaces
// the branch, Pat's commit no longer in its history.
func TestAPersonsCommitHoldsTheBranchUntilOuterloopRebaseHandsItBack(t *testing.T) {
	t.Parallel()
	h := heldThenHandedBack(t, "peopleheld")
	if got := prActions(t, h, "held"); got["held"] != 1 {
		t.Fatalf("pull request actions: %v; want held 1", got)
	}
}

// A hand-back by `/outerloop rebase` is counted in outerloop_pull_request_actions_total as
// handed_back (workitems.StepHandedBack: "a person handed a held branch back"): the hooks'
// sink, where the hand-back happens, counts it (it once went uncounted).
func TestAHandBackByOuterloopRebaseIsCountedAsHandedBack(t *testing.T) {
	t.Parallel()
	h := heldThenHandedBack(t, "peoplecount")
	if got := prActions(t, h, "held"); got["held"] != 1 || got["handed_back"] != 1 {
		t.Fatalf("pull request actions after the hand-back: %v; want held 1, handed_back 1", got)
	}
}

// heldThenHandedBack is scenario 1 on its own rig (template "held"), every step asserted; it
// returns once the third attempt pushed and waits for CI.
func heldThenHandedBack(t *testing.T, prefix string) *hookRig {
	t.Helper()
	h := newHookRig(t, prefix, slowPoll, `  - name: held
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q]}
    done_check:
      commands: ["test -s NOTES.md"]
      ci: {forge: tea, required: [test], wait: 5m}
    deliver: {forge: tea, repo: %[2]s, mode: pull_request, on_foreign_commits: stop}
`)
	p := newPat(t, h)
	h.startWorker(t, prefix)
	ctx := context.Background()
	it := h.submit(t, "held")
	if it.Origin.Kind != workitems.OriginManual {
		t.Fatalf("origin %+v: want a manual item", it.Origin)
	}
	it = h.awaitWait(t, it.ID, workitems.WaitCI, 1)
	first := *it.Delivery
	if first.Outcome != workitems.DeliveryPROpened || first.PushedSHA == "" || first.PR == nil || first.Branch == "" {
		t.Fatalf("attempt 1 must open a pull request: %+v", first)
	}

	patSHA := p.pushes(t, first.Branch, "PAT.md", "Pat was here.\n")
	h.status(t, first.PushedSHA, "failure")
	it = awaitState(t, h.Store, it.ID, workitems.StateEscalated, workitems.StateClosed, workitems.StateFailed)
	if d := it.Attempts[0].Decision; d == nil || d.Outcome != workitems.OutcomeRetry || d.Rule != workitems.RuleCIFailed {
		t.Fatalf("attempt 1's decision %+v; want a retry (ci_failed)\n%v", d, trail(t, h.sys, it.ID))
	}
	last := lastDecision(it)
	if it.State != workitems.StateEscalated || len(it.Attempts) != 2 || last.Rule != workitems.RuleHeldByPersonEscalate ||
		it.Escalation == nil || it.Escalation.Reason != string(workitems.RuleHeldByPersonEscalate) {
		t.Fatalf("want escalated (held_by_person_escalate) after 2 attempts: %s, %d attempts, %+v %+v\n%v",
			it.State, len(it.Attempts), last, it.Escalation, trail(t, h.sys, it.ID))
	}
	held := it.Delivery
	if held == nil || held.Attempt != 2 || held.Outcome != workitems.DeliveryHeld || held.Held == nil || held.Held.User != "Pat Person" ||
		held.Held.SHA != patSHA || held.PushedSHA != "" || held.PR == nil || held.PR.Number != first.PR.Number {
		t.Fatalf("attempt 2's delivery must be held by Pat Person's %s, nothing pushed: %+v held %+v", patSHA, held, held.Held)
	}
	if !strings.Contains(strings.Join(last.Reasons, " "), "Pat Person pushed "+patSHA[:12]) {
		t.Fatalf("the decision's reasons must name Pat's commit: %q", last.Reasons)
	}
	if got := branchHead(t, h.gs, h.repo, first.Branch); got != patSHA {
		t.Fatalf("the branch is at %s; want Pat's %s untouched", got, patSHA)
	}
	if n := prComments(t, h.gs, h.repo, first.PR.Number, "stopped updating this pull request: Pat Person pushed "+patSHA[:12]); n != 1 {
		t.Fatalf("%d comments saying outerloop stopped and naming Pat's commit; want 1", n)
	}
	if n := prComments(t, h.gs, h.repo, first.PR.Number, "stopped updating"); n != 1 {
		t.Fatalf("%d comments saying outerloop stopped; want exactly 1", n)
	}
	if steps := deliverySteps(t, h.Store, it.ID, 2); !slices.Contains(steps, string(workitems.StepHeld)) || slices.Contains(steps, string(workitems.StepPushed)) {
		t.Fatalf("attempt 2's delivery steps %v: want held, nothing pushed", steps)
	}
	if got := prActions(t, h, "held"); got["held"] != 1 || got["handed_back"] != 0 {
		t.Fatalf("pull request actions after the hold: %v; want held 1", got)
	}

	// The admin hands the branch back on the pull request.
	h.gs.CommentIssue(t, h.repo, first.PR.Number, "/outerloop rebase")
	e := h.audit.next(t)
	if !e.OK || e.Action != "outerloop rebase" || e.Target != it.ID || e.Actor != "tea:"+h.gs.Admin {
		t.Fatalf("the rebase command must act and be audited: %+v", e)
	}
	it = h.awaitWait(t, it.ID, workitems.WaitCI, 3)
	if r := it.Resolution[len(it.Resolution)-1]; r.Rule != workitems.RulePersonRebase || r.Action != workitems.ResolveRetry || r.Actor != "tea:"+h.gs.Admin {
		t.Fatalf("the resolution %+v; want person_rebase by the admin", r)
	}
	third := *it.Delivery
	if third.Attempt != 3 || third.PushedSHA == "" || third.PushedSHA == first.PushedSHA || third.PushedSHA == patSHA ||
		third.Outcome != workitems.DeliveryPRUpdated || third.PR == nil || third.PR.Number != first.PR.Number || third.Held != nil {
		t.Fatalf("attempt 3 must push a new commit to the same pull request, held by nobody: %+v", third)
	}
	if got := branchHead(t, h.gs, h.repo, first.Branch); got != third.PushedSHA {
		t.Fatalf("the branch is at %s; want attempt 3's %s", got, third.PushedSHA)
	}
	if hist := branchHistory(t, h.gs, h.repo, first.Branch); slices.Contains(hist, patSHA) {
		t.Fatalf("Pat's commit %s is still in the branch's history after the hand-back: %v", patSHA, hist)
	}
	if steps := stepsOf(t, h, it.ID); countOf(steps, string(workitems.StepHandedBack)) == 0 {
		t.Fatalf("no handed_back step on the item: %v", steps)
	}
	if now, _ := h.Store.Get(ctx, it.ID); now.State != workitems.StateWaiting {
		t.Fatalf("%s is %s", it.ID, now.State)
	}
	// What the retry saw was the held record; what the next nights push to is the ledger's.
	rec, err := h.Branches.Branch(ctx, publishKey(first))
	if err != nil || rec.Hold != nil || !rec.Ours(third.PushedSHA) {
		t.Fatalf("the ledger after the hand-back: %+v %v", rec, err)
	}
	return h
}

// 1b. A review round builds on a person's commit: the item waits for review; Pat pushes a fix
// to outerloop's branch and requests changes; the retry's change becomes a new commit on top of
// Pat's (Pat's commit an ancestor of the new head, Pat's file kept), pushed to the same pull
// request with nothing said about stopping.
func TestAReviewRoundBuildsOnTheCommitAPersonPushedToTheBranch(t *testing.T) {
	t.Parallel()
	h := newHookRig(t, "peopleround", slowPoll, `  - name: rv
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q]}
    done_check: {commands: ["test -s NOTES.md"]}
    deliver: {forge: tea, repo: %[2]s, mode: pull_request, review: {required_approvals: 1}}
`)
	p := newPat(t, h)
	h.startWorker(t, "peopleround")
	it := h.submit(t, "rv")
	it = h.awaitWait(t, it.ID, workitems.WaitReview, 1)
	first := *it.Delivery
	patSHA := p.pushes(t, first.Branch, "PAT.md", "Pat was here.\n")
	p.API(t, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", h.repo.Slug, first.PR.Number),
		map[string]any{"event": "REQUEST_CHANGES", "body": "I pushed PAT.md; number the note.", "commit_id": patSHA}, http.StatusOK, nil)

	it = h.awaitWait(t, it.ID, workitems.WaitReview, 2)
	if d := it.Attempts[0].Decision; d == nil || d.Outcome != workitems.OutcomeRetry || d.Rule != workitems.RuleChangesRequested {
		t.Fatalf("attempt 1's decision %+v; want a retry (changes_requested)", d)
	}
	second := *it.Delivery
	if second.Attempt != 2 || second.Outcome != workitems.DeliveryPRUpdated || second.PushedSHA == "" || second.PushedSHA == patSHA ||
		second.PR == nil || second.PR.Number != first.PR.Number || second.Held == nil || second.Held.SHA != patSHA || second.Held.User != "Pat Person" {
		t.Fatalf("attempt 2 must push a commit built on Pat's %s to the same pull request: %+v held %+v", patSHA, second, second.Held)
	}
	if got := branchHead(t, h.gs, h.repo, first.Branch); got != second.PushedSHA {
		t.Fatalf("the branch is at %s; want attempt 2's %s", got, second.PushedSHA)
	}
	if hist := branchHistory(t, h.gs, h.repo, first.Branch); !slices.Contains(hist, patSHA) {
		t.Fatalf("Pat's commit %s is not in the branch's history: %v", patSHA, hist)
	}
	if got := rawFile(t, h.gs, h.repo, second.PushedSHA, "PAT.md"); got != "Pat was here.\n" {
		t.Fatalf("Pat's file at the new head: %q", got)
	}
	if got := rawFile(t, h.gs, h.repo, second.PushedSHA, "NOTES.md"); !strings.Contains(got, "attempt 2") {
		t.Fatalf("attempt 2's change is not at the new head: NOTES.md %q", got)
	}
	if steps := deliverySteps(t, h.Store, it.ID, 2); !slices.Contains(steps, string(workitems.StepBuiltOn)) || slices.Contains(steps, string(workitems.StepHeld)) {
		t.Fatalf("attempt 2's delivery steps %v: want built_on, not held", steps)
	}
	if n := prComments(t, h.gs, h.repo, first.PR.Number, "stopped updating"); n != 0 {
		t.Fatalf("%d comments saying outerloop stopped; a review round builds on", n)
	}
}

// 2. Scheduled ticks: the first opens a pull request; Pat pushes; the second tick, with a
// different change, closes as held_by_person (not escalated), pushes nothing and tells the pull
// request once; a third does the same without a second comment. The items are made as the
// scheduler's tick makes them (Queue.Submit with a cron origin and the tick's id).
func TestATickOnABranchAPersonCommittedToClosesAsHeldByPerson(t *testing.T) {
	t.Parallel()
	h := newHookRig(t, "peopletick", slowPoll, `  - name: tick
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q, "echo \"$OUTERLOOP_ITEM\" >> NOTES.md"]}
    done_check: {commands: ["test -s NOTES.md"]}
    deliver: {forge: tea, repo: %[2]s, mode: pull_request}
`)
	p := newPat(t, h)
	h.startWorker(t, "peopletick")
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	tick := func(n int) *workitems.Item {
		t.Helper()
		when := at.Add(time.Duration(n) * time.Hour)
		it, err := h.Queue.Submit(ctx, scheduler.Request{Template: "tick", ID: workitems.CronItemID("tick", when),
			Origin: workitems.Origin{Kind: workitems.OriginCron, Actor: "scheduler", Tick: when}})
		if err != nil {
			t.Fatal(err)
		}
		return awaitState(t, h.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	}
	one := tick(1)
	d := one.Delivery
	if one.State != workitems.StateClosed || one.Origin.Kind != workitems.OriginCron || d == nil || d.Outcome != workitems.DeliveryPROpened ||
		d.PR == nil || d.PR.State != workitems.PROpen {
		t.Fatalf("the first tick must open a pull request and close: %s %+v %+v", one.State, one.Origin, d)
	}
	branch, pr := d.Branch, d.PR.Number
	patSHA := p.pushes(t, branch, "PAT.md", "Pat was here.\n")

	for n := 2; n <= 3; n++ {
		it := tick(n)
		last := lastDecision(it)
		d := it.Delivery
		if it.State != workitems.StateClosed || last.Rule != workitems.RuleHeldByPerson {
			t.Fatalf("tick %d must close as held_by_person: %s %+v\n%v", n, it.State, last, trail(t, h.sys, it.ID))
		}
		if d == nil || d.Outcome != workitems.DeliveryHeld || d.Held == nil || d.Held.User != "Pat Person" || d.Held.SHA != patSHA ||
			d.PushedSHA != "" || d.PR == nil || d.PR.Number != pr || d.Tree == one.Delivery.Tree {
			t.Fatalf("tick %d's delivery must be held by Pat's %s, a different change, nothing pushed: %+v", n, patSHA, d)
		}
		if got := branchHead(t, h.gs, h.repo, branch); got != patSHA {
			t.Fatalf("after tick %d the branch is at %s; want Pat's %s", n, got, patSHA)
		}
		if c := prComments(t, h.gs, h.repo, pr, "stopped updating this pull request: Pat Person pushed "+patSHA[:12]); c != 1 {
			t.Fatalf("after tick %d: %d comments saying outerloop stopped; want 1", n, c)
		}
	}
	prs := pulls(t, h.gs, h.repo)
	if len(prs) != 1 || prs[0].State != "open" || prs[0].Head.SHA != patSHA {
		t.Fatalf("one pull request, open, at Pat's commit: %+v", prs)
	}
	if hist := branchHistory(t, h.gs, h.repo, branch); !slices.Contains(hist, one.Delivery.PushedSHA) {
		t.Fatalf("the first tick's commit is gone from the branch: %v", hist)
	}
}

// 3. A person merges the pull request while the item waits for CI: the webhook ends the item
// (pr_merged) and outerloop's branch is deleted; when Pat committed to it before the merge it
// is kept (said once on the item).
func TestAPullRequestMergedByAPersonDeletesOuterloopsBranchUnlessAPersonCommitted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix string
		pat    bool
	}{
		{name: "outerloop's alone", prefix: "peoplemerged"},
		{name: "Pat committed", prefix: "peoplekept", pat: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHookRig(t, tc.prefix, slowPoll, ciTemplate)
			var p *pat
			if tc.pat {
				p = newPat(t, h)
			}
			h.startWorker(t, tc.prefix)
			it := h.submit(t, "ci")
			it = h.awaitWait(t, it.ID, workitems.WaitCI, 1)
			first := *it.Delivery
			if first.Outcome != workitems.DeliveryPROpened || !strings.HasPrefix(first.Branch, "outerloop/") {
				t.Fatalf("attempt 1: %+v", first)
			}
			head := first.PushedSHA
			if tc.pat {
				head = p.pushes(t, first.Branch, "PAT.md", "Pat was here.\n")
			}
			h.gs.MergePullRequest(t, h.repo, first.PR.Number)
			it = awaitState(t, h.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
			last := lastDecision(it)
			if it.State != workitems.StateClosed || last.Rule != workitems.RulePRMerged || it.Delivery.PR == nil ||
				it.Delivery.PR.State != workitems.PRMerged {
				t.Fatalf("want closed (pr_merged): %s %+v %+v\n%v", it.State, last, it.Delivery, trail(t, h.sys, it.ID))
			}
			if d := h.awaitPREnded(t, first.PR.Number, true); d.Code != http.StatusOK {
				t.Fatalf("the merge's delivery: %d %s", d.Code, d.Answer)
			}
			if by := wokenBy(t, h.sys, it.ID); len(by) == 0 || by[len(by)-1] != string(workitems.WakeWebhook) {
				t.Fatalf("the last wake must be a webhook's: %v", by)
			}
			if prs := pulls(t, h.gs, h.repo); len(prs) != 1 || !prs[0].Merged || prs[0].Head.SHA != head {
				t.Fatalf("one pull request, merged at %s: %+v", head, prs)
			}
			steps := stepsOf(t, h, it.ID)
			got := branchHead(t, h.gs, h.repo, first.Branch)
			if !tc.pat {
				// Deleted once: the sink's cleanup of the merge's delivery and the wake's may both
				// run (a wake enqueued by a late delivery of the pull request's opening); the one
				// that finds the ledger's record says so, the other is silent.
				if got != "" || countOf(steps, string(workitems.StepBranchDeleted)) != 1 || countOf(steps, string(workitems.StepBranchKept)) != 0 {
					t.Fatalf("the merged branch must be deleted: at %q; steps %v\n%v", got, steps, trail(t, h.sys, it.ID))
				}
				return
			}
			if got != head || countOf(steps, string(workitems.StepBranchKept)) != 1 || countOf(steps, string(workitems.StepBranchDeleted)) != 0 {
				t.Fatalf("the branch Pat committed to must be kept at %s, said once: at %q; steps %v", head, got, steps)
			}
		})
	}
}

// 3b. The pull request of an item that already closed (nothing waits on it) is merged by a
// person: the hooks' sink alone cleans up, and deletes outerloop's branch.
func TestAPullRequestMergedAfterItsItemClosedHasItsBranchDeletedByTheHooksSink(t *testing.T) {
	t.Parallel()
	h := newHookRig(t, "peoplesink", slowPoll, `  - name: once
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q]}
    done_check: {commands: ["test -s NOTES.md"]}
    deliver: {forge: tea, repo: %[2]s, mode: pull_request}
`)
	h.startWorker(t, "peoplesink")
	it := h.submit(t, "once")
	it = awaitState(t, h.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	d := it.Delivery
	if it.State != workitems.StateClosed || d == nil || d.Outcome != workitems.DeliveryPROpened || d.PR == nil {
		t.Fatalf("the item must open a pull request and close: %s %+v", it.State, d)
	}
	if got := branchHead(t, h.gs, h.repo, d.Branch); got != d.PushedSHA {
		t.Fatalf("the branch is at %q before the merge; want %s", got, d.PushedSHA)
	}
	h.gs.MergePullRequest(t, h.repo, d.PR.Number)
	if hd := h.awaitPREnded(t, d.PR.Number, true); hd.Code != http.StatusOK {
		t.Fatalf("the merge's delivery: %d %s", hd.Code, hd.Answer)
	}
	if got := branchHead(t, h.gs, h.repo, d.Branch); got != "" {
		t.Fatalf("the merged pull request's branch is still there at %s\n%v", got, stepsOf(t, h, it.ID))
	}
	if steps := stepsOf(t, h, it.ID); countOf(steps, string(workitems.StepBranchDeleted)) != 1 {
		t.Fatalf("want one branch_deleted step on the item: %v", steps)
	}
	if now, _ := h.Store.Get(context.Background(), it.ID); now.State != workitems.StateClosed || len(now.Decisions) != len(it.Decisions) {
		t.Fatalf("the merge must not change the closed item: %s, %d decisions (was %d)", now.State, len(now.Decisions), len(it.Decisions))
	}
}

// 4. deliver.draft_until: ci_green: the pull request opens as a draft (Gitea: "WIP: " title);
// CI green by webhook makes it ready on the forge, and the item then waits for its review; an
// approval closes it.
func TestADraftPullRequestBecomesReadyWhenCIIsGreenAndThenWaitsForReview(t *testing.T) {
	t.Parallel()
	h := newHookRig(t, "peopledraft", slowPoll, `  - name: draft
    repo: %[1]s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%[3]q]}
    done_check:
      commands: ["test -s NOTES.md"]
      ci: {forge: tea, required: [test], wait: 5m}
    deliver: {forge: tea, repo: %[2]s, mode: pull_request, title: "outerloop: draft", draft_until: ci_green, review: {required_approvals: 1}}
`)
	reviewer := h.gs.NewCollaborator(t, h.repo, "reviewer")
	h.startWorker(t, "peopledraft")
	ctx := context.Background()
	it := h.submit(t, "draft")
	it = h.awaitWait(t, it.ID, workitems.WaitCI, 1)
	first := *it.Delivery
	if first.Outcome != workitems.DeliveryPROpened || first.PR == nil || !first.PR.Draft {
		t.Fatalf("attempt 1 must open a draft: %+v %+v", first, first.PR)
	}
	pr, err := h.Forges["tea"].PullRequest(ctx, h.repo.Slug, first.PR.Number)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Draft || !strings.HasPrefix(pr.Title, "WIP: ") {
		t.Fatalf("on the forge: draft %v, title %q; want a WIP: draft", pr.Draft, pr.Title)
	}

	h.status(t, first.PushedSHA, "success")
	it = h.awaitWait(t, it.ID, workitems.WaitReview, 1)
	if pr, err = h.Forges["tea"].PullRequest(ctx, h.repo.Slug, first.PR.Number); err != nil {
		t.Fatal(err)
	}
	if pr.Draft || pr.Title != "outerloop: draft" || pr.State != workitems.PROpen {
		t.Fatalf("after CI green, on the forge: draft %v, title %q, %s; want ready, open", pr.Draft, pr.Title, pr.State)
	}
	if it.Delivery.PR == nil || it.Delivery.PR.Draft {
		t.Fatalf("the item's record still says draft: %+v", it.Delivery.PR)
	}
	if steps := stepsOf(t, h, it.ID); countOf(steps, string(workitems.StepReady)) != 1 {
		t.Fatalf("want one ready_for_review step: %v", steps)
	}
	if by := wokenBy(t, h.sys, it.ID); len(by) == 0 || slices.ContainsFunc(by, func(b string) bool { return b != string(workitems.WakeWebhook) }) {
		t.Fatalf("every wake must be a webhook's: %v", by)
	}

	reviewer.API(t, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", h.repo.Slug, first.PR.Number),
		map[string]any{"event": "APPROVED", "body": "Good.", "commit_id": first.PushedSHA}, http.StatusOK, nil)
	it = awaitState(t, h.Store, it.ID, workitems.StateClosed, workitems.StateEscalated, workitems.StateFailed)
	if it.State != workitems.StateClosed || len(it.Attempts) != 1 {
		t.Fatalf("an approval must close it: %s %+v\n%v", it.State, lastDecision(it), trail(t, h.sys, it.ID))
	}
	if pr, _ = h.Forges["tea"].PullRequest(ctx, h.repo.Slug, first.PR.Number); pr.Draft {
		t.Fatalf("the pull request is a draft again: %q", pr.Title)
	}
}
