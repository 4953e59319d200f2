package app_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/metrics"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// reloadYAML is a config of the named script templates (nothing runs them here but the
// handler's template check).
func reloadYAML(templates ...string) string {
	var b strings.Builder
	b.WriteString("defaults:\n  budget: {wall_time: 1m}\nsandbox: {mode: off}\ntemplates:\n")
	for _, t := range templates {
		name, kind, _ := strings.Cut(t, ":")
		loop := `{kind: script, commands: ["true"]}`
		if kind == "exec" {
			loop = `{kind: exec, agent: command, command: "true"}`
		}
		b.WriteString("  - name: " + name + "\n    goal: do " + name + "\n    loop: " + loop + "\n    done_check: {commands: [\"true\"]}\n")
	}
	return b.String()
}

type reloadSys struct {
	*app.App
	path    string
	results chan app.ReloadResult
	replans chan int
}

// openReloading opens the system from a config file, telling every reload on results.
func openReloading(t *testing.T, env *redistest.Env, yaml string) *reloadSys {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	writeFile(t, path, yaml)
	cfg, err := config.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &reloadSys{path: path, results: make(chan app.ReloadResult, 16), replans: make(chan int, 16)}
	a, err := app.Open(context.Background(), app.Options{Config: cfg, ConfigPath: path, RedisURL: redistest.URL(),
		Prefix: env.Prefix, Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t),
		OnReload: func(r app.ReloadResult) { s.results <- r }, OnReplan: func(n int) { s.replans <- n }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	s.App = a
	return s
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *reloadSys) await(t *testing.T) app.ReloadResult {
	t.Helper()
	select {
	case r := <-s.results:
		return r
	case <-testwait.After(t):
		t.Fatal("no reload by the test's deadline")
	}
	return app.ReloadResult{}
}

func reloads(a *app.App, r metrics.ReloadResult) float64 {
	return gauge(a, "outerloop_config_reload_total", "result", string(r))
}

// gauge reads the value of a counter or gauge series with label=value (-1: no such series).
func gauge(a *app.App, name, label, value string) float64 {
	mfs, err := a.Metrics.Registry().Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// SIGHUP (the real signal, to this process) reloads: a valid new config is swapped in for the
// queue and the scheduler, an invalid one is refused, counted, and the old one stays.
func TestReloadOnSIGHUP(t *testing.T) {
	env := redistest.New(t)
	s := openReloading(t, env, reloadYAML("a"))
	ctx := context.Background()
	v0 := s.CurrentConfig().Version()
	sched, err := s.Scheduler(nil)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sched.Start(sctx)
	defer sched.Shutdown()
	stop := s.WatchConfig(ctx, 0) // SIGHUP only
	defer stop()
	if got := gauge(s.App, "outerloop_config_version_info", "version", v0); got != 1 {
		t.Fatalf("outerloop_config_version_info{version=%s} = %v, want 1", v0, got)
	}

	writeFile(t, s.path, reloadYAML("a", "b")+"    schedule: \"*/5 * * * *\"\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := s.await(t)
	if r.Result != metrics.ReloadApplied || r.Version == v0 {
		t.Fatalf("reload = %+v, want applied with a new version (old %s)", r, v0)
	}
	if got := s.Outbox.Config().Version(); got != s.Queue.Config().Version() {
		t.Errorf("the notification outbox reads config %s after the reload, the queue %s", got, s.Queue.Config().Version())
	}
	if _, ok := s.Queue.Config().Template("b"); !ok {
		t.Fatal("the queue does not know template b after the reload")
	}
	if _, err := s.Queue.Submit(ctx, scheduler.Request{Template: "b"}); err != nil {
		t.Fatalf("submit of the added template: %v", err)
	}
	select {
	case n := <-s.replans:
		if n != 1 {
			t.Fatalf("replan with %d schedules, want 1 (b's)", n)
		}
	case <-testwait.After(t):
		t.Fatal("the scheduler did not re-plan after the reload")
	}
	if _, ok := sched.NextRun("b"); !ok {
		t.Fatal("the scheduler did not plan the added template's schedule")
	}

	writeFile(t, s.path, "templates: [ {name: broken") // not YAML
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r = s.await(t)
	if r.Result != metrics.ReloadInvalid || r.Err == nil || !strings.Contains(r.Err.Error(), "malformed YAML") {
		t.Fatalf("reload of a broken file = %+v, want invalid with the YAML error", r)
	}
	if got := s.CurrentConfig().Version(); got == v0 || got != s.Queue.Config().Version() {
		t.Fatalf("after an invalid reload the config in force is %s (queue %s), want the last good one", got, s.Queue.Config().Version())
	}
	if _, ok := s.Queue.Config().Template("b"); !ok {
		t.Fatal("an invalid reload dropped the config in force")
	}
	if n := reloads(s.App, metrics.ReloadInvalid); n != 1 {
		t.Fatalf("outerloop_config_reload_total{result=invalid} = %v, want 1", n)
	}
	if n := reloads(s.App, metrics.ReloadApplied); n != 1 {
		t.Fatalf("outerloop_config_reload_total{result=applied} = %v, want 1", n)
	}
}

// A changed file is reloaded without a signal (polled: modification time and size, then its
// hash); an unchanged rewrite is not applied.
func TestReloadOnFileChange(t *testing.T) {
	env := redistest.New(t)
	s := openReloading(t, env, reloadYAML("a"))
	stop := s.WatchConfig(context.Background(), 20*time.Millisecond)
	defer stop()
	writeFile(t, s.path, reloadYAML("a", "c"))
	r := s.await(t)
	if r.Result != metrics.ReloadApplied {
		t.Fatalf("reload = %+v, want applied", r)
	}
	if _, ok := s.CurrentConfig().Template("c"); !ok {
		t.Fatal("template c not in force after the file changed")
	}
	// The same config written again with a comment: a new hash of the file, the same config.
	// The watcher counts it unchanged (a Prometheus counter: polled) and reports nothing.
	writeFile(t, s.path, "# a comment\n"+reloadYAML("a", "c"))
	for deadline := testwait.Deadline(t); ; {
		select {
		case r := <-s.results:
			t.Fatalf("an unchanged config was reported as %+v", r)
		case <-time.After(20 * time.Millisecond): // a counter has no event to await
		}
		n := reloads(s.App, metrics.ReloadUnchanged)
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("outerloop_config_reload_total{result=unchanged} = %v, want 1", n)
		}
	}
	select {
	case r := <-s.results:
		t.Fatalf("an unchanged config was reported as %+v", r)
	default:
	}
}

// A worker whose config is older than the file picks up a template added since (it reloads
// before deciding); an item whose template is gone is escalated with the reason in its
// headline and reaches the escalation inbox; one whose template changed loop kind is escalated
// as incompatible.
func TestItemOfChangedTemplate(t *testing.T) {
	env := redistest.New(t)
	ctx := context.Background()
	worker := openReloading(t, env, reloadYAML("old", "kind"))
	// Another process (the enqueuer) runs the newer file.
	enq := openReloading(t, env, reloadYAML("old", "kind", "added"))

	added, err := enq.Queue.Submit(ctx, scheduler.Request{Template: "added"})
	if err != nil {
		t.Fatal(err)
	}
	if added.Pin == nil || added.Pin.Config != enq.CurrentConfig().Version() || added.Pin.Template != enq.CurrentConfig().TemplateVersion("added") {
		t.Fatalf("item pin = %+v, want config %s and the template's version", added.Pin, enq.CurrentConfig().Version())
	}
	old, err := enq.Queue.Submit(ctx, scheduler.Request{Template: "old"})
	if err != nil {
		t.Fatal(err)
	}
	kind, err := enq.Queue.Submit(ctx, scheduler.Request{Template: "kind"})
	if err != nil {
		t.Fatal(err)
	}

	// The file the worker reads gains "added" (as the enqueuer's), loses "old", and "kind"
	// becomes an exec loop.
	writeFile(t, worker.path, reloadYAML("kind:exec", "added"))
	h := worker.Handler("w1")
	if err := h.Process(ctx, added.ID, 1); err != nil {
		t.Fatalf("process of the added template's item: %v", err)
	}
	if _, ok := worker.CurrentConfig().Template("added"); !ok {
		t.Fatal("the worker did not reload before deciding on an unknown template")
	}
	if r := worker.await(t); r.Result != metrics.ReloadApplied {
		t.Fatalf("worker reload = %+v, want applied", r)
	}
	it, err := worker.Store.Get(ctx, added.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateClosed {
		t.Fatalf("item of the added template: %s (escalation %+v), want closed (it ran under the reloaded config)", it.State, it.Escalation)
	}

	if err := h.Process(ctx, old.ID, 1); err != nil {
		t.Fatal(err)
	}
	it, err = worker.Store.Get(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateEscalated || it.Escalation == nil || it.Escalation.Reason != string(workitems.ConfigTemplateRemoved) ||
		!strings.Contains(it.Escalation.Summary, `template "old" is no longer configured`) {
		t.Fatalf("item of a removed template: state %s, escalation %+v; want escalated, template_removed, naming the template", it.State, it.Escalation)
	}
	inbox, err := worker.Store.List(ctx, itemstore.ListOptions{State: workitems.StateEscalated})
	if err != nil {
		t.Fatal(err)
	}
	if !containsItem(inbox, old.ID) {
		t.Fatalf("the escalated item %s is not in the escalation inbox (%d items)", old.ID, len(inbox))
	}

	if err := h.Process(ctx, kind.ID, 1); err != nil {
		t.Fatal(err)
	}
	it, err = worker.Store.Get(ctx, kind.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.State != workitems.StateEscalated || it.Escalation.Reason != string(workitems.ConfigTemplateIncompatible) ||
		!strings.Contains(it.Escalation.Summary, "loop.kind script → exec") {
		t.Fatalf("item of a template whose loop kind changed: state %s, escalation %+v", it.State, it.Escalation)
	}
	// A person can act on it: it is in the inbox, not failed.
	if _, err := worker.Queue.Resolve(ctx, kind.ID, workitems.Resolution{Action: workitems.ResolveCancel, Actor: "tester"}); err != nil {
		t.Fatalf("cancel of the escalated item: %v", err)
	}
}

func containsItem(items []*workitems.Item, id string) bool {
	for _, it := range items {
		if it.ID == id {
			return true
		}
	}
	return false
}

// An item whose template is gone while an execution of its attempt still holds the lease (a
// worker under the older config) is not escalated under that execution's feet: the task is
// tried again later, and the item is escalated once the lease is free.
func TestConfigEscalationWaitsForTheLease(t *testing.T) {
	env := redistest.New(t)
	ctx := context.Background()
	s := openReloading(t, env, reloadYAML("gone"))
	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.path, reloadYAML("other"))
	if r := s.Reload(ctx, true); r.Result != metrics.ReloadApplied {
		t.Fatalf("reload: %+v", r)
	}
	fence, err := s.Store.AcquireLease(ctx, it.ID, 1, "older-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler("w2")
	if err := h.Process(ctx, it.ID, 1); !errors.Is(err, workitems.ErrLeaseHeld) {
		t.Fatalf("process while another holds the lease: %v, want ErrLeaseHeld", err)
	}
	if got, _ := s.Store.Get(ctx, it.ID); got.State != workitems.StateQueued {
		t.Fatalf("item escalated under a held lease: %s", got.State)
	}
	if err := s.Store.ReleaseLease(ctx, fence); err != nil {
		t.Fatal(err)
	}
	if err := h.Process(ctx, it.ID, 1); err != nil {
		t.Fatal(err)
	}
	got, err := s.Store.Get(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != workitems.StateEscalated || got.Escalation.Reason != string(workitems.ConfigTemplateRemoved) {
		t.Fatalf("after the lease was freed: %s %+v", got.State, got.Escalation)
	}
}
