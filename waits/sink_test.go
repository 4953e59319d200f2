package waits_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"outerloop/delivery"
	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/publish"
	"outerloop/waits"
	"outerloop/workitems"
	"outerloop/workitems/itemstore"
)

// prForge answers what the sink and the judge read of a forge: the pull request (its body
// names the item; its state, and who merged or closed it), its reviews, outerloop's account and
// each account's permission, by repository. The rest of forge.Forge is not called.
type prForge struct {
	forge.Forge
	mu       sync.Mutex
	body     string
	state    workitems.PRState // "": open
	mergedBy string
	closedBy string
	reviews  []forge.Review
	perms    map[string]forge.Permission // by user, on any repository
	repoPerm map[string]forge.Permission // by "repo user", first
	asked    []string                    // the permission questions, "repo user"
	head     string                      // the head branch and its commit
	headSHA  string
}

func (f *prForge) PullRequest(_ context.Context, repo string, n int) (*forge.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr := &forge.PullRequest{Number: n, State: cmp.Or(f.state, workitems.PROpen), Body: f.body, Head: f.head, HeadSHA: f.headSHA}
	switch pr.State {
	case workitems.PRMerged:
		pr.MergedBy = f.mergedBy
	case workitems.PRClosed:
		pr.ClosedBy = f.closedBy
	}
	return pr, nil
}

func (f *prForge) Permission(_ context.Context, repo, user string) (forge.Permission, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, repo+" "+user)
	if p, ok := f.repoPerm[repo+" "+user]; ok {
		return p, nil
	}
	return cmp.Or(f.perms[user], forge.PermNone), nil
}

func (f *prForge) Reviews(context.Context, string, int) ([]forge.Review, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reviews), nil
}

func (f *prForge) Self(context.Context) (string, error) { return "outerloop-bot", nil }

func (f *prForge) questions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

type resolver struct {
	mu  sync.Mutex
	got []workitems.Resolution
	s   *itemstore.Store
}

func (r *resolver) Resolve(ctx context.Context, id string, res workitems.Resolution) (*workitems.Item, error) {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
	return r.s.Resolve(ctx, id, res)
}

type audits struct {
	mu  sync.Mutex
	got []waits.AuditEntry
}

func (a *audits) Audit(_ context.Context, e waits.AuditEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, e)
}

