package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"outerloop/delivery"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// repo is a workspace as the worker makes one: files committed as the base commit.
type repo struct {
	t    *testing.T
	dir  string
	base string
}

func newRepo(t *testing.T, files map[string]string) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.write(files)
	r.git("init", "-q")
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", "outerloop: attempt base")
	r.base = r.git("rev-parse", "HEAD")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=base", "-c", "user.email=base@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// raw is git's stdout untrimmed (patches end with a newline).
func (r *repo) raw(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("git", append([]string{"-C", r.dir}, args...)...).Output()
	if err != nil {
		r.t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

func (r *repo) write(files map[string]string) {
	r.t.Helper()
	for name, body := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *repo) commitsOnBase() int {
	r.t.Helper()
	var n int
	fmt.Sscan(r.git("rev-list", "--count", r.base+"..HEAD"), &n)
	return n
}

const calc = "package calc\n\nfunc Add(a, b int) int { return a - b }\n"

// events records what Deliver emits.
type events struct {
	mu  sync.Mutex
	evs []workitems.Event
}

func (e *events) Emit(_ context.Context, ev workitems.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

func (e *events) steps() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		if ev.Type != workitems.EventDelivery {
			out = append(out, "not-a-delivery-event:"+string(ev.Type))
			continue
		}
		out = append(out, ev.Data["step"])
	}
	return out
}

func template(mode workitems.DeliveryMode) *config.Template {
	return &config.Template{Name: "fix-calc", Goal: "Make TestAdd pass.\nDo not touch the tests.", Deliver: config.Deliver{Mode: mode}}
}

var green = workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "all_green", Reasons: []string{"all green: 1 tests passed"},
	Evidence: []workitems.EvidenceRef{{Kind: "test_report", Ref: "go test -json ./...", Summary: "1 passed"}}, Actor: "verifier"}

func request(r *repo, tmpl *config.Template, d workitems.Decision, ev *events) delivery.Request {
	return delivery.Request{Template: tmpl, Item: &workitems.Item{ID: "fix-calc@20261129T031000Z", Goal: tmpl.Goal, Template: tmpl.Name},
		Attempt: 2, Workspace: r.dir, Base: r.base, Decision: d, Verdict: &workitems.Verdict{Summary: "go test: 1 passed"}, Events: ev}
}

func TestAChangeBecomesOneCommitOnTheBaseWithTrailersAndItsPatchIsKept(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc, "README": "calc\n"})
	r.write(map[string]string{"calc.go": strings.Replace(calc, "a - b", "a + b", 1), "notes/new.txt": "one\ntwo\n"})
	ev := &events{}
	res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, ev))
	if err != nil {
		t.Fatal(err)
	}
	d := res.Delivery
	if d.Outcome != workitems.DeliveryPatched {
		t.Fatalf("delivery %+v", d)
	}
	if r.commitsOnBase() != 1 || r.git("rev-parse", "HEAD") != d.Commit || r.git("rev-parse", "HEAD^") != r.base || d.Base != r.base {
		t.Fatalf("want one commit on the base at HEAD: %+v", d)
	}
	if d.Tree != r.git("rev-parse", "HEAD^{tree}") || d.BaseTree != r.git("rev-parse", r.base+"^{tree}") || r.git("status", "--porcelain") != "" {
		t.Fatal("the commit must hold the whole working tree")
	}
	msg := r.git("log", "-1", "--format=%B")
	for _, want := range []string{"Make TestAdd pass.\n\n", "Verified by outerloop (all_green): all green: 1 tests passed.",
		"Evidence: go test: 1 passed", "\n\nOuterloop-Item: fix-calc@20261129T031000Z\nOuterloop-Attempt: 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	if got := r.git("log", "-1", "--format=%an <%ae>|%cn <%ce>"); got != "outerloop <outerloop@localhost>|outerloop <outerloop@localhost>" {
		t.Errorf("author|committer %q", got)
	}
	if trailers := r.git("log", "-1", "--format=%(trailers:key=Outerloop-Item,valueonly)"); trailers != "fix-calc@20261129T031000Z" {
		t.Errorf("git does not read the trailer: %q", trailers)
	}
	want := r.raw("diff", r.base, d.Commit)
	if string(res.Patch) != want || d.PatchBytes != int64(len(want)) || d.PatchTruncated {
		t.Fatalf("the patch must be exactly git diff base commit:\n%s\nwant\n%s", res.Patch, want)
	}
	if d.FileCount != 2 || d.Added != 3 || d.Deleted != 1 || d.Files[0] != (workitems.ChangedFile{Path: "calc.go", Added: 1, Deleted: 1}) ||
		d.Files[1] != (workitems.ChangedFile{Path: "notes/new.txt", Added: 2}) {
		t.Fatalf("files %+v (+%d -%d)", d.Files, d.Added, d.Deleted)
	}
	if fmt.Sprint(ev.steps()) != "[committed]" {
		t.Fatalf("events %v", ev.steps())
	}
	// The patch applies to the base: it is the change.
	check := newRepo(t, map[string]string{"calc.go": calc, "README": "calc\n"})
	apply := exec.Command("git", "-C", check.dir, "apply", "--index", "-")
	apply.Stdin = bytes.NewReader(res.Patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("the patch does not apply to the base: %v %s", err, out)
	}
	if check.git("write-tree") != d.Tree {
		t.Fatal("the applied patch gives another tree")
	}
}

