package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/fleet"
	"outerloop/hooks"
	"outerloop/lib/fakeclock"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

const fleetYAML = `
defaults:
  budget: {wall_time: 10m}
forges:
  tea: {kind: gitea, base_url: https://gitea.example.com, token_env: TEA_TOKEN}
templates:
  - name: deps
    schedule: "0 3 * * *"
    repos: [%s]
    goal: bump
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: tea, mode: pull_request}
    %s
  - name: discovered
    schedule: "0 3 * * *"
    repos_from: {forge: tea, owner: acme, topic: go}
    goal: bump
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    deliver: {forge: tea}
`

func fleetRepos(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("https://gitea.example.com/acme/r%02d.git", i))
	}
	return out
}

type fleetFixture struct {
	*fixture
	gate   *fleet.Gate
	clock  *fakeclock.Clock
	source scheduler.RepoSource
}

func newFleetFixture(t *testing.T, repos []string, fleetLine string) *fleetFixture {
	t.Helper()
	cfg, err := config.ParseConfig(fmt.Appendf(nil, fleetYAML, strings.Join(repos, ", "), fleetLine))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	insp := asynq.NewInspector(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = insp.Close() })
	clock := fakeclock.New(time.Date(2026, 12, 3, 2, 59, 0, 0, time.UTC))
	gate := fleet.NewGate(env.Client, env.Prefix, clock)
	store := itemstore.NewStore(env.Client, env.Prefix, itemstore.WithClock(clock), itemstore.WithTransitionHook(gate.TransitionHook()))
	return &fleetFixture{fixture: &fixture{env: env, store: store, cfg: cfg, insp: insp}, gate: gate, clock: clock}
}

func (f *fleetFixture) queue(t *testing.T) *scheduler.Queue {
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	return scheduler.NewQueue(f.store, c, f.insp, f.cfg, scheduler.QueueOptions{Queue: f.env.Queue, Clock: f.clock, Fleet: f.gate, Repos: f.source})
}

// tick starts replicas schedulers, moves the clock to 03:00 and returns every replica's result.
func (f *fleetFixture) tick(t *testing.T, replicas int, o scheduler.Options) []scheduler.TickResult {
	t.Helper()
	log := newTickLog()
	o.Clock, o.OnTick = f.clock, log.add
	for range replicas {
		s, err := scheduler.New(f.queue(t), o)
		if err != nil {
			t.Fatal(err)
		}
		s.Start(context.Background())
		t.Cleanup(s.Shutdown)
	}
	// Each replica waits for two schedules (deps and discovered).
	f.clock.BlockUntil(replicas, nil)
	f.clock.Advance(time.Minute)
	return log.await(t, 2*replicas)
}

func only(rs []scheduler.TickResult, template string) []scheduler.TickResult {
	var out []scheduler.TickResult
	for _, r := range rs {
		if r.Template == template {
			out = append(out, r)
		}
	}
	return out
}