// A forge event wakes exactly the waiting items it is about — the commit's, on the same forge
// and repository; the pull request's — and nothing else.
func TestForgeEventsWakeTheItemsTheyAreAbout(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.park(t, "a", "sha-a")
	r.park(t, "b", "sha-b")
	// Waits for CI here carry no forge (provider webhook); make them look like a forge's.
	for _, id := range []string{"a", "b"} {
		if _, err := r.store.Update(ctx, id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
			it.Wait.Forge, it.Wait.Repo = "tea", "acme/calc"
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes}
	events := []hooks.Event{
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-a", Check: &hooks.Check{Name: "test", State: workitems.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/other", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: workitems.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "gh", Repo: "acme/calc", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: workitems.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-unknown", Check: &hooks.Check{Name: "test", State: workitems.CheckFailure}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: workitems.CheckPending}},
	}
	for _, e := range events {
		if err := sink.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got := r.wakes.got()
	if len(got) != 1 || got[workitems.WakeTaskID("a", 1)] != workitems.WakeWebhook {
		t.Fatalf("wakes %v: only a's commit on tea/acme/calc was reported final (b's is still pending)", got)
	}
}

// /outerloop commands act for users with write access, as those users, and are audited either way.
func TestCommandsOnAPullRequestActForWritersOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.park(t, "w@1", "sha-w")
	r.deliveredPR(t, "w@1", "tea", "acme/calc", 7)
	f := &prForge{body: "Made by outerloop.\n\n<!-- outerloop: item=w@1 tree=" + strings.Repeat("ab", 20) + " -->",
		perms: map[string]forge.Permission{"ana": forge.PermWrite, "rex": forge.PermRead}}
	res := &resolver{s: r.store}
	aud := &audits{}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: res, Forges: forge.Set{"tea": f}, Auditor: aud}
	comment := func(user, body string) hooks.Event {
		return hooks.Event{Kind: hooks.KindComment, Forge: "tea", Repo: "acme/calc", Number: 7, IsPR: true, Sender: user,
			Comment: &hooks.Comment{User: user, Body: body}}
	}
	for _, e := range []hooks.Event{
		comment("ana", "looks odd"),                                   // no command
		comment("rex", "/outerloop retry"),                            // read access: refused
		comment("ana", "Thanks!\n/outerloop retry use the v2 client"), // acts
	} {
		if err := sink.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if len(res.got) != 1 || res.got[0].Actor != "tea:ana" || res.got[0].Action != workitems.ResolveRetry || res.got[0].Rule != workitems.RulePersonRetry ||
		!strings.Contains(res.got[0].Input, "ana asked for a retry on pull request #7") || !strings.Contains(res.got[0].Input, "use the v2 client") {
		t.Fatalf("resolutions %+v", res.got)
	}
	it, err := r.store.Get(ctx, "w@1")
	if err != nil || it.State != workitems.StateQueued || it.Attempt != 2 || it.Wait != nil {
		t.Fatalf("a retry from the pull request queues attempt 2: %v %+v", err, it)
	}
	if len(aud.got) != 2 || aud.got[0].OK || aud.got[0].Actor != "tea:rex" || !strings.Contains(aud.got[0].Detail, "read access") ||
		!aud.got[1].OK || aud.got[1].Target != "w@1" || aud.got[1].Action != "outerloop retry" {
		t.Fatalf("audit %s", fmt.Sprintf("%+v", aud.got))
	}
	// The item is queued now: a second retry is not the person table's to take (it acts on
	// waiting or escalated items); refused and audited, naming the state, and nothing changes.
	if err := sink.Handle(ctx, comment("ana", "/outerloop retry again")); err != nil {
		t.Fatal(err)
	}
	if len(res.got) != 1 || len(aud.got) != 3 || aud.got[2].OK ||
		!strings.Contains(aud.got[2].Detail, "refused: retry does not act on item w@1: it is queued") {
		t.Fatalf("a retry of a queued item: resolutions %+v, audit %+v", res.got, aud.got)
	}
	// A pull request outerloop did not open: nothing happens.
	f.body = "a person's pull request"
	if err := sink.Handle(ctx, comment("ana", "/outerloop cancel")); err != nil || len(res.got) != 1 {
		t.Fatalf("%v %d", err, len(res.got))
	}
}

// A person with write access who merges or closes the pull request of an escalated item ends
// it: merged closes, closed cancels, by that person, audited. A waiting item is woken instead.
func TestAPullRequestAPersonEndsEndsItsEscalatedItem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	marker := func(id string) string {
		return "<!-- outerloop: item=" + id + " tree=" + strings.Repeat("cd", 20) + " -->"
	}
	for _, id := range []string{"m@1", "c@1"} {
		r.escalated(t, id, "tea", "acme/calc", 9)
	}
	f := &prForge{perms: map[string]forge.Permission{"ana": forge.PermWrite}}
	res := &resolver{s: r.store}
	aud := &audits{}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: res, Forges: forge.Set{"tea": f}, Auditor: aud}
	for _, c := range []struct {
		id     string
		action hooks.PRAction
		want   workitems.State
		rule   workitems.RuleName
	}{{"m@1", hooks.PRMerged, workitems.StateClosed, workitems.RulePersonMerged}, {"c@1", hooks.PRClosed, workitems.StateCancelled, workitems.RulePersonClosed}} {
		f.body = marker(c.id)
		e := hooks.Event{Kind: hooks.KindPullRequest, Forge: "tea", Repo: "acme/calc", Number: 9, IsPR: true, Sender: "ana",
			PullRequest: &hooks.PullRequest{Action: c.action}}
		if err := sink.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		it, err := r.store.Get(ctx, c.id)
		if err != nil || it.State != c.want || it.Resolution[len(it.Resolution)-1].Actor != "tea:ana" || it.Resolution[len(it.Resolution)-1].Rule != c.rule {
			t.Fatalf("%s: %v %s %+v", c.id, err, it.State, it.Resolution)
		}
		evs, err := r.store.Events(ctx, c.id, "0", 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if last := evs[len(evs)-1]; last.Type != workitems.EventResolved || last.Data["rule"] != string(c.rule) {
			t.Fatalf("%s: the resolved event does not name its row: %+v", c.id, last)
		}
	}
	if len(aud.got) != 2 || !aud.got[0].OK || aud.got[0].Action != "pull request merged" {
		t.Fatalf("audit %+v", aud.got)
	}
}