func TestAResumedAttemptReusesItsCommit(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	r.write(map[string]string{"calc.go": "fixed\n"})
	d := delivery.New(delivery.Options{})
	ev := &events{}
	first, err := d.Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, ev))
	if err != nil {
		t.Fatal(err)
	}
	second, err := d.Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, ev))
	if err != nil {
		t.Fatal(err)
	}
	if second.Delivery.Commit != first.Delivery.Commit || r.commitsOnBase() != 1 || !bytes.Equal(first.Patch, second.Patch) {
		t.Fatalf("a resumed delivery must reuse the commit: %s vs %s, %d commits", first.Delivery.Commit, second.Delivery.Commit, r.commitsOnBase())
	}
	if fmt.Sprint(ev.steps()) != "[committed reused]" {
		t.Fatalf("events %v", ev.steps())
	}
	// Another attempt of the item (or another item) does not reuse it: a new commit on the base.
	other := request(r, template(workitems.DeliverPatch), green, ev)
	other.Attempt = 3
	third, err := d.Deliver(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if third.Delivery.Commit == first.Delivery.Commit || r.commitsOnBase() != 1 || third.Delivery.Tree != first.Delivery.Tree {
		t.Fatalf("attempt 3 must make its own commit on the base: %+v", third.Delivery)
	}
}