func TestTwoReplicasMakeEachRepositorysItemOnce(t *testing.T) {
	t.Parallel()
	repos := fleetRepos(7)
	f := newFleetFixture(t, repos, "")
	res := only(f.tick(t, 2, scheduler.Options{}), "deps")
	created, existing := 0, 0
	for _, r := range res {
		if r.Fleet == nil || r.Fleet.Repos != 7 || r.Fleet.Failed != 0 {
			t.Fatalf("fleet tick %+v", r.Fleet)
		}
		created += r.Fleet.Created
		existing += r.Fleet.Existing
	}
	if created != 7 || existing != 7 {
		t.Fatalf("created %d, existing %d over two replicas: want each of 7 made once", created, existing)
	}
	items, err := f.store.List(context.Background(), itemstore.ListOptions{Template: "deps"})
	if err != nil || len(items) != 7 {
		t.Fatalf("items %d %v", len(items), err)
	}
	cfg := f.cfg
	seen := map[string]bool{}
	for _, it := range items {
		if !slices.Contains(repos, it.Repo) || seen[it.Repo] {
			t.Fatalf("item %s of repo %q", it.ID, it.Repo)
		}
		seen[it.Repo] = true
		if it.ID != workitems.FleetItemID("deps", time.Date(2026, 12, 3, 3, 0, 0, 0, time.UTC), it.Repo) {
			t.Errorf("item id %s is not the tick's and the repository's", it.ID)
		}
		// Each runs, delivers and reads CI as its own repository.
		tmpl, _ := cfg.ItemTemplate(it)
		if want := strings.TrimSuffix(strings.TrimPrefix(it.Repo, "https://gitea.example.com/"), ".git"); tmpl.Repo != it.Repo || tmpl.Deliver.Repo != want {
			t.Errorf("item %s: repo %q deliver.repo %q, want %q", it.ID, tmpl.Repo, tmpl.Deliver.Repo, want)
		}
	}
	// No limits: every item's task is on the queue at once.
	tasks, err := f.insp.ListPendingTasks(f.env.Queue)
	if err != nil || len(tasks) != 7 {
		t.Fatalf("pending tasks %d %v", len(tasks), err)
	}
	repoIdx, _ := f.gate.Repos(context.Background(), "deps")
	if len(repoIdx) != 7 {
		t.Fatalf("fleet view knows %d repositories, want 7", len(repoIdx))
	}
}

type staticSource struct {
	repos FleetReposFunc
}

type FleetReposFunc func() (scheduler.FleetRepos, error)

func (s staticSource) FleetRepos(context.Context, *config.Template) (scheduler.FleetRepos, error) {
	return s.repos()
}

func TestALimitedFleetsTickHoldsItsItemsAndGrantsWhatTheLimitAllows(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t, fleetRepos(5), "fleet: {concurrency: 2}")
	f.source = staticSource{repos: func() (scheduler.FleetRepos, error) {
		return scheduler.FleetRepos{Repos: []string{"https://gitea.example.com/acme/x.git"}, Skipped: map[string]int{"archived": 1, "unreadable": 2}}, nil
	}}
	q := f.queue(t)
	adm := &fleet.Admitter{Gate: f.gate, Config: q.Config, Enqueuer: q, Pauser: q, Clock: f.clock}
	res := f.tick(t, 1, scheduler.Options{Fleet: adm})
	deps := only(res, "deps")[0]
	if deps.Outcome != scheduler.TickCreated || deps.Fleet.Created != 5 || deps.Fleet.Granted != 2 {
		t.Fatalf("deps tick: %s %+v", deps.Outcome, deps.Fleet)
	}
	disc := only(res, "discovered")[0]
	if disc.Fleet == nil || disc.Fleet.Created != 1 || disc.Fleet.SkippedCount() != 3 || disc.Fleet.Skipped["unreadable"] != 2 {
		t.Fatalf("discovered tick: %s %+v", disc.Outcome, disc.Fleet)
	}
	// Two granted tasks on the queue (and the unlimited discovered one); three wait in line, and
	// reconcile leaves them there.
	pending := func() int {
		tasks, err := f.insp.ListPendingTasks(f.env.Queue)
		if err != nil {
			t.Fatal(err)
		}
		return len(tasks)
	}
	if n := pending(); n != 3 {
		t.Fatalf("%d pending tasks, want 2 granted + 1 unlimited", n)
	}
	f.clock.Advance(time.Hour)
	if n, err := q.Reconcile(context.Background(), time.Minute); err != nil || n != 0 {
		t.Fatalf("reconcile enqueued %d held items (%v): they wait on purpose", n, err)
	}
	u, _ := f.gate.Usage(context.Background(), "deps")
	if u.Held != 3 || u.Running != 2 {
		t.Fatalf("usage %+v", u)
	}
	// One granted item ends: the next round lets the first held one go.
	items, _ := f.store.List(context.Background(), itemstore.ListOptions{Template: "deps"})
	var granted []string
	for _, it := range items {
		if held, _ := f.gate.Held(context.Background(), "deps", it.ID); !held {
			granted = append(granted, it.ID)
		}
	}
	if len(granted) != 2 {
		t.Fatalf("granted %v", granted)
	}
	if _, err := q.Resolve(context.Background(), granted[0], workitems.Resolution{Action: workitems.ResolveCancel, Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	n, err := adm.Round(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("round granted %d (%v), want 1", n, err)
	}
	if n := pending(); n != 4 {
		t.Fatalf("%d pending tasks after the round, want 4", n)
	}
}

func TestAFleetRequestMustNameOneOfItsRepositories(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t, fleetRepos(2), "")
	q := f.queue(t)
	ctx := context.Background()
	for _, tc := range []struct {
		template, repo, want string
	}{
		{"deps", "", "names one of its repositories"},
		{"deps", "https://gitea.example.com/acme/other.git", "not one of its repos"},
	} {
		_, err := q.Submit(ctx, scheduler.Request{Template: tc.template, Repo: tc.repo})
		if !errors.Is(err, scheduler.ErrBadRepo) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s repo %q: %v, want %q", tc.template, tc.repo, err, tc.want)
		}
	}
	if items, _ := f.store.List(ctx, itemstore.ListOptions{}); len(items) != 0 {
		t.Fatalf("a refused request made %d items", len(items))
	}
	it, err := q.Submit(ctx, scheduler.Request{Template: "deps", Repo: "https://gitea.example.com/acme/r01"})
	if err != nil || it.Repo != "https://gitea.example.com/acme/r01" {
		t.Fatalf("a listed repository (without .git): %v", err)
	}
}

