// Package app wires outerloop's parts into one running system: config, Redis (a server or the
// embedded miniredis), the item store, the queue, the scheduler, the worker with its inner
// loops, the verifier, delivery and the metrics. The CLI, the HTTP server and the end-to-end
// tests all build the system through it, so they run the same thing.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/delivery"
	"outerloop/fleet"
	"outerloop/fleet/discover"
	"outerloop/forge"
	"outerloop/forge/sharedlimit"
	"outerloop/hooks"
	"outerloop/internal/redisconn"
	"outerloop/metrics"
	"outerloop/notify"
	"outerloop/proc"
	"outerloop/publish"
	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/waits"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/execloop"
	"outerloop/worker/model"
	"outerloop/worker/scriptloop"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Options says how to open the system.
type Options struct {
	Config   *config.Config
	RedisURL string // "" → embedded miniredis (demo and single-process mode)
	Prefix   string // store key prefix (default "ol:")
	Queue    string // asynq queue (default "outerloop")
	Workdir  string // workspaces root (default $TMPDIR/outerloop-work)
	Logger   *slog.Logger
	Clock    workitems.Clock
	// Loops adds or replaces inner loops (tests, the demo's recorded model).
	Loops map[workitems.LoopKind]worker.InnerLoop
	// Sinks adds notification sink kinds (or replaces built-in ones) for this process's
	// dispatchers; ForgeKinds adds forge kinds. The config is checked against them at Open and
	// at every reload (docs/extending.md).
	Sinks      map[workitems.NotifySinkKind]notify.Sink
	ForgeKinds forge.Kinds
	// Publisher delivers branch and pull_request modes through a forge (default:
	// delivery.NotConfigured, which escalates them).
	Publisher delivery.Publisher
	// Getenv reads the forges' token variables at each use (default os.Getenv).
	Getenv func(string) string
	// MaxPatchBytes bounds the patch kept with an item (default delivery.DefaultMaxPatchBytes).
	MaxPatchBytes int64
	// Metrics adds options to the metrics (tests: stats timeouts).
	Metrics []metrics.Option

	// WaitForRedis makes Open wait (with backoff, logging) until Redis answers instead of
	// failing at once: long-running processes (worker, scheduler, serve) started before Redis or
	// during an outage then do not crash-loop under their supervisor.
	WaitForRedis bool
	// LeaseTTL is the workers' attempt lease (default 15s): how soon a dead worker's attempt is
	// recovered.
	LeaseTTL time.Duration

	// ProgressEvery is how often a running done-check command reports its elapsed time and
	// output tail (default 5 s; tests shorten it).
	ProgressEvery time.Duration

	// KeepWorkspaces turns workspace removal off (the demo's --keep): no sweeper, and closed
	// items keep theirs.
	KeepWorkspaces bool

	// OneShot is a command that serves no /metrics and runs no scheduler: the metrics get no
	// per-template series or gauges (O(templates) work nobody would read).
	OneShot bool
	// ConfigPath is the file Config was loaded from: Reload and WatchConfig read it again ("":
	// no reload).
	ConfigPath string
	// OnReload is told every reload that read the file (SIGHUP, or the file changed): tests
	// await it.
	OnReload func(ReloadResult)
	// OnReplan is told when the scheduler applied a reloaded config's schedules.
	OnReplan func(schedules int)
	// FleetEvery is how often each worker's fleet admitter runs a round (default 5s);
	// FleetPRCheckEvery how often a fleet blocked on max_open_prs reads its open pull requests
	// from the forge (default 1m).
	FleetEvery, FleetPRCheckEvery time.Duration
	// NoRunner opens a system that runs no attempt and no command (reads and store commands,
	// the scheduler, serve without a worker): no process runner is made (open_runner.go).
	NoRunner bool
}

