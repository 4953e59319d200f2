package waits_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/lib/fakeclock"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// A pull request's body is anyone's to write: the tests here give every pull request the
// item's marker, so only the delivery record and the actor's permission can stop an event.

// markerOf is the hidden marker outerloop's pull request carries for item id.
func markerOf(id string) string {
	return "Made by outerloop.\n\n<!-- outerloop: item=" + id + " tree=" + strings.Repeat("ef", 20) + " -->"
}

// deliveredPR records, as a forge publisher does, that the item's current attempt opened pull
// request pr. A pr without forge and repository is a record written before they were kept.
func (r *rig) deliveredPR(t testing.TB, id, forgeName, repo string, number int) {
	t.Helper()
	if _, err := r.store.Update(context.Background(), id, nil, func(it *workitems.Item) ([]workitems.Event, error) {
		d := workitems.Delivery{}
		if it.Delivery != nil {
			d = *it.Delivery
		}
		d.Mode, d.Outcome = workitems.DeliverPullRequest, workitems.DeliveryPROpened
		d.Forge, d.Repo, d.PR = forgeName, repo, &workitems.PullRequest{Number: number, State: workitems.PROpen}
		it.Delivery = &d
		if a := it.Current(); a != nil {
			c := d
			a.Delivery = &c
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// escalated makes an item that waits for a person after its change was pushed; with number > 0
// its delivery opened that pull request (forgeName and repo "" make it an old record).
func (r *rig) escalated(t testing.TB, id, forgeName, repo string, number int) {
	t.Helper()
	r.park(t, id, "sha-"+id)
	if number > 0 {
		r.deliveredPR(t, id, forgeName, repo, number)
	}
	if _, err := r.store.Wake(context.Background(), id, 1, workitems.WakeDeadline,
		workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "ci_missing", Actor: "verifier"}, nil); err != nil {
		t.Fatal(err)
	}
}

// refusals are the item's forge_refused events.
func (r *rig) refusals(t testing.TB, id string) []workitems.Event {
	t.Helper()
	evs, err := r.store.Events(context.Background(), id, "", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(evs, func(e workitems.Event) bool { return e.Type != workitems.EventForgeRefused })
}

// commentEvent is user's comment on pull request pr.
func commentEvent(pr workitems.ForgePR, user, body string) hooks.Event {
	return hooks.Event{Kind: hooks.KindComment, Forge: pr.Forge, Repo: pr.Repo, Number: pr.Number, IsPR: true, Sender: user,
		Comment: &hooks.Comment{User: user, Body: body}}
}

// endEvent is pull request pr merged or closed by user.
func endEvent(pr workitems.ForgePR, user string, action hooks.PRAction) hooks.Event {
	e := hooks.Event{Kind: hooks.KindPullRequest, Forge: pr.Forge, Repo: pr.Repo, Number: pr.Number, IsPR: true, Sender: user,
		PullRequest: &hooks.PullRequest{Action: action}}
	if action == hooks.PRMerged {
		e.PullRequest.MergedBy = user
	}
	return e
}

// eventKinds are the events that change an escalated item, and what each makes of it.
var eventKinds = []struct {
	name  string
	event func(pr workitems.ForgePR, user string) hooks.Event
	ends  workitems.State
}{
	{"a /outerloop cancel comment", func(pr workitems.ForgePR, u string) hooks.Event { return commentEvent(pr, u, "/outerloop cancel") }, workitems.StateCancelled},
	{"the pull request closed", func(pr workitems.ForgePR, u string) hooks.Event { return endEvent(pr, u, hooks.PRClosed) }, workitems.StateCancelled},
	{"the pull request merged", func(pr workitems.ForgePR, u string) hooks.Event { return endEvent(pr, u, hooks.PRMerged) }, workitems.StateClosed},
}

// Forge events act on an item only on its own delivery: the forge, repository and number
// recorded when outerloop pushed. A pull request elsewhere that carries the item's marker is
// refused, audited and recorded on the item, whoever acts and whatever they may do there.
func TestAForgeEventActsOnlyOnTheItemsOwnPullRequest(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	// The template's deliver: is where an old record (no forge, no repository) delivered.
	tmpl, _ := r.cfg.Template("t")
	tmpl.Deliver.Forge, tmpl.Deliver.Repo = "tea", "acme/calc"
	own := workitems.ForgePR{Forge: "tea", Repo: "acme/calc", Number: 7}
	cases := []struct {
		name   string
		record workitems.ForgePR // the item's delivery (number 0: none; no forge: an old record)
		event  workitems.ForgePR
		acts   bool
	}{
		{"the same forge, repository and number acts", own, own, true},
		{"the repository spelled otherwise is the same one", own, workitems.ForgePR{Forge: "tea", Repo: "ACME/calc", Number: 7}, true},
		{"another number in the item's repository is refused", own, workitems.ForgePR{Forge: "tea", Repo: "acme/calc", Number: 8}, false},
		{"the same number in another repository is refused", own, workitems.ForgePR{Forge: "tea", Repo: "mallory/calc", Number: 7}, false},
		{"the same repository and number on another forge is refused", own, workitems.ForgePR{Forge: "gh", Repo: "acme/calc", Number: 7}, false},
		{"a marker of an item that delivered no pull request is refused", workitems.ForgePR{}, own, false},
		{"an old record acts on the template's repository", workitems.ForgePR{Number: 7}, own, true},
		{"an old record is refused in another repository", workitems.ForgePR{Number: 7}, workitems.ForgePR{Forge: "tea", Repo: "mallory/calc", Number: 7}, false},
	}
	for ci, c := range cases {
		for ki, k := range eventKinds {
			t.Run(c.name+"/"+k.name, func(t *testing.T) {
				id := fmt.Sprintf("own%d-%d@1", ci, ki)
				r.escalated(t, id, c.record.Forge, c.record.Repo, c.record.Number)
				// ana may write everywhere: only where the event is decides.
				f := &prForge{body: markerOf(id), perms: map[string]forge.Permission{"ana": forge.PermWrite}}
				aud := &audits{}
				sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: &resolver{s: r.store}, Forges: forge.Set{"tea": f, "gh": f},
					Auditor: aud, Config: func() *config.Config { return r.cfg }}
				e := k.event(c.event, "ana")
				if err := sink.Handle(ctx, e); err != nil {
					t.Fatal(err)
				}
				it, err := r.store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if len(aud.got) != 1 || aud.got[0].Target != id || aud.got[0].Actor != e.Forge+":ana" {
					t.Fatalf("audit %+v, want one entry on %s", aud.got, id)
				}
				refused := r.refusals(t, id)
				if c.acts {
					if it.State != k.ends || len(it.Resolution) != 1 || it.Resolution[0].Actor != e.Forge+":ana" || !aud.got[0].OK || len(refused) != 0 {
						t.Fatalf("want %s by ana: %s %+v, audit %+v, refusals %v", k.ends, it.State, it.Resolution, aud.got, refused)
					}
					if q := f.questions(); len(q) != 1 || q[0] != "acme/calc ana" {
						t.Fatalf("permission asked %v, want on the item's repository acme/calc", q)
					}
					return
				}
				if it.State != workitems.StateEscalated || len(it.Resolution) != 0 {
					t.Fatalf("a refused event changed the item: %s %+v", it.State, it.Resolution)
				}
				if a := aud.got[0]; a.OK || !strings.HasPrefix(a.Detail, "refused (not_its_delivery): "+c.event.String()+" is not a pull request of item "+id) {
					t.Fatalf("audit %+v", a)
				}
				if len(refused) != 1 || refused[0].Data["refused"] != string(workitems.RefusedNotDelivered) || refused[0].Data["pr"] != c.event.String() ||
					refused[0].Actor != e.Forge+":ana" {
					t.Fatalf("forge_refused events %+v", refused)
				}
			})
		}
	}
}

// Every event that would change an item is checked against its actor's permission on the
// item's repository (as the item recorded it, not as the event spells it): with read access,
// or none, or unnamed, nothing changes and the refusal is audited and recorded on the item.
func TestAnActorWithoutWriteAccessToTheItemsRepositoryChangesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	const id = "perm@1"
	r.escalated(t, id, "tea", "acme/calc", 7)
	before, err := r.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// rex reads acme/calc; the forge would say rex writes "ACME/Calc" (the event's spelling),
	// but the question is asked about the repository the item recorded.
	f := &prForge{body: markerOf(id), perms: map[string]forge.Permission{"rex": forge.PermRead, "nobody": forge.PermNone},
		repoPerm: map[string]forge.Permission{"ACME/Calc rex": forge.PermWrite}}
	aud := &audits{}
	sink := &waits.Sink{Store: r.store, Waker: r.wakes, Resolver: &resolver{s: r.store}, Forges: forge.Set{"tea": f}, Auditor: aud}
	pr := workitems.ForgePR{Forge: "tea", Repo: "ACME/Calc", Number: 7}
	events := []hooks.Event{
		commentEvent(pr, "rex", "/outerloop cancel"),
		commentEvent(pr, "rex", "/outerloop retry do it my way"),
		commentEvent(pr, "rex", "/outerloop rebase"),
		endEvent(pr, "rex", hooks.PRClosed),
		endEvent(pr, "rex", hooks.PRMerged),
		endEvent(pr, "nobody", hooks.PRClosed),
		endEvent(pr, "", hooks.PRClosed),
	}
	for _, e := range events {
		if err := sink.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	it, err := r.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateEscalated || len(it.Resolution) != 0 || len(it.Attempts) != len(before.Attempts) || it.Version != before.Version {
		t.Fatalf("refused events changed the item: %s, %d resolutions, %d attempts, version %d (was %d)", it.State, len(it.Resolution),
			len(it.Attempts), it.Version, before.Version)
	}
	if len(aud.got) != len(events) {
		t.Fatalf("%d audit entries for %d events: %+v", len(aud.got), len(events), aud.got)
	}
	wantActions := []string{"outerloop cancel", "outerloop retry", "outerloop rebase", "pull request closed", "pull request merged", "pull request closed", "pull request closed"}
	for i, a := range aud.got {
		if a.OK || a.Target != id || a.Action != wantActions[i] || !strings.HasPrefix(a.Detail, "refused (permission): ") {
			t.Errorf("audit %d: %+v", i, a)
		}
	}
	if d := aud.got[0].Detail; !strings.Contains(d, "rex has read access to acme/calc, the item's repository") {
		t.Errorf("the refusal must name the permission and the item's repository: %q", d)
	}
	if d := aud.got[5].Detail; !strings.Contains(d, "nobody has none access") {
		t.Errorf("%q", d)
	}
	if d := aud.got[6].Detail; !strings.Contains(d, "the forge did not say who acted") {
		t.Errorf("%q", d)
	}
	for _, q := range f.questions() {
		if !strings.HasPrefix(q, "acme/calc ") {
			t.Fatalf("permission asked about %q: must be the item's repository", q)
		}
	}
	refused := r.refusals(t, id)
	if len(refused) != len(events) {
		t.Fatalf("%d forge_refused events for %d refusals", len(refused), len(events))
	}
	for _, e := range refused {
		if e.Data["refused"] != string(workitems.RefusedPermission) || e.Data["pr"] != pr.String() {
			t.Fatalf("event %+v", e)
		}
	}
}

// judgeRig is a waiting item of a template that asks for one review, its pull request
// tea:acme/calc#7 on a fake forge, and a judge that reads it.
type judgeRig struct {
	f     *prForge
	judge *waits.Judge
	tmpl  *config.Template
	it    *workitems.Item
}

func newJudgeRig(t *testing.T) *judgeRig {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	f := &prForge{perms: map[string]forge.Permission{"ana": forge.PermWrite, "bo": forge.PermAdmin, "rex": forge.PermRead}}
	tmpl := &config.Template{Name: "rv", Deliver: config.Deliver{Forge: "tea", Repo: "acme/calc", Mode: workitems.DeliverPullRequest,
		Review: &config.Review{RequiredApprovals: 1, OnChangesRequested: workitems.ChangesRetry, MaxRounds: 3, Wait: workitems.Duration(time.Hour)}}}
	pr := &workitems.PullRequest{Number: 7, State: workitems.PROpen}
	it := &workitems.Item{ID: "rv@1", Template: "rv", State: workitems.StateWaiting, Attempt: 1, MaxAttempts: 3,
		Attempts: []workitems.Attempt{{N: 1, State: workitems.AttemptVerifying}},
		Delivery: &workitems.Delivery{Attempt: 1, Mode: workitems.DeliverPullRequest, Outcome: workitems.DeliveryPROpened, PushedSHA: "5ha",
			Forge: "tea", Repo: "acme/calc", PR: pr},
		Wait: &workitems.Wait{Kind: workitems.WaitReview, Seq: 1, Attempt: 1, Forge: "tea", Repo: "acme/calc", SHA: "5ha", PR: 7,
			Since: clock.Now(), Deadline: clock.Now().Add(time.Hour), LocalRule: workitems.RuleChecksPassed}}
	v := verify.New(verify.WithClock(clock))
	return &judgeRig{f: f, judge: &waits.Judge{Verifier: v, Forges: forge.Set{"tea": f}}, tmpl: tmpl, it: it}
}

// The poller's path: a pull request that is merged or closed while its item waits ends the item
// only when who merged or closed it has write access to the item's repository; otherwise the
// item escalates (pr_end_refused) — as it does when the forge does not say who.
func TestAPullRequestEndedWhileWaitingEndsItsItemOnlyByAWriter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		state workitems.PRState
		by    string
		rule  workitems.RuleName
		out   workitems.Outcome
	}{
		{"closed by a writer ends as declined", workitems.PRClosed, "ana", workitems.RulePRClosed, workitems.OutcomeClose},
		{"merged by an admin closes", workitems.PRMerged, "bo", workitems.RulePRMerged, workitems.OutcomeClose},
		{"closed by a reader escalates", workitems.PRClosed, "rex", workitems.RulePREndRefused, workitems.OutcomeEscalate},
		{"merged by a reader escalates", workitems.PRMerged, "rex", workitems.RulePREndRefused, workitems.OutcomeEscalate},
		{"closed by an account the forge does not know escalates", workitems.PRClosed, "ghost", workitems.RulePREndRefused, workitems.OutcomeEscalate},
		{"closed by an account the forge did not name escalates", workitems.PRClosed, "", workitems.RulePREndRefused, workitems.OutcomeEscalate},
		{"merged by outerloop's own account closes", workitems.PRMerged, "outerloop-bot", workitems.RulePRMerged, workitems.OutcomeClose},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := newJudgeRig(t)
			j.f.state, j.f.mergedBy, j.f.closedBy = c.state, c.by, c.by
			d, err := j.judge.Peek(context.Background(), j.tmpl, j.it)
			if err != nil {
				t.Fatal(err)
			}
			if d.Rule != c.rule || d.Outcome != c.out {
				t.Fatalf("decided %s (%s), want %s (%s): %q", d.Outcome, d.Rule, c.out, c.rule, d.Reasons)
			}
			if q := j.f.questions(); c.by != "" && c.by != "outerloop-bot" && (len(q) != 1 || q[0] != "acme/calc "+c.by) {
				t.Fatalf("permission asked %v, want %s's on acme/calc", q, c.by)
			}
			if c.rule == workitems.RulePREndRefused && !strings.Contains(d.Reasons[0], "pull request #7 was "+string(c.state)) {
				t.Fatalf("reasons %q", d.Reasons)
			}
		})
	}
}