// A patch another item of the template delivered last, with the same tree on the same base
// tree, is nothing new: the record says unchanged and names it (the policy's already_delivered
// closes it); the item's own earlier patch, another tree or another base tree is delivered.
func TestAPatchAnotherItemDeliveredLastIsUnchanged(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	r.write(map[string]string{"calc.go": "fixed\n"})
	d := delivery.New(delivery.Options{})
	first, err := d.Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, &events{}))
	if err != nil || first.Delivery.Outcome != workitems.DeliveryPatched {
		t.Fatalf("first: %v %+v", err, first.Delivery)
	}
	last := func(item string, tree, baseTree string) *itemstore.LastDelivered {
		return &itemstore.LastDelivered{Item: item, Attempt: 1, Tree: tree, BaseTree: baseTree, Commit: "c0ffee"}
	}
	for _, c := range []struct {
		name      string
		delivered *itemstore.LastDelivered
		want      workitems.DeliveryOutcome
	}{
		{"another item's same tree on the same base tree", last("fix-calc@earlier", first.Delivery.Tree, first.Delivery.BaseTree), workitems.DeliveryUnchanged},
		{"the item's own earlier patch", last("fix-calc@20261129T031000Z", first.Delivery.Tree, first.Delivery.BaseTree), workitems.DeliveryPatched},
		{"another tree", last("fix-calc@earlier", "another", first.Delivery.BaseTree), workitems.DeliveryPatched},
		{"another base tree", last("fix-calc@earlier", first.Delivery.Tree, "moved"), workitems.DeliveryPatched},
		{"nothing delivered yet", nil, workitems.DeliveryPatched},
	} {
		ev := &events{}
		req := request(r, template(workitems.DeliverPatch), green, ev)
		req.Delivered = c.delivered
		res, err := d.Deliver(context.Background(), req)
		if err != nil || res.Delivery.Outcome != c.want {
			t.Errorf("%s: %v %+v, want %s", c.name, err, res.Delivery, c.want)
			continue
		}
		if c.want == workitems.DeliveryUnchanged {
			if s := res.Delivery.SameAs; s == nil || s.Item != "fix-calc@earlier" || s.Commit != "c0ffee" || fmt.Sprint(ev.steps()) != "[reused unchanged]" {
				t.Errorf("%s: same as %+v, events %v", c.name, s, ev.steps())
			}
		} else if res.Delivery.SameAs != nil {
			t.Errorf("%s: same as %+v", c.name, res.Delivery.SameAs)
		}
	}
}

func TestCommitsTheLoopMadeItselfAreFoldedIntoOne(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	r.write(map[string]string{"calc.go": "step 1\n"})
	r.git("commit", "-qam", "agent: step 1")
	r.write(map[string]string{"calc.go": "step 2\n", "b.go": "b\n"})
	r.git("add", "b.go")
	r.git("commit", "-qm", "agent: step 2")
	r.write(map[string]string{"c.go": "uncommitted\n"})
	res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, &events{}))
	if err != nil {
		t.Fatal(err)
	}
	if r.commitsOnBase() != 1 || r.git("rev-parse", "HEAD^") != r.base || res.Delivery.FileCount != 3 {
		t.Fatalf("want one commit with all three files on the base: %d commits, %+v", r.commitsOnBase(), res.Delivery.Files)
	}
}

func TestNothingIsCommittedWhenNothingChanged(t *testing.T) {
	t.Parallel()
	tmpl := template(workitems.DeliverPatch)
	tmpl.DoneCheck.Reports = []string{"report.xml", "out/*.json", "../escape.xml", "/abs.xml"}
	t.Run("rule no_change from the verifier", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t, map[string]string{"calc.go": calc})
		noChange := workitems.Decision{Outcome: workitems.OutcomeClose, Rule: workitems.RuleNoChange, Reasons: []string{"unchanged"}, Actor: "verifier"}
		ev := &events{}
		res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, tmpl, noChange, ev))
		if err != nil || res.Delivery.Outcome != workitems.DeliveryUnchanged || res.Delivery.Commit != "" || res.Patch != nil {
			t.Fatalf("%v %+v", err, res.Delivery)
		}
		if r.git("rev-parse", "HEAD") != r.base || fmt.Sprint(ev.steps()) != "[unchanged]" {
			t.Fatalf("nothing may be committed: %v", ev.steps())
		}
	})
	t.Run("only the done check's reports changed", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t, map[string]string{"calc.go": calc})
		r.write(map[string]string{"report.xml": "<testsuites/>", "out/a.json": "{}"})
		res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, tmpl, green, &events{}))
		// A fact (unchanged, no same-as): the policy closes it as no_change.
		if err != nil || res.Delivery.Outcome != workitems.DeliveryUnchanged || res.Delivery.SameAs != nil || r.git("rev-parse", "HEAD") != r.base {
			t.Fatalf("%v %+v", err, res.Delivery)
		}
	})
	t.Run("reports stay out of a real change", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t, map[string]string{"calc.go": calc})
		r.write(map[string]string{"report.xml": "<testsuites/>", "out/a.json": "{}", "calc.go": "fixed\n"})
		res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, tmpl, green, &events{}))
		if err != nil || res.Delivery.FileCount != 1 || res.Delivery.Files[0].Path != "calc.go" {
			t.Fatalf("%v %+v", err, res.Delivery)
		}
	})
}