// App is the wired system.
type App struct {
	Config   *config.Config
	Redis    redis.UniversalClient
	AsynqOpt asynq.RedisConnOpt
	Store    *itemstore.Store
	Queue    *scheduler.Queue
	Metrics  *metrics.Metrics
	Verifier *verify.Verifier
	// Judge decides after the push and reads a waiting item's evidence (package waits).
	Judge *waits.Judge
	// Deliverer turns closed attempts into commits and patches (and, with a forge's publisher,
	// pull requests).
	Deliverer *delivery.Deliverer
	// Branches is the branch ledger (publish.RedisBranches).
	Branches *publish.RedisBranches
	CIStore  *verify.RedisCIStore // CI results posted to the evidence webhook
	// EvidenceFiles keeps each attempt's evidence files for an offline replay (30 days).
	EvidenceFiles *verify.RedisEvidenceStore
	Forges        forge.Set // a client per entry of forges:, by key
	Loops         *worker.Registry
	Logger        *slog.Logger
	Embedded      bool
	Workdir       string
	// Runner starts every child process (sandbox, guard, records); Sandbox describes it. Nil
	// with Options.NoRunner.
	Runner *proc.Runner
	// Outbox holds the notifications of escalations, failures and daily caps (queued by the
	// store's hooks); Dispatcher sends them.
	Outbox *notify.Outbox
	// Fleet is the gate of fleet templates' limits; its slots and pull requests are kept in
	// the store's transitions (fleet.Gate.TransitionHook).
	Fleet *fleet.Gate
	// Workspaces makes and removes this process's attempt workspaces (shared by its handlers
	// and its sweeper, so mirror locks are shared too).
	Workspaces *worker.Workspaces

	opts      Options
	live      atomic.Pointer[config.Config] // the config in force (reload.go)
	reload    *reloader
	mu        sync.Mutex
	sched     *scheduler.Scheduler // re-planned on a reload
	client    *asynq.Client
	inspector *asynq.Inspector
	mini      *miniredis.Miniredis
	evals     evalsOnce // the eval namespace (evals.go), built when first used
}

