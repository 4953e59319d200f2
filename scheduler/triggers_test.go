package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/forge"
	"outerloop/hooks"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const triggersYAML = `
defaults:
  budget: {wall_time: 10m}
forges:
  gitea: {kind: gitea, base_url: "https://gitea.example.com"}
  other: {kind: gitea, base_url: "https://other.example.com"}
templates:
  - name: fix-ci
    goal: make main green
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - {forge: gitea, event: check_failed, repo: acme/payments, branch: main, checks: [ci/test, ci/lint]}
  - name: triage
    goal: fix the issue
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - {forge: gitea, event: labeled, label: outerloop-fix}
  - name: one-at-a-time
    max_open: 1
    goal: make release green
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers:
      - {forge: gitea, event: check_failed, repo: acme/payments, branch: release}
`

const (
	sha1 = "9f1c2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b"
	sha2 = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
)

type trigFixture struct {
	env   *redistest.Env
	store *itemstore.Store
	cfg   *config.Config
}

func newTrigFixture(t *testing.T) *trigFixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(triggersYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	return &trigFixture{env: env, store: itemstore.NewStore(env.Client, env.Prefix), cfg: cfg}
}

// triggers returns one replica's Triggers (its own queue and asynq client).
func (f *trigFixture) triggers(t *testing.T) (*scheduler.Triggers, *scheduler.Queue) {
	t.Helper()
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	q := scheduler.NewQueue(f.store, c, nil, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue})
	return scheduler.NewTriggers(q, q.Config, nil), q
}

func (f *trigFixture) items(t *testing.T, template string) []*workitems.Item {
	t.Helper()
	its, err := f.store.List(context.Background(), itemstore.ListOptions{Template: template})
	if err != nil {
		t.Fatal(err)
	}
	return its
}

func failing(sha, branch, check string) hooks.Event {
	return hooks.Event{Kind: hooks.KindCheck, Forge: "gitea", DeliveryID: "d-" + check + "-" + sha[:4], Repo: "acme/payments",
		Sender: "ci-bot", SHA: sha, Branch: branch,
		Check: &hooks.Check{Name: check, State: workitems.CheckFailure, URL: "https://ci.example.com/run/7", Summary: "3 tests failed"}}
}

func labeled(number int, labels ...string) hooks.Event {
	return hooks.Event{Kind: hooks.KindLabeled, Forge: "gitea", Repo: "acme/payments", Sender: "alice", Number: number,
		Labeled: &hooks.Labeled{Labels: labels, Current: true, User: "alice", Title: "Refunds round down",
			Body: "Refunds of 0.015 come out as 0.01."}}
}

// firings records the firings counted, as template/source/result.
type firings struct {
	mu  sync.Mutex
	got []string
}

func (f *firings) TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, template+"/"+string(source)+"/"+string(result))
}

func mustTrigger(t *testing.T, tr *scheduler.Triggers, e hooks.Event) {
	t.Helper()
	if err := tr.Trigger(context.Background(), e); err != nil {
		t.Fatalf("trigger %s: %v", e.Kind, err)
	}
}