func TestNotGreenCommitsNothing(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	r.write(map[string]string{"calc.go": "half done\n"})
	for _, d := range []workitems.Decision{
		{Outcome: workitems.OutcomeRetry, Rule: "tests_failed", Next: &workitems.Condition{Input: "x"}},
		{Outcome: workitems.OutcomeEscalate, Rule: "max_attempts"},
	} {
		ev := &events{}
		res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, template(workitems.DeliverPatch), d, ev))
		if err != nil || res.Delivery != nil || res.Patch != nil || len(ev.steps()) != 0 {
			t.Fatalf("%s: %v %+v %v", d.Rule, err, res, ev.steps())
		}
	}
	if r.git("rev-parse", "HEAD") != r.base {
		t.Fatal("a failing attempt must not be committed")
	}
}

func TestForgeModesWithoutAForgeRecordTheCause(t *testing.T) {
	t.Parallel()
	for _, mode := range []workitems.DeliveryMode{workitems.DeliverBranch, workitems.DeliverPullRequest} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			r := newRepo(t, map[string]string{"calc.go": calc})
			r.write(map[string]string{"calc.go": "fixed\n"})
			ev := &events{}
			res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, template(mode), green, ev))
			if err != nil {
				t.Fatalf("a configuration error is a decision, not an error: %v", err)
			}
			// A fact for the policy (delivery_failed escalates it), with the cause.
			del := res.Delivery
			if !strings.Contains(del.Error, "forge delivery not configured") || !strings.Contains(del.Error, string(mode)) {
				t.Fatalf("delivery %+v", del)
			}
			if del.Outcome != workitems.DeliveryFailed || del.ErrorClass != workitems.ClassInvalidInput || del.Commit == "" || len(res.Patch) == 0 {
				t.Fatalf("the commit and its patch are kept for the person: %+v", del)
			}
			if fmt.Sprint(ev.steps()) != "[committed publish failed]" {
				t.Fatalf("events %v", ev.steps())
			}
		})
	}
}

// publisher is a forge stand-in that records what it was given.
type publisher struct {
	mu        sync.Mutex
	errs      []error // returned by the next Publish calls, in order
	published []delivery.Publication
	followups []delivery.Followup
	result    func(p delivery.Publication) delivery.Published
	followErr error
}

func (p *publisher) Publish(_ context.Context, pub delivery.Publication) (delivery.Published, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = append(p.published, pub)
	if len(p.errs) > 0 {
		err := p.errs[0]
		p.errs = p.errs[1:]
		return delivery.Published{}, err
	}
	return p.result(pub), nil
}

func (p *publisher) Merge(_ context.Context, m delivery.Merge) (workitems.Delivery, error) {
	return m.Delivery, errors.New("test: no merge")
}

func (p *publisher) Withdraw(context.Context, delivery.Withdrawal) (workitems.Delivery, error) {
	return workitems.Delivery{}, nil
}

func (p *publisher) Ready(_ context.Context, r delivery.Ready) (workitems.Delivery, error) {
	return r.Delivery, nil
}

func (p *publisher) Cleanup(context.Context, delivery.Cleanup) error { return nil }

func (p *publisher) Followup(_ context.Context, f delivery.Followup) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.followups = append(p.followups, f)
	return p.followErr
}