// Open connects to Redis (or starts the embedded one) and builds every part.
func Open(ctx context.Context, o Options) (*App, error) {
	if o.Config == nil {
		return nil, fmt.Errorf("app: no config")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Prefix == "" {
		o.Prefix = "ol:"
	}
	if o.Queue == "" {
		o.Queue = "outerloop"
	}
	if o.Workdir == "" {
		o.Workdir = filepath.Join(os.TempDir(), "outerloop-work")
	}
	a := &App{Config: o.Config, Logger: o.Logger, opts: o, Workdir: o.Workdir,
		Workspaces: &worker.Workspaces{Root: o.Workdir, BaseDir: o.Config.Dir, Deployment: o.Prefix, Clock: o.Clock}}
	if err := a.openRunner(ctx); err != nil { // open_runner.go: not with NoRunner
		return nil, err
	}
	if o.RedisURL == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // asynq's leases rely on keys expiring with real time
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("app: embedded redis: %w", err)
		}
		a.mini, a.Embedded = m, true
		o.RedisURL = "redis://" + m.Addr() + "/0"
		o.Logger.Warn("no Redis configured: using an embedded in-process miniredis; nothing survives this process", "addr", m.Addr())
	}
	conn, err := redisconn.Parse(o.RedisURL)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("app: %w", err)
	}
	a.Redis = conn.Client()
	if o.WaitForRedis {
		err = redisconn.Wait(ctx, a.Redis, conn.Describe(), o.Logger, o.Clock.After)
	} else {
		err = a.Redis.Ping(ctx).Err()
	}
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("app: redis at %s does not answer: %w", conn.Describe(), err)
	}
	a.AsynqOpt = conn.AsynqOpt()
	// Escalations and failures queue their notifications in the transition's own MULTI.
	a.Outbox = notify.NewOutbox(a.Redis, o.Prefix, o.Config, o.Clock, o.Logger.With("component", "notify"))
	a.Fleet = fleet.NewGate(a.Redis, o.Prefix, o.Clock)
	a.Store = itemstore.NewStore(a.Redis, o.Prefix, itemstore.WithClock(o.Clock),
		itemstore.WithTransitionHook(a.Outbox.TransitionHook()), itemstore.WithTransitionHook(a.Fleet.TransitionHook()),
		itemstore.WithLimitHook(a.Outbox.LimitHook()))
	// Stores written before the ordered indexes get them built once, here (one GET when current).
	if cur, err := a.Store.IndexesCurrent(ctx); err != nil {
		a.Close()
		return nil, fmt.Errorf("app: %w", err)
	} else if !cur {
		o.Logger.Warn("building the ordered item indexes of a store written by an older version (once)")
		n, err := a.Store.MigrateIndexes(ctx, 1000)
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("app: %w", err)
		}
		o.Logger.Info("item indexes built", "items", n, "version", itemstore.IndexVersion)
	}
	a.client = asynq.NewClient(a.AsynqOpt)
	a.inspector = asynq.NewInspector(a.AsynqOpt)
	// Metrics log through the app's logger (--log-format) and read the app's clock.
	a.Metrics = metrics.New(append([]metrics.Option{metrics.WithLogger(o.Logger), metrics.WithClock(o.Clock)}, o.Metrics...)...)
	if !o.OneShot {
		a.Metrics.SetConfig(o.Config)
	}
	a.Metrics.SetStatsSource(a.Store.Stats)
	a.Metrics.SetFleetSource(a.fleetUsage)
	// The registry of inner loops is filled below; the queue asks it what a kind does (steer).
	a.Loops = worker.NewRegistry()
	// People's decisions are counted where every resolution goes through: Queue.Resolve.
	a.Queue = scheduler.NewQueue(a.Store, a.client, a.inspector, o.Config,
		scheduler.QueueOptions{Queue: o.Queue, Clock: o.Clock, Logger: o.Logger, Observer: a.Metrics, Fleet: a.Fleet, Loops: a.Loops,
			Repos: fleetRepos{a: a, d: discover.New(discover.Config{Redis: a.Redis, Prefix: o.Prefix, Clock: o.Clock,
				Logger: o.Logger.With("component", "fleet")})}})
	a.Fleet.HoldWhilePaused(a.Queue.Paused) // a paused fleet starts no new attempt
	a.initReload()
	// One client per entry of forges: (config adds a default github one for templates that
	// still say ci.provider: github). CI evidence comes from a template's forge, or from results
	// posted to POST /api/evidence, kept under our prefix (serve's webhook writes the same store).
	// A rate limit one process meets holds every process's calls to that forge.
	if err := o.Config.ValidateForgeKinds(a.forgeKinds()); err != nil {
		a.Close()
		return nil, fmt.Errorf("app: config: %w", err)
	}
	a.Forges, err = forge.NewSet(o.Config.Forges, forge.Config{Clock: o.Clock, Logger: o.Logger, Getenv: o.Getenv,
		SharedLimits: sharedlimit.New(a.Redis, o.Prefix, o.Clock), Kinds: a.forgeKinds()})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("app: %w", err)
	}
	// The mirror reads a private repo with its forge's token, by the push's path (a header).
	a.Workspaces.Credentials = a.repoCredentials
	a.CIStore = verify.NewRedisCIStore(a.Redis, o.Prefix, 7*24*time.Hour, o.Clock)
	a.EvidenceFiles = verify.NewRedisEvidenceStore(a.Redis, o.Prefix, 30*24*time.Hour)
	vopts := []verify.Option{verify.WithLogger(o.Logger), verify.WithClock(o.Clock), verify.WithCI(string(workitems.CIProviderWebhook), a.CIStore),
		verify.WithEvidenceStore(a.EvidenceFiles)}
	for name, f := range a.Forges {
		vopts = append(vopts, verify.WithCI(name, verify.NewForgeCI(f)))
	}
	a.Verifier = verify.New(append(vopts, verify.WithRunner(a.Runner))...)
	// The ledger of what outerloop pushed to each branch, shared by every process: publish reads
	// it before a push, the hooks' sink when a person hands a branch back.
	a.Branches = publish.NewRedisBranches(a.Redis, o.Prefix, 0, o.Clock)
	if o.Publisher == nil && len(a.Forges) > 0 {
		// Branch and pull_request modes publish through the deployment's forges; what follows
		// the push (CI, review) is waited for without a worker (package waits).
		o.Publisher = publish.New(publish.Options{Forges: a.Forges, Branches: a.Branches,
			Observer: a.Metrics, Clock: o.Clock, Logger: o.Logger})
	}
	a.Judge = &waits.Judge{Verifier: a.Verifier, Forges: a.Forges, Logger: o.Logger.With("component", "waits"), Config: a.CurrentConfig}
	a.Deliverer = delivery.New(delivery.Options{Publisher: o.Publisher, MaxPatchBytes: o.MaxPatchBytes, Clock: o.Clock, Logger: o.Logger})
	a.Loops.Register(workitems.LoopScript, scriptloop.New())
	// The agent loop waits out model retries on the app's one clock, and its providers read
	// Retry-After dates against it.
	a.Loops.Register(workitems.LoopAgent, agentloop.New(agentloop.WithClock(o.Clock), agentloop.WithProviderFactory(
		func(pc config.ProviderConfig, name string) (model.Provider, error) {
			p, err := model.New(pc, name, os.Getenv, nil, model.WithClock(o.Clock))
			if err != nil {
				return nil, err
			}
			return model.Instrument(p, a.Metrics.ModelRequest), nil
		})))
	a.Loops.Register(workitems.LoopExec, execloop.New())
	for k, l := range o.Loops {
		a.Loops.Register(k, l)
	}
	// The registries own the kinds and their settings' checks: a loop or sink of a kind this
	// process registered (and only those) is valid here (forge kinds were checked above).
	k := a.Kinds()
	err = o.Config.ValidateLoops(k.Loops)
	if err == nil {
		err = o.Config.ValidateSinks(k.Sinks)
	}
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("app: config: %w", err)
	}
	return a, nil
}