type cleaner struct {
	mu  sync.Mutex
	got []delivery.Cleanup
}

func (c *cleaner) Cleanup(_ context.Context, cl delivery.Cleanup) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, cl)
	return nil
}

// "/outerloop rebase" from a person with write access hands the branch people hold back to
// outerloop, as it is now; from anyone else it changes nothing. A merged or closed pull request
// of the item's own asks for its branch to be cleaned up, with the item's template.
func TestRebaseHandsBackAndAnEndedPullRequestCleansUp(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	r.escalated(t, "h@1", "tea", "acme/calc", 5)
	pat := strings.Repeat("9", 40)
	f := &prForge{body: "<!-- outerloop: item=h@1 tree=" + strings.Repeat("ab", 20) + " -->", head: "outerloop/h", headSHA: pat,
		perms: map[string]forge.Permission{"ana": forge.PermWrite, "rex": forge.PermRead}}
	ledger := publish.NewMemoryBranches()
	key := publish.BranchKey{Forge: "tea", Repo: "acme/calc", Branch: "outerloop/h"}
	if _, err := ledger.Hold(ctx, key, workitems.BranchHold{User: "Pat", SHA: pat, Commits: 1}); err != nil {
		t.Fatal(err)
	}
	cl := &cleaner{}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: &resolver{s: r.store}, Forges: forge.Set{"tea": f}, Auditor: &audits{},
		Branches: ledger, Cleaner: cl}
	comment := func(user string) hooks.Event {
		return hooks.Event{Kind: hooks.KindComment, Forge: "tea", Repo: "acme/calc", Number: 5, IsPR: true, Sender: user,
			Comment: &hooks.Comment{User: user, Body: "/outerloop rebase"}}
	}
	if err := sink.Handle(ctx, comment("rex")); err != nil {
		t.Fatal(err)
	}
	if rec, _ := ledger.Branch(ctx, key); rec.Hold == nil {
		t.Fatal("a reader's /outerloop rebase handed the branch back")
	}
	if err := sink.Handle(ctx, comment("ana")); err != nil {
		t.Fatal(err)
	}
	if rec, _ := ledger.Branch(ctx, key); rec.Hold != nil || !rec.Ours(pat) {
		t.Fatalf("after ana's /outerloop rebase: %+v", rec)
	}
	evs, err := r.store.Events(ctx, "h@1", "0", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e workitems.Event) bool {
		return e.Data["step"] == string(workitems.StepHandedBack) && e.Actor == "tea:ana"
	}) {
		t.Fatalf("no handed_back event by ana: %+v", evs)
	}

	f.state = workitems.PRMerged
	merged := hooks.Event{Kind: hooks.KindPullRequest, Forge: "tea", Repo: "acme/calc", Number: 5, IsPR: true, Sender: "ana",
		PullRequest: &hooks.PullRequest{Action: hooks.PRMerged}}
	if err := sink.Handle(ctx, merged); err != nil {
		t.Fatal(err)
	}
	if len(cl.got) != 1 || cl.got[0].Delivery.Branch != "outerloop/h" || cl.got[0].Delivery.PR.State != workitems.PRMerged || cl.got[0].Item.ID != "h@1" {
		t.Fatalf("cleanups %+v", cl.got)
	}
	// Another repository's pull request naming the item: not its own, nothing cleaned.
	other := merged
	other.Repo = "acme/other"
	if err := sink.Handle(ctx, other); err != nil || len(cl.got) != 1 {
		t.Fatalf("%v, cleanups %d", err, len(cl.got))
	}
}