func opened(p delivery.Publication) delivery.Published {
	d := p.Delivery
	d.Outcome, d.Branch, d.PushedSHA = workitems.DeliveryPROpened, "outerloop/fix-calc", d.Commit
	d.PR = &workitems.PullRequest{Number: 7, URL: "https://forge.example/acme/calc/pulls/7", State: workitems.PROpen}
	d.Checks = []workitems.CheckResult{{Name: "test", State: workitems.CheckSuccess, URL: "https://ci.example/1"}}
	return delivery.Published{Delivery: d}
}

func TestAPublisherGetsTheCommitAndTransientErrorsAreRetried(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	r.write(map[string]string{"calc.go": "fixed\n"})
	pub := &publisher{result: opened, errs: []error{workitems.Classify(workitems.ClassTransient, errors.New("forge: 502 bad gateway"))}}
	d := delivery.New(delivery.Options{Publisher: pub})
	ev := &events{}
	req := request(r, template(workitems.DeliverPullRequest), green, ev)
	if _, err := d.Deliver(context.Background(), req); workitems.ClassOf(err) != workitems.ClassTransient || !strings.Contains(err.Error(), "502") {
		t.Fatalf("a transient publish error must come back to be retried: %v", err)
	}
	res, err := d.Deliver(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.published) != 2 || pub.published[0].Delivery.Commit != pub.published[1].Delivery.Commit || r.commitsOnBase() != 1 {
		t.Fatal("the retry must publish the same commit")
	}
	p := pub.published[1]
	if p.Delivery.Mode != workitems.DeliverPullRequest || p.Delivery.Base != r.base || p.Delivery.Tree == "" || len(p.Delivery.Files) != 1 || p.Workspace != r.dir {
		t.Fatalf("publication %+v", p.Delivery)
	}
	del := res.Delivery
	if del.Outcome != workitems.DeliveryPROpened || del.PR.Number != 7 || del.Attempt != 2 || len(res.Patch) == 0 {
		t.Fatalf("result %+v", del)
	}
	if fmt.Sprint(ev.steps()) != "[committed publish retrying reused publish]" {
		t.Fatalf("events %v", ev.steps())
	}

	// A permission error is not transient: a failed delivery with its class (the policy escalates).
	r3 := newRepo(t, map[string]string{"calc.go": calc})
	r3.write(map[string]string{"calc.go": "fixed\n"})
	pub3 := &publisher{errs: []error{workitems.Classify(workitems.ClassPermission, errors.New("forge: 403 push to a protected branch"))}}
	res, err = delivery.New(delivery.Options{Publisher: pub3}).Deliver(context.Background(), request(r3, template(workitems.DeliverBranch), green, &events{}))
	if err != nil || res.Delivery.Outcome != workitems.DeliveryFailed || res.Delivery.ErrorClass != workitems.ClassPermission ||
		!strings.Contains(res.Delivery.Error, "protected branch") {
		t.Fatalf("%v %+v", err, res)
	}
}

func TestARetryOrEscalationOfAnItemWithAPullRequestIsFollowedUp(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	pub := &publisher{followErr: workitems.Classify(workitems.ClassTransient, errors.New("forge down"))}
	d := delivery.New(delivery.Options{Publisher: pub})
	esc := workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "ci_missing", Summary: "no CI"}
	ev := &events{}
	req := request(r, template(workitems.DeliverPullRequest), esc, ev)
	f := delivery.Followup{Template: req.Template, Item: req.Item, Attempt: 2, Decision: esc, Events: ev}
	d.Followup(context.Background(), f)
	if len(pub.followups) != 0 {
		t.Fatalf("nothing published before: no followup (%d)", len(pub.followups))
	}
	f.Delivery = workitems.Delivery{Attempt: 1, Branch: "outerloop/fix-calc", PR: &workitems.PullRequest{Number: 3, State: workitems.PROpen}}
	d.Followup(context.Background(), f)
	if res, err := d.Deliver(context.Background(), req); err != nil || res.Delivery != nil {
		t.Fatalf("a decision that is not a close delivers nothing: %v %+v", err, res)
	}
	if len(pub.followups) != 1 || pub.followups[0].Delivery.PR.Number != 3 || pub.followups[0].Decision.Rule != "ci_missing" {
		t.Fatalf("followups %+v", pub.followups)
	}
	if fmt.Sprint(ev.steps()) != "[followup]" || !strings.Contains(ev.evs[0].Message, "failed") || ev.evs[0].Data["class"] != "transient" {
		t.Fatalf("the failed followup must be an event: %+v", ev.evs)
	}
	// A retry tells the forge nothing: its next attempt updates the pull request.
	f.Decision = workitems.Decision{Outcome: workitems.OutcomeRetry, Rule: "ci_failed", Next: &workitems.Condition{Input: "x"}}
	d.Followup(context.Background(), f)
	if len(pub.followups) != 1 || len(ev.steps()) != 1 {
		t.Fatalf("a retry was followed up: %d %v", len(pub.followups), ev.steps())
	}
}