// Kinds are the registries of this process's loop, sink and forge kinds, which its config is
// validated against at Open and at every reload.
func (a *App) Kinds() config.Kinds {
	return config.Kinds{Loops: a.Loops, Sinks: a.sinks(nil), Forges: a.forgeKinds()}
}

// forgeKinds are the built-in forge kinds and Options.ForgeKinds.
func (a *App) forgeKinds() forge.Kinds {
	kinds := forge.BuiltinKinds()
	maps.Copy(kinds, a.opts.ForgeKinds)
	return kinds
}

// sinks are the built-in sink kinds, their requests made with hc, and Options.Sinks.
func (a *App) sinks(hc *http.Client) *notify.Registry {
	r := notify.BuiltinSinks(hc)
	for k, s := range a.opts.Sinks {
		r.Register(k, s)
	}
	return r
}

// NewRunner builds the runner of this process's child processes from the deployment's
// sandbox: commands see neither the work dir (other workspaces, mirrors, process records) nor
// the config directory.
func NewRunner(ctx context.Context, cfg *config.Config, workdir string) (*proc.Runner, error) {
	var hide []string
	if cfg.Dir != "" {
		hide = append(hide, cfg.Dir)
	}
	return proc.NewRunner(ctx, proc.Setup{Mode: cfg.Sandbox.Mode, Workdir: workdir, Hide: hide,
		Bwrap: os.Getenv("OUTERLOOP_BWRAP")})
}

// SandboxProblems lists, per template, why its commands would be refused with r (the sandbox
// it asks for cannot start here); none when every template can run.
func SandboxProblems(cfg *config.Config, r *proc.Runner) []string {
	var out []string
	for _, t := range cfg.Templates {
		if r.ModeFor(proc.Policy{Mode: t.Sandbox.Mode}) == proc.ModeBwrap && r.Unavailable != nil {
			out = append(out, fmt.Sprintf("template %q: sandbox mode bwrap cannot start here (%v); its items are refused: %s", t.Name, r.Unavailable, proc.SandboxHint))
		}
	}
	return out
}

// Inspector returns asynq's inspector for the queue.
func (a *App) Inspector() *asynq.Inspector { return a.inspector }

// Prefix returns the store's key prefix (other components put their keys under it too).
func (a *App) Prefix() string { return a.opts.Prefix }

// QueueName returns the asynq queue name.
func (a *App) QueueName() string { return a.opts.Queue }

// Handler returns an attempt handler wired to this system.
func (a *App) Handler(workerID string) *worker.Handler {
	a.mustRun("Handler")
	return worker.NewHandler(worker.HandlerOptions{
		Store: a.Store, Config: a.Config, CurrentConfig: a.CurrentConfig, ReloadConfig: a.reloadForWorker, Loops: a.Loops, Verifier: a.Verifier,
		Enqueuer: a.Queue, Fleet: a.Fleet, Workspaces: a.Workspaces, KeepWorkspaces: a.opts.KeepWorkspaces, Deliverer: a.Deliverer,
		Evidence: a.Judge,
		Observer: a.Metrics, Clock: a.opts.Clock, Logger: a.Logger, WorkerID: workerID, LeaseTTL: a.opts.LeaseTTL, Runner: a.Runner,
		ProgressEvery: a.opts.ProgressEvery,
	})
}

// Worker returns a worker server (not started) with its workspace sweeper.
func (a *App) Worker(concurrency int, workerID string) *worker.Server {
	a.mustRun("Worker")
	so := worker.ServerOptions{Queue: a.opts.Queue, Concurrency: concurrency, Logger: a.Logger, Sweeper: a.Sweeper(),
		Janitor: a.Janitor(), Lanes: []worker.Lane{a.evalLane(workerID)}, Fleet: a.Admitter().Loop()}
	if ttl := a.opts.LeaseTTL; ttl > 0 && ttl/3 < 5*time.Second {
		so.RecoverEvery = ttl / 3 // a short lease is for a quick recovery: look as often as it is renewed
	}
	return worker.NewServer(a.AsynqOpt, a.Handler(workerID), so)
}