func TestTriggers(t *testing.T) {
	t.Parallel()

	t.Run("AFailingCheckOnTheBranchMakesOneItemWithTheEventsFacts", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		mustTrigger(t, tr, failing(sha1, "main", "ci/test"))
		its := f.items(t, "fix-ci")
		if len(its) != 1 {
			t.Fatalf("%d items, want 1", len(its))
		}
		it := its[0]
		if want := workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/payments", sha1); it.ID != want {
			t.Errorf("id %q, want %q", it.ID, want)
		}
		if it.Origin.Kind != workitems.OriginWebhook || it.Origin.Actor != "gitea:ci-bot" {
			t.Errorf("origin %+v, want webhook by gitea:ci-bot", it.Origin)
		}
		in := it.Attempts[0].Condition.Input
		for _, want := range []string{"acme/payments", "branch main", sha1, "Check: ci/test", "State: failure",
			"Summary: 3 tests failed", "Link: https://ci.example.com/run/7"} {
			if !strings.Contains(in, want) {
				t.Errorf("input lacks %q:\n%s", want, in)
			}
		}
	})

	t.Run("ASecondFailingCheckOrAReplayOnTheSameCommitMakesNoSecondItem", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		fired := &firings{}
		tr.WithObserver(fired)
		mustTrigger(t, tr, failing(sha1, "main", "ci/test"))
		mustTrigger(t, tr, failing(sha1, "main", "ci/test")) // replayed
		mustTrigger(t, tr, failing(sha1, "main", "ci/lint")) // another check, same commit
		if its := f.items(t, "fix-ci"); len(its) != 1 {
			t.Fatalf("%d items, want 1", len(its))
		}
		if got := fmt.Sprint(fired.got); got != "[fix-ci/forge/made fix-ci/forge/deduplicated fix-ci/forge/deduplicated]" {
			t.Errorf("firings counted %s", got)
		}
		mustTrigger(t, tr, failing(sha2, "main", "ci/test")) // a new commit is a new failure
		if its := f.items(t, "fix-ci"); len(its) != 2 {
			t.Fatalf("%d items after a failure on another commit, want 2", len(its))
		}
	})

	t.Run("TwoReplicasHandlingTheSameDeliveryMakeOneItem", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		a, _ := f.triggers(t)
		b, _ := f.triggers(t)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			tr := a
			if i%2 == 1 {
				tr = b
			}
			wg.Go(func() {
				errs[i] = tr.Trigger(context.Background(), failing(sha1, "main", "ci/test"))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica call %d: %v", i, err)
			}
		}
		if its := f.items(t, "fix-ci"); len(its) != 1 {
			t.Fatalf("%d items, want 1", len(its))
		}
	})

	t.Run("EventsTheTriggerDoesNotNameMakeNoItem", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		otherRepo := failing(sha1, "main", "ci/test")
		otherRepo.Repo = "acme/billing"
		otherForge := failing(sha1, "main", "ci/test")
		otherForge.Forge = "other"
		infra := failing(sha1, "main", "ci/test")
		infra.Check.State = workitems.CheckInfraError
		green := failing(sha1, "main", "ci/test")
		green.Check.State = workitems.CheckSuccess
		noSHA := failing(sha1, "main", "ci/test")
		noSHA.SHA = ""
		for name, e := range map[string]hooks.Event{
			"another repository":              otherRepo,
			"another forge":                   otherForge,
			"another branch":                  failing(sha1, "feature", "ci/test"),
			"a check not listed":              failing(sha1, "main", "ci/build"),
			"an infra error":                  infra,
			"a success":                       green,
			"no commit":                       noSHA,
			"no branch, and no heads to read": failing(sha1, "", "ci/test"),
			"another label":                   labeled(7, "bug", "outerloop-later"),
			"a comment":                       {Kind: hooks.KindComment, Forge: "gitea", Repo: "acme/payments", Number: 7, Comment: &hooks.Comment{User: "a", Body: "outerloop-fix"}},
		} {
			if err := tr.Trigger(context.Background(), e); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		for _, tm := range []string{"fix-ci", "triage", "one-at-a-time"} {
			if its := f.items(t, tm); len(its) != 0 {
				t.Errorf("template %s: %d items, want none", tm, len(its))
			}
		}
	})

	t.Run("ALabelMakesOneItemPerIssueWithItsTextClipped", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		e := labeled(42, "bug", "Outerloop-Fix")
		e.Labeled.Body = strings.Repeat("é", 10<<10) // 20 KiB of two-byte characters
		mustTrigger(t, tr, e)
		mustTrigger(t, tr, labeled(42, "bug", "outerloop-fix", "p1")) // Gitea resends every label
		its := f.items(t, "triage")
		if len(its) != 1 {
			t.Fatalf("%d items, want 1", len(its))
		}
		it := its[0]
		if want := workitems.LabelTriggerItemID("triage", "gitea", "acme/payments", 42, "outerloop-fix"); it.ID != want {
			t.Errorf("id %q, want %q", it.ID, want)
		}
		if it.Origin.Kind != workitems.OriginWebhook || it.Origin.Actor != "gitea:alice" {
			t.Errorf("origin %+v, want webhook by gitea:alice", it.Origin)
		}
		in := it.Attempts[0].Condition.Input
		for _, want := range []string{`"outerloop-fix"`, "issue #42 of acme/payments", "changed by alice",
			"Title: Refunds round down", "é", "[… clipped]"} {
			if !strings.Contains(in, want) {
				t.Errorf("input lacks %q:\n%.300s", want, in)
			}
		}
		if len(in) > scheduler.MaxTriggerText+1024 {
			t.Errorf("input is %d bytes: the body is not clipped to %d", len(in), scheduler.MaxTriggerText)
		}
		mustTrigger(t, tr, labeled(43, "outerloop-fix"))
		if its := f.items(t, "triage"); len(its) != 2 {
			t.Errorf("%d items after a second issue was labelled, want 2", len(its))
		}
	})

	t.Run("APausedTemplateMakesNoItemsUntilResumed", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, q := f.triggers(t)
		ctx := context.Background()
		if _, err := q.Pause(ctx, "fix-ci", "alice", "main is being rebuilt"); err != nil {
			t.Fatalf("a template with triggers and no schedule can be paused: %v", err)
		}
		mustTrigger(t, tr, failing(sha1, "main", "ci/test"))
		if its := f.items(t, "fix-ci"); len(its) != 0 {
			t.Fatalf("%d items while paused, want none", len(its))
		}
		if _, err := q.Resume(ctx, "fix-ci", "alice"); err != nil {
			t.Fatal(err)
		}
		mustTrigger(t, tr, failing(sha1, "main", "ci/test"))
		if its := f.items(t, "fix-ci"); len(its) != 1 {
			t.Fatalf("%d items after resume, want 1", len(its))
		}
	})

	t.Run("MaxOpenRefusesTheItemWithoutFailingTheDelivery", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		mustTrigger(t, tr, failing(sha1, "release", "ci/test"))
		mustTrigger(t, tr, failing(sha2, "release", "ci/test"))
		its := f.items(t, "one-at-a-time")
		if len(its) != 1 || its[0].ID != workitems.CheckTriggerItemID("one-at-a-time", "gitea", "acme/payments", sha1) {
			t.Fatalf("items %v, want only the first commit's", ids(its))
		}
	})

	t.Run("AnEventWithoutItsBranchMatchesTheBranchsHead", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		tr, _ := f.triggers(t)
		heads := &fakeHeads{head: map[string]string{"gitea acme/payments main": sha1}}
		tr.WithHeads(heads)
		mustTrigger(t, tr, failing(sha2, "", "ci/test")) // not main's head
		if its := f.items(t, "fix-ci"); len(its) != 0 {
			t.Fatalf("%d items for a commit that is not main's head, want none", len(its))
		}
		mustTrigger(t, tr, failing(sha1, "", "ci/test"))
		if its := f.items(t, "fix-ci"); len(its) != 1 || its[0].ID != workitems.CheckTriggerItemID("fix-ci", "gitea", "acme/payments", sha1) {
			t.Fatalf("items %v, want main's head commit's", ids(its))
		}
		heads.err = &forge.Error{Forge: "gitea", Op: "ls-remote", Class: workitems.ClassTransient, Err: errors.New("connection refused")}
		if err := tr.Trigger(context.Background(), failing(sha2, "", "ci/test")); err == nil {
			t.Error("a head that could not be read for a moment: no error, so the forge would not deliver again")
		}
		heads.err = &forge.Error{Forge: "gitea", Op: "ls-remote", Class: workitems.ClassPermission, Err: errors.New("denied")}
		if err := tr.Trigger(context.Background(), failing(sha2, "", "ci/test")); err != nil {
			t.Errorf("a head the forge refuses to show: %v, want no item and no error (a redelivery would not help)", err)
		}
	})

	t.Run("RedisTroubleIsAnErrorSoTheForgeDeliversAgain", func(t *testing.T) {
		t.Parallel()
		f := newTrigFixture(t)
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = dead.Close() })
		q := scheduler.NewQueue(itemstore.NewStore(dead, f.env.Prefix), nil, nil, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue})
		tr := scheduler.NewTriggers(q, nil, nil)
		if err := tr.Trigger(context.Background(), failing(sha1, "main", "ci/test")); err == nil {
			t.Error("no error with Redis unreachable")
		}
		if err := tr.Trigger(context.Background(), failing(sha1, "feature", "ci/test")); err != nil {
			t.Errorf("an event no trigger matches touches Redis: %v", err)
		}
	})
}

type fakeHeads struct {
	mu   sync.Mutex
	head map[string]string
	err  error
}

func (h *fakeHeads) BranchHead(_ context.Context, forgeName, repo, branch string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return "", h.err
	}
	return h.head[fmt.Sprintf("%s %s %s", forgeName, repo, branch)], nil
}

func ids(its []*workitems.Item) []string {
	var out []string
	for _, it := range its {
		out = append(out, it.ID)
	}
	slices.Sort(out)
	return out
}
