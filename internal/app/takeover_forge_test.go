package app_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/internal/sample"
	"outerloop/lib/fakeclock"
	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
)

// TestALeaseTakeoverDeliversTheSinglePullRequestOfASingleRun is the takeover of a running
// attempt delivered through a real Gitea (mode pull_request), in process: worker A's clock
// freezes in the middle of step 2 (its lease runs out, as in a partition or a SIGKILL), host B
// (a work dir of its own) takes the attempt over from its checkpoint, and the one pull request
// of the template's branch holds exactly the tree and diff an uninterrupted run of the same
// commands delivers (template "single": its own branch). A, waking up, writes nothing. The
// real-process kill of the same flow is TestKilledWorkerIsResumedByAnotherFromItsCheckpoint in
// cmd/outerloop.
func TestALeaseTakeoverDeliversTheSinglePullRequestOfASingleRun(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "takeover", false)
	logDir := t.TempDir()
	runs := filepath.Join(logDir, "runs.log")
	template := func(name string) string {
		return fmt.Sprintf(`  - name: %[1]s
    repo: %[2]s
    goal: survive a takeover
    loop:
      kind: script
      commands:
        - "echo c1 >> %[3]s; echo one > step1.txt"
        - "if [ -f %[4]s/MARK ]; then echo c2-again >> %[3]s; else touch %[4]s/MARK; echo c2-start >> %[3]s; echo half > partial.txt; touch %[4]s/READY; sleep 60; fi; echo two > step2.txt"
        - "test -f step1.txt && %[5]s && echo c3 >> %[3]s"
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %[6]s, mode: pull_request}
`, name, r.CloneURL, runs, logDir, sample.FixCommand, r.Slug)
	}
	logs := &testlog.Buffer{}
	s := openForge(t, gs, forgeConfig(t, gs, template("resumable")+template("single")), logs)
	ctx := context.Background()
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "resumable"})
	if err != nil {
		t.Fatal(err)
	}
	// A's clock is frozen: its heartbeat never renews, so its 300 ms lease runs out.
	frozen := fakeclock.New(time.Now())
	delivering := func(o *worker.HandlerOptions) {
		o.Deliverer, o.Evidence, o.Enqueuer = s.Deliverer, s.Judge, s.Queue
	}
	a, _ := s.host(t, "A", func(o *worker.HandlerOptions) {
		delivering(o)
		o.Clock, o.LeaseTTL = frozen, 300*time.Millisecond
	})
	aDone := make(chan error, 1)
	go func() { aDone <- a.Process(ctx, it.ID, 1) }()
	waitFile(t, filepath.Join(logDir, "READY"))
	if prs := pulls(t, gs, r); len(prs) != 0 {
		t.Fatalf("nothing may be delivered before the attempt ends: %+v", prs)
	}

	b, _ := s.host(t, "B", delivering)
	for deadline := testwait.Deadline(t); ; {
		err := b.Process(ctx, it.ID, 1)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "lease held") {
			t.Fatalf("B: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never took the attempt over: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // asynq's retry delay, in small
	}
	done, err := s.Store.Get(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != workitems.StateClosed || len(done.Attempts) != 1 {
		t.Fatalf("want closed in one attempt: %s after %d: %+v", done.State, len(done.Attempts), done.Decisions)
	}
	at := done.Current()
	if at.Resumes < 1 || !strings.HasPrefix(at.Worker, "B/") || at.Epoch < 2 {
		t.Fatalf("the attempt must be resumed by B: worker %s epoch %d resumes %d", at.Worker, at.Epoch, at.Resumes)
	}
	// A wakes up: its renewal finds a newer epoch, it stops and writes nothing.
	frozen.Advance(time.Second)
	select {
	case err := <-aDone:
		if err != nil {
			t.Fatalf("A should stop quietly, got %v", err)
		}
	case <-testwait.After(t):
		t.Fatal("A did not stop after losing its lease")
	}
	if after, _ := s.Store.Get(ctx, it.ID); after.Version != done.Version {
		t.Fatalf("A changed the item after losing its lease: version %d→%d", done.Version, after.Version)
	}
	if restored := events(t, s, it.ID, workitems.EventWorkspaceRestored); len(restored) != 1 || restored[0].Data["from"] != "snapshot" {
		t.Fatalf("B must restore the checkpointed workspace once: %+v", restored)
	}
	if len(events(t, s, it.ID, workitems.EventAttemptRestarted)) != 0 {
		t.Fatal("the attempt started over")
	}

	// The same commands, uninterrupted (MARK exists: step 2 does not block).
	one, err := s.Queue.Submit(ctx, scheduler.Request{Template: "single"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Process(ctx, one.ID, 1); err != nil {
		t.Fatal(err)
	}
	single, _ := s.Store.Get(ctx, one.ID)
	if single.State != workitems.StateClosed {
		t.Fatalf("the single run: %s %+v", single.State, single.Decisions)
	}
	if got := runsLog(t, logDir); got != "c1 c2-start c2-again c3 c1 c2-again c3" {
		t.Fatalf("command runs %q: across the takeover c1 once, c2 resumed, c3 once; then the single run", got)
	}

	prs := pulls(t, gs, r)
	byBranch := map[string][]giteaPR{}
	for _, pr := range prs {
		byBranch[pr.Head.Ref] = append(byBranch[pr.Head.Ref], pr)
	}
	resumedPRs, singlePRs := byBranch["outerloop/resumable"], byBranch["outerloop/single"]
	if len(resumedPRs) != 1 || len(singlePRs) != 1 {
		t.Fatalf("want one pull request per branch: %+v", prs)
	}
	for _, tc := range []struct {
		it *workitems.Item
		pr giteaPR
	}{{done, resumedPRs[0]}, {single, singlePRs[0]}} {
		d := tc.it.Delivery
		if d == nil || d.Mode != workitems.DeliverPullRequest || d.Outcome != workitems.DeliveryPROpened || d.PR == nil ||
			d.PR.Number != tc.pr.Number || d.PushedSHA != tc.pr.Head.SHA || tc.pr.State != "open" {
			t.Fatalf("%s: delivery %+v, pull request %+v", tc.it.ID, d, tc.pr)
		}
	}
	diff := func(n int) string {
		code, body, err := gs.Do(ctx, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d.diff", r.Slug, n), nil)
		if err != nil || code != http.StatusOK || len(body) == 0 {
			t.Fatalf("pull request %d's diff: HTTP %d, %v", n, code, err)
		}
		return string(body)
	}
	diffResumed, diffSingle := diff(resumedPRs[0].Number), diff(singlePRs[0].Number)
	for _, want := range []string{"+one", "+two", "+func Add(a, b int) int { return a + b }"} {
		if !strings.Contains(diffResumed, want) {
			t.Errorf("the resumed PR's diff lacks %q:\n%s", want, diffResumed)
		}
	}
	// A's half-done step 2 was never checkpointed: B restores the tree before it.
	if strings.Contains(diffResumed, "partial.txt") {
		t.Errorf("the resumed PR holds the interrupted step's partial work:\n%s", diffResumed)
	}
	if diffResumed != diffSingle || done.Delivery.Tree != single.Delivery.Tree {
		t.Fatalf("the PRs differ: trees %s vs %s\nresumed:\n%s\nsingle:\n%s", done.Delivery.Tree, single.Delivery.Tree, diffResumed, diffSingle)
	}
	if !strings.Contains(rawCommitMessage(t, gs, r, resumedPRs[0].Head.SHA), "Outerloop-Item: "+it.ID) {
		t.Fatalf("the pushed commit lacks the trailer for %s", it.ID)
	}
	assertNoToken(t, gs, s, logs, it.ID, one.ID)
}

// rawCommitMessage returns the message of commit sha of r.
func rawCommitMessage(t *testing.T, gs *giteatest.Server, r giteatest.Repo, sha string) string {
	t.Helper()
	var c struct {
		Commit struct {
			Message string `json:"message"`
		} `json:"commit"`
	}
	gs.API(t, http.MethodGet, "/repos/"+r.Slug+"/git/commits/"+sha, nil, http.StatusOK, &c)
	return c.Commit.Message
}
