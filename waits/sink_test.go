package waits_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/waits"
	"outerloop/workitems"
)

// prForge answers the two reads a command needs: the pull request (its body names the item) and
// the commenter's permission. The rest of forge.Forge is not called by the sink.
type prForge struct {
	forge.Forge
	body  string
	perms map[string]forge.Permission
}

func (f *prForge) PullRequest(_ context.Context, repo string, n int) (*forge.PullRequest, error) {
	return &forge.PullRequest{Number: n, State: forge.PROpen, Body: f.body}, nil
}

func (f *prForge) Permission(_ context.Context, repo, user string) (forge.Permission, error) {
	return f.perms[user], nil
}

type resolver struct {
	mu  sync.Mutex
	got []workitems.Resolution
	s   *workitems.Store
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
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-a", Check: &hooks.Check{Name: "test", State: forge.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/other", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: forge.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "gh", Repo: "acme/calc", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: forge.CheckSuccess}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-unknown", Check: &hooks.Check{Name: "test", State: forge.CheckFailure}},
		{Kind: hooks.KindCheck, Forge: "tea", Repo: "acme/calc", SHA: "sha-b", Check: &hooks.Check{Name: "test", State: forge.CheckPending}},
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
	if len(res.got) != 1 || res.got[0].Actor != "tea:ana" || res.got[0].Action != workitems.ResolveRetry ||
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
	// A pull request outerloop did not open: nothing happens.
	f.body = "a person's pull request"
	if err := sink.Handle(ctx, comment("ana", "/outerloop cancel")); err != nil || len(res.got) != 1 {
		t.Fatalf("%v %d", err, len(res.got))
	}
}

// A person who merges or closes the pull request of an escalated item ends it: merged closes,
// closed cancels, by that person, audited. A waiting item is woken instead.
func TestAPullRequestAPersonEndsEndsItsEscalatedItem(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	marker := func(id string) string {
		return "<!-- outerloop: item=" + id + " tree=" + strings.Repeat("cd", 20) + " -->"
	}
	for _, id := range []string{"m@1", "c@1"} {
		r.park(t, id, "sha-"+id)
		if _, err := r.store.Wake(ctx, id, 1, workitems.WakeDeadline, workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "ci_missing", Actor: "verifier"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f := &prForge{perms: map[string]forge.Permission{}}
	res := &resolver{s: r.store}
	aud := &audits{}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: res, Forges: forge.Set{"tea": f}, Auditor: aud}
	for _, c := range []struct {
		id     string
		action hooks.PRAction
		want   workitems.State
	}{{"m@1", hooks.PRMerged, workitems.StateClosed}, {"c@1", hooks.PRClosed, workitems.StateCancelled}} {
		f.body = marker(c.id)
		e := hooks.Event{Kind: hooks.KindPullRequest, Forge: "tea", Repo: "acme/calc", Number: 9, IsPR: true, Sender: "ana",
			PullRequest: &hooks.PullRequest{Action: c.action}}
		if err := sink.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		it, err := r.store.Get(ctx, c.id)
		if err != nil || it.State != c.want || it.Resolution[len(it.Resolution)-1].Actor != "tea:ana" {
			t.Fatalf("%s: %v %s %+v", c.id, err, it.State, it.Resolution)
		}
	}
	if len(aud.got) != 2 || !aud.got[0].OK || aud.got[0].Action != "pull request merged" {
		t.Fatalf("audit %+v", aud.got)
	}
}