// Reviews count only from accounts with write access to the item's repository: a reader's
// approval neither closes nor merges, a reader's request for changes starts no attempt, and the
// decision names the reviews it did not count.
func TestOnlyReviewsByWritersCount(t *testing.T) {
	t.Parallel()
	review := func(user string, state forge.ReviewState) forge.Review {
		return forge.Review{User: user, State: state, Body: "review by " + user}
	}
	for _, c := range []struct {
		name    string
		reviews []forge.Review
		rule    workitems.RuleName
		out     workitems.Outcome
		counted string // "": every review counted; else the reason naming those that were not
	}{
		{"a reader's approval does not count", []forge.Review{review("rex", forge.ReviewApproved)},
			workitems.RuleReviewPending, workitems.OutcomeWait, "rex (read access)"},
		{"a reader's request for changes starts no attempt", []forge.Review{review("rex", forge.ReviewChangesRequested)},
			workitems.RuleReviewPending, workitems.OutcomeWait, "rex (read access)"},
		{"an unknown account's approval does not count", []forge.Review{review("ghost", forge.ReviewApproved)},
			workitems.RuleReviewPending, workitems.OutcomeWait, "ghost (none access)"},
		{"a writer's approval closes", []forge.Review{review("rex", forge.ReviewApproved), review("ana", forge.ReviewApproved)},
			workitems.RuleChecksPassed, workitems.OutcomeClose, "rex (read access)"},
		{"a writer's request for changes retries", []forge.Review{review("ana", forge.ReviewChangesRequested)},
			workitems.RuleChangesRequested, workitems.OutcomeRetry, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := newJudgeRig(t)
			j.f.reviews = c.reviews
			d, err := j.judge.Peek(context.Background(), j.tmpl, j.it)
			if err != nil {
				t.Fatal(err)
			}
			if d.Rule != c.rule || d.Outcome != c.out {
				t.Fatalf("decided %s (%s), want %s (%s): %q", d.Outcome, d.Rule, c.out, c.rule, d.Reasons)
			}
			named := slices.ContainsFunc(d.Reasons, func(r string) bool {
				return strings.HasPrefix(r, "reviews not counted") && strings.Contains(r, c.counted)
			})
			if (c.counted != "") != named {
				t.Fatalf("reasons %q: want not counted %q", d.Reasons, c.counted)
			}
			if d.Next != nil && strings.Contains(d.Next.Input, "rex") {
				t.Fatalf("a reader's review reached the next attempt's input: %q", d.Next.Input)
			}
		})
	}
}
