package app_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/forge"
	"outerloop/internal/app"
	"outerloop/lib/redistest"
	"outerloop/metrics"
	"outerloop/notify"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// memForge is a forge kind only this test registers; it answers nothing (forge.Unsupported).
type memForge struct{ forge.Unsupported }

func (memForge) Kind() workitems.ForgeKind { return "memory" }
func (m memForge) Name() string            { return m.ForgeName }

// logSink is a sink kind only this test registers.
type logSink struct{}

func (logSink) Check(notify.Target) error                                  { return nil }
func (logSink) Send(context.Context, notify.Target, notify.Delivery) error { return nil }

func kindsConfig(sink string) string {
	return fmt.Sprintf(`
forges:
  mem: {kind: memory, base_url: "https://forge.example", token_env: MEM_TOKEN}
notify:
  sinks:
    ops: {kind: %s, url: "https://ntfy.example/ops"}
templates:
  - {name: t, repo: /tmp/r, goal: g, budget: {wall_time: 1m}, loop: {kind: script, commands: ["true"]}, done_check: {commands: ["true"]}}
`, sink)
}

// TestSinkAndForgeKindsAddedToTheAppAreAcceptedAtOpenAndOnReload gives the app a sink kind and
// a forge kind of its own (Options.Sinks, Options.ForgeKinds): a config naming them opens, the
// forge is built by the registered constructor, the dispatcher sends through the kind, and a
// reload validates against the same kinds (a kind nobody registered is refused, the old config
// staying); an app without them refuses the config at open, naming the field.
func TestSinkAndForgeKindsAddedToTheAppAreAcceptedAtOpenAndOnReload(t *testing.T) {
	t.Parallel()
	forges := forge.Kinds{"memory": func(cfg forge.Config) (forge.Forge, error) {
		return memForge{forge.Unsupported{ForgeName: cfg.Name}}, nil
	}}
	sinks := map[workitems.NotifySinkKind]notify.Sink{"ntfy": logSink{}}

	// The same kinds, as the team's main loads its config with them.
	fk := forge.BuiltinKinds()
	fk["memory"] = forges["memory"]
	kinds := config.Kinds{Sinks: notify.BuiltinSinks(nil).Register("ntfy", logSink{}), Forges: fk}
	if _, err := parseConfig([]byte(kindsConfig("ntfy"))); err == nil || !strings.Contains(err.Error(), "forges.mem.kind") {
		t.Fatalf("the built-in kinds accepted a memory forge: %v", err)
	}
	path := filepath.Join(t.TempDir(), "outerloop.yaml")
	writeFile(t, path, kindsConfig("ntfy"))
	cfg, err := config.LoadConfigWith(path, kinds)
	if err != nil {
		t.Fatal(err)
	}

	env := redistest.New(t)
	results := make(chan app.ReloadResult, 4)
	a, err := app.Open(context.Background(), app.Options{Config: cfg, ConfigPath: path, RedisURL: redistest.URL(),
		Prefix: env.Prefix, Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t),
		Sinks: sinks, ForgeKinds: forges, OnReload: func(r app.ReloadResult) { results <- r }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if f, err := a.Forges.Get("mem"); err != nil || f.Kind() != "memory" {
		t.Fatalf("forge mem: %v %v", f, err)
	}
	if d, err := a.Dispatcher("d"); err != nil || d == nil {
		t.Fatalf("dispatcher over the ntfy sink: %v %v", d, err)
	}

	// A reload checks against the same kinds: the file unchanged but for a kind nobody
	// registered is refused naming the field, and the old config stays.
	writeFile(t, path, kindsConfig("teams"))
	r := a.Reload(context.Background(), true)
	var ce *config.ConfigError
	if r.Result != metrics.ReloadInvalid || !errors.As(r.Err, &ce) || ce.Field != "notify.sinks.ops.kind" {
		t.Fatalf("reload naming sink kind teams: %+v", r)
	}
	writeFile(t, path, strings.Replace(kindsConfig("ntfy"), "goal: g", "goal: g2", 1))
	if r := a.Reload(context.Background(), true); r.Result != metrics.ReloadApplied {
		t.Fatalf("reload of a valid config with the registered kinds: %+v", r)
	}

	// Without the kinds, the same config is refused at open, naming the field.
	_, err = app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Sinks: sinks})
	if !errors.As(err, &ce) || ce.Field != "forges.mem.kind" {
		t.Fatalf("open without the forge kind: %v, want forges.mem.kind", err)
	}
	_, err = app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), ForgeKinds: forges})
	if !errors.As(err, &ce) || ce.Field != "notify.sinks.ops.kind" {
		t.Fatalf("open without the sink kind: %v, want notify.sinks.ops.kind", err)
	}
}