// A forge event makes a fleet template's item on the event's repository when it is one of the
// fleet's, and nothing for a repository outside it. A repos_from fleet's item names the clone
// URL its listing gave: GitHub's is not under the API's base_url.
func TestATriggerOnAFleetWorksOnTheEventsRepository(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(`
defaults: {budget: {wall_time: 10m}}
forges:
  tea: {kind: gitea, base_url: "https://gitea.example.com/", token_env: TEA_TOKEN}
  hub: {kind: github, base_url: "https://api.github.com/", token_env: GH_TOKEN}
templates:
  - name: listed
    repos: [https://gitea.example.com/acme/a.git, https://gitea.example.com/acme/b.git]
    goal: fix
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers: [{forge: tea, event: labeled, label: fix}]
  - name: found
    repos_from: {forge: tea, owner: acme, exclude: [acme/legacy]}
    goal: fix
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers: [{forge: tea, event: labeled, label: fix}]
  - name: hubbed
    repos_from: {forge: hub, owner: acme}
    goal: fix
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["true"]}
    triggers: [{forge: hub, event: labeled, label: fix}]
`))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	store := itemstore.NewStore(env.Client, env.Prefix)
	c := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = c.Close() })
	// The listings as discovery keeps them: acme/legacy excluded, acme/old archived.
	listings := map[string][]string{
		"found":  {"https://gitea.example.com/acme/b.git", "https://gitea.example.com/acme/c.git"},
		"hubbed": {"https://github.com/acme/c.git"},
	}
	src := templateSource(func(t *config.Template) (scheduler.FleetRepos, error) {
		return scheduler.FleetRepos{Repos: listings[t.Name], Skipped: map[string]int{"excluded": 1, "archived": 1}}, nil
	})
	q := scheduler.NewQueue(store, c, nil, cfg, scheduler.QueueOptions{Queue: env.Queue, Repos: src})
	tr := scheduler.NewTriggers(q, q.Config, nil)
	ev := func(forge, repo string, n int) hooks.Event {
		return hooks.Event{Kind: hooks.KindLabeled, Forge: forge, Repo: repo, Sender: "alice", Number: n,
			Labeled: &hooks.Labeled{Labels: []string{"fix"}, Current: true, User: "alice", Title: "t"}}
	}
	ctx := context.Background()
	for _, e := range []hooks.Event{ev("tea", "acme/B", 1), ev("tea", "acme/legacy", 2), ev("tea", "other/a", 3), ev("tea", "acme/c", 4),
		ev("tea", "acme/old", 5), ev("hub", "acme/C", 6)} {
		if err := tr.Trigger(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	items, err := store.List(ctx, itemstore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Template+"/"+it.Origin.Actor+"/"+it.Repo)
	}
	slices.Sort(got)
	want := []string{
		"found/tea:alice/https://gitea.example.com/acme/b.git", // the listing's URL, whatever the event's case
		"found/tea:alice/https://gitea.example.com/acme/c.git",
		"hubbed/hub:alice/https://github.com/acme/c.git", // not api.github.com
		"listed/tea:alice/https://gitea.example.com/acme/b.git",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("items\n%v\nwant\n%v", got, want)
	}
}