func TestAnOversizedPatchIsCutAtALineAndMarked(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"calc.go": calc})
	var big strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&big, "line %d of a large generated file\n", i)
	}
	r.write(map[string]string{"gen.txt": big.String()})
	const limit = 4096
	res, err := delivery.New(delivery.Options{MaxPatchBytes: limit}).Deliver(context.Background(), request(r, template(workitems.DeliverPatch), green, &events{}))
	if err != nil {
		t.Fatal(err)
	}
	full := r.raw("diff", "--binary", r.base, res.Delivery.Commit)
	d := res.Delivery
	if !d.PatchTruncated || d.PatchBytes != int64(len(full)) || d.Added != 2000 {
		t.Fatalf("record: truncated=%v bytes=%d (full %d)", d.PatchTruncated, d.PatchBytes, len(full))
	}
	body, marker, ok := strings.Cut(string(res.Patch), "# outerloop: patch truncated: ")
	if !ok || len(body) > limit || !strings.HasSuffix(body, "\n") || !strings.HasPrefix(full, body) {
		t.Fatalf("the stored patch must be the full one's first lines within the bound, then the marker (%d bytes)", len(body))
	}
	if !strings.Contains(marker, fmt.Sprintf("of %d bytes kept", len(full))) || !strings.Contains(marker, d.Commit) {
		t.Fatalf("marker %q", marker)
	}
}

func TestOddFileNamesRenamesBinariesAndAConfiguredAuthor(t *testing.T) {
	t.Parallel()
	r := newRepo(t, map[string]string{"old name.go": strings.Repeat("package x // a long enough file to be a rename\n", 5)})
	r.git("mv", "old name.go", "new\tname.go")
	hostile := "<script>alert(1)</script>\n.go"
	r.write(map[string]string{hostile: "x\n", "logo.png": "\x89PNG\x00\x01\x02binary"})
	tmpl := template(workitems.DeliverPatch)
	tmpl.Deliver.Author, tmpl.Deliver.Title = "Release Bot <bot@example.com>", "chore: tidy\nsecond line ignored"
	res, err := delivery.New(delivery.Options{}).Deliver(context.Background(), request(r, tmpl, green, &events{}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]workitems.ChangedFile{}
	for _, f := range res.Delivery.Files {
		got[f.Path] = f
	}
	if f := got["new\tname.go"]; f.From != "old name.go" {
		t.Errorf("rename: %+v (all %+v)", f, res.Delivery.Files)
	}
	if f := got[hostile]; f.Added != 1 {
		t.Errorf("a name with markup and a newline: %+v", f)
	}
	if f := got["logo.png"]; !f.Binary || !strings.Contains(string(res.Patch), "GIT binary patch") {
		t.Errorf("binary: %+v", f)
	}
	if a := r.git("log", "-1", "--format=%an <%ae>|%s"); a != "Release Bot <bot@example.com>|chore: tidy" {
		t.Errorf("author and title: %q", a)
	}
}