// Sweeper returns the workspace sweeper of this process's work dir (not started); nil with
// KeepWorkspaces.
func (a *App) Sweeper() *worker.Sweeper {
	if a.opts.KeepWorkspaces {
		return nil
	}
	return worker.NewSweeper(worker.SweeperOptions{Workspaces: a.Workspaces, Store: a.Store, Retention: a.Config.Retention,
		Clock: a.opts.Clock, Logger: a.Logger.With("component", "sweeper"), Disk: metrics.NewWorkspaceDisk(a.Metrics)})
}

// Janitor returns the retention janitor (not started): it deletes items past their retention
// with their keys and this process's workspaces of them.
func (a *App) Janitor() *worker.Janitor {
	return worker.NewJanitor(worker.JanitorOptions{Store: a.Store, Retention: a.Config.Retention, Workspaces: a.Workspaces,
		Clock: a.opts.Clock, Logger: a.Logger.With("component", "janitor")})
}

// Dispatcher returns the notification dispatcher (not started), or nil when notify: has no
// sinks. It fails when a sink's secret variable is not set. serve and worker run one each; any
// number share the outbox (at-least-once, see package notify).
func (a *App) Dispatcher(id string) (*notify.Dispatcher, error) {
	if len(a.Config.Notify.Sinks) == 0 {
		return nil, nil
	}
	// The sink kinds this process sends through (the config was validated against the same
	// kinds), the built-ins' requests bounded by notify.timeout.
	sinks := a.sinks(&http.Client{Timeout: a.Outbox.Config().Notify.Timeout.D()})
	d, err := notify.NewDispatcher(notify.DispatcherOptions{Outbox: a.Outbox, Clock: a.opts.Clock, Getenv: a.opts.Getenv, Sinks: sinks,
		Logger: a.Logger.With("component", "notify"), ID: id, Observer: metrics.NewNotifications(a.Metrics, a.Config)})
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	return d, nil
}

// Scheduler returns the cron scheduler (not started).
func (a *App) Scheduler(onTick func(scheduler.TickResult)) (*scheduler.Scheduler, error) {
	s, err := scheduler.New(a.Queue, scheduler.Options{Clock: a.opts.Clock, Logger: a.Logger, Observer: a.Metrics, OnTick: onTick,
		OnReplan: a.opts.OnReplan, Fleet: a.Admitter()})
	if err == nil {
		a.mu.Lock()
		a.sched = s // a reload re-plans it
		a.mu.Unlock()
	}
	return s, err
}

// Close releases connections and stops the embedded Redis.
func (a *App) Close() {
	if a.client != nil {
		_ = a.client.Close()
	}
	if a.inspector != nil {
		_ = a.inspector.Close()
	}
	if a.Redis != nil {
		_ = a.Redis.Close()
	}
	if a.mini != nil {
		a.mini.Close()
	}
}

// Poller returns the poller of waiting items (not started): every scheduler process runs one,
// and they share the due waits.
func (a *App) Poller() *waits.Poller {
	return &waits.Poller{Store: a.Store, Judge: a.Judge, Waker: a.Queue, Config: a.CurrentConfig, Clock: a.opts.Clock,
		Logger: a.Logger.With("component", "poller"), Observer: pollObserver(a.Metrics)}
}

// pollObserver is the metrics' side of the poller (nil when they do not count polls).
func pollObserver(m any) waits.Observer {
	if o, ok := m.(waits.Observer); ok {
		return o
	}
	return nil
}

// RunPoller runs the poller until the returned stop is called (it waits for the round under way).
func (a *App) RunPoller(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p := a.Poller()
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// Hooks returns the handler of the forges' webhooks (POST /hooks/{forge}): deliveries are
// checked against each forge's webhook_secret_env, deduplicated by delivery id, and handed to
// the waits sink (wakes, /outerloop commands, triggers).
func (a *App) Hooks(auditor waits.Auditor, triggers waits.Triggers) http.Handler {
	getenv := a.opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	names := make([]string, 0, len(a.Config.Forges))
	for k := range a.Config.Forges {
		names = append(names, k)
	}
	sink := &waits.Sink{Store: a.Store, Waker: a.Queue, Resolver: a.Queue, Forges: a.Forges, Auditor: auditor, Triggers: triggers,
		Config: a.CurrentConfig, Branches: a.Branches, Cleaner: a.Deliverer, Actions: a.Metrics, Logger: a.Logger.With("component", "hooks")}
	return hooks.Handler(hooks.Options{Forges: hooks.FromConfig(a.Config.Forges, getenv), Sink: sink,
		Seen: hooks.NewRedisSeen(a.Redis, a.opts.Prefix, hooks.DefaultSeenTTL), Observer: metrics.NewWebhooks(a.Metrics, names),
		Logger: a.Logger.With("component", "hooks"), Clock: a.opts.Clock})
}