// A repos_from fleet in a process without a repository source makes no item for an event (no
// clone URL guessed from the forge's API address).
func TestATriggerOnAListedFleetWithoutASourceMakesNothing(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t, fleetRepos(1), "")
	q := f.queue(t)
	tr := scheduler.NewTriggers(q, q.Config, nil)
	tmpl, _ := f.cfg.Template("discovered")
	tmpl.Triggers = []config.Trigger{{Forge: "tea", Event: "labeled", Label: "fix"}}
	e := hooks.Event{Kind: hooks.KindLabeled, Forge: "tea", Repo: "acme/a", Sender: "alice", Number: 1,
		Labeled: &hooks.Labeled{Labels: []string{"fix"}, Current: true, User: "alice", Title: "t"}}
	if err := tr.Trigger(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if items, err := f.store.List(context.Background(), itemstore.ListOptions{}); err != nil || len(items) != 0 {
		t.Fatalf("items %d %v, want none", len(items), err)
	}
	// The same event, with the listing at hand, makes the item.
	f.source = templateSource(func(*config.Template) (scheduler.FleetRepos, error) {
		return scheduler.FleetRepos{Repos: []string{"https://gitea.example.com/acme/a.git"}}, nil
	})
	q = f.queue(t)
	if err := scheduler.NewTriggers(q, q.Config, nil).Trigger(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if items, err := f.store.List(context.Background(), itemstore.ListOptions{}); err != nil || len(items) != 1 {
		t.Fatalf("items %d %v, want one once the listing is there", len(items), err)
	}
}

type templateSource func(t *config.Template) (scheduler.FleetRepos, error)

func (s templateSource) FleetRepos(_ context.Context, t *config.Template) (scheduler.FleetRepos, error) {
	return s(t)
}

// A held item whose template lost its limits (a reload) waits for no admitter: reconcile
// enqueues it.
func TestReconcileEnqueuesAHeldItemWhoseTemplateIsNoLongerLimited(t *testing.T) {
	t.Parallel()
	f := newFleetFixture(t, fleetRepos(3), "fleet: {concurrency: 1}")
	q := f.queue(t)
	ctx := context.Background()
	for _, r := range fleetRepos(3) {
		if _, err := q.Submit(ctx, scheduler.Request{Template: "deps", Repo: r}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Hour)
	if n, err := q.Reconcile(ctx, time.Minute); err != nil || n != 0 {
		t.Fatalf("reconcile enqueued %d held items (%v)", n, err)
	}
	cfg, err := config.ParseConfig(fmt.Appendf(nil, fleetYAML, strings.Join(fleetRepos(3), ", "), ""))
	if err != nil {
		t.Fatal(err)
	}
	q.SetConfig(cfg)
	if n, err := q.Reconcile(ctx, time.Minute); err != nil || n != 3 {
		t.Fatalf("reconcile enqueued %d of 3 items no limit holds (%v)", n, err)
	}
}
