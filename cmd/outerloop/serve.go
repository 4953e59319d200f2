package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/spf13/cobra"

	"outerloop/alerts"
	"outerloop/api"
	"outerloop/internal/app"
	"outerloop/notify"
	"outerloop/scheduler"
	"outerloop/verify"
)

func serveCmd(g *globals) *cobra.Command {
	var addr string
	var concurrency int
	var noWorker, noScheduler, queuesUI bool
	var shutdownTimeout, bodyTimeout time.Duration
	c := &cobra.Command{
		Use:    "serve",
		Short:  "Run scheduler, worker and the HTTP server (API, metrics, console) in one process",
		Args:   cobra.NoArgs,
		PreRun: func(*cobra.Command, []string) { g.runsItems = !noWorker },
		RunE: g.withLongApp(true, func(ctx context.Context, a *app.App, _ []string) error {
			return runServe(ctx, a, serveOptions{addr: addr, concurrency: concurrency, worker: !noWorker,
				scheduler: !noScheduler, queuesUI: queuesUI, shutdownTimeout: shutdownTimeout, bodyTimeout: bodyTimeout, euid: g.euid()})
		}),
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	c.Flags().IntVar(&concurrency, "concurrency", 2, "attempts run at once by the built-in worker")
	c.Flags().BoolVar(&noWorker, "no-worker", false, "do not run a worker in this process")
	c.Flags().BoolVar(&noScheduler, "no-scheduler", false, "do not run the cron scheduler in this process")
	c.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "after SIGTERM, exit 1 (logging what was still stopping and every goroutine's stack) if stopping takes longer; a second SIGTERM exits at once")
	c.Flags().BoolVar(&queuesUI, "queues-ui", false, "mount asynqmon's queue UI at /queues (reading needs a login when a token is configured, its actions the operator role)")
	c.Flags().DurationVar(&bodyTimeout, "body-timeout", api.DefaultBodyTimeout, "a request's body (a webhook's, an API call's) must arrive within this, or it is answered 408 and its connection closed")
	return c
}

// serveOptions are serve's flags.
type serveOptions struct {
	addr              string
	concurrency       int
	worker, scheduler bool
	queuesUI          bool
	shutdownTimeout   time.Duration // the whole stop (DefaultShutdownTimeout when 0)
	bodyTimeout       time.Duration // a request body's arrival (api.DefaultBodyTimeout when 0)
	euid              int           // the process's effective uid: a worker as root says so at start
}

// shutdownBudget splits the whole stop's bound (DefaultShutdownTimeout when ≤ 0) into its parts
// (shutdown.go): open HTTP requests get a sixth to drain, then their connections are closed;
// running attempts get a third to checkpoint and yield or finish the done check or delivery
// under way, then that is cancelled and their tasks handed back (worker.Server.Shutdown).
func shutdownBudget(total time.Duration) (httpDrain, attemptsYield time.Duration) {
	if total <= 0 {
		total = DefaultShutdownTimeout
	}
	return total / 6, total / 3
}

// runServe runs the parts of the system until ctx ends, then stops them in order, each bounded:
// HTTP (live streams and long polls end, the rest drain), asynqmon, the worker (loops checkpoint
// and yield; their tasks are handed back to the queue), the scheduler, the notifications. The
// whole stop is bounded by o.shutdownTimeout (see stopper).
func runServe(ctx context.Context, a *app.App, o serveOptions) error {
	addr, concurrency, withWorker, withScheduler := o.addr, o.concurrency, o.worker, o.scheduler
	st := newStopper(a.Logger)
	// Armed when the signal comes, and left armed: it also bounds what runs after runServe
	// returns (the config watch, closing Redis), and the process ends right after.
	defer context.AfterFunc(ctx, func() { st.arm(o.shutdownTimeout) })()
	sched, err := a.Scheduler(nil)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	nd, err := a.Dispatcher(fmt.Sprintf("%s:%d", host, os.Getpid())) // notifications, whatever else runs here
	if err != nil {
		return err
	}
	nd.Start()
	defer st.stage("notify dispatcher", nd.Shutdown)
	if withScheduler {
		sched.Start(ctx)
		defer st.stage("scheduler", sched.Shutdown)
		stopPoller := a.RunPoller(ctx)
		defer st.stage("poller of waiting items", stopPoller)
	}
	if withWorker {
		w := a.Worker(concurrency, fmt.Sprintf("%s:%d", host, os.Getpid()))
		if err := w.Start(); err != nil {
			return err
		}
		defer st.stage("worker (attempts checkpoint and yield)", func() {
			_, yield := shutdownBudget(o.shutdownTimeout)
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), yield)
			defer cancel()
			w.Shutdown(wctx)
		})
	}
	mux := http.NewServeMux()
	token := os.Getenv("OUTERLOOP_API_TOKEN")
	auth, audit, err := accessControl(a)
	if err != nil {
		return err
	}
	// Every trigger's firings are counted (metrics) and each template's last one kept for the
	// templates page.
	firings := scheduler.NewFiringLog(a.Queue, a.Metrics)
	apiSrv := api.New(api.Options{Queue: a.Queue, Auth: auth, Metrics: a.Metrics.Handler(), Logger: a.Logger,
		Evidence: verify.EvidenceHandler(a.CIStore, token), EvidenceFiles: verify.EvidenceFilesHandler(a.EvidenceFiles),
		NextRun: sched.NextRun, Fleet: a.Fleet, Audit: audit, Experiments: a.EvalRunner(),
		Triggers: firings}) // POST /api/templates/{name}/trigger: the template's own secret (docs/triggers.md)
	apiSrv.Register(mux)
	con := registerConsole(mux, a, auth, sched.NextRun, audit)
	mux.Handle("GET /api/notifications", notify.ListHandler(a.Outbox))
	// The forges' webhooks: signed (webhook_secret_env), deduplicated, they wake waiting items
	// and carry /outerloop commands.
	// Triggers: forge events a template subscribes to make items (docs/triggers.md).
	triggers := scheduler.NewTriggers(a.Queue, a.CurrentConfig, a.Logger.With("component", "triggers")).WithHeads(scheduler.ForgeHeads(a.Forges)).
		WithObserver(firings)
	mux.Handle("POST /hooks/{forge}", a.Hooks(forgeAuditor{audit}, triggers))
	// Alertmanager's notifications: a receiver of alertmanager: authenticates them; the templates
	// that subscribe to its alerts make items (docs/triggers.md, "Alertmanager").
	alertTriggers := alerts.NewTriggers(a.Queue, a.CurrentConfig, a.Logger.With("component", "alerts")).WithObserver(firings)
	mux.Handle("POST /hooks/alertmanager/{name}", alerts.Handler(alerts.Options{Config: a.CurrentConfig, Notifier: alertTriggers,
		Observer: firings, Logger: a.Logger.With("component", "alerts")}))
	// asynq's own queue gauges on the same /metrics; we do not duplicate them.
	if err := a.Metrics.RegisterQueues(a.Inspector()); err != nil {
		return err
	}
	if o.queuesUI {
		mon := asynqmon.New(asynqmon.Options{RootPath: "/queues", RedisConnOpt: a.AsynqOpt})
		defer st.stage("asynqmon", func() { _ = mon.Close() })
		mux.Handle("/queues/", mon)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: listen %s: %w", addr, err)
	}
	// Heads and bodies are read within bounds; no WriteTimeout: the console's live event
	// streams and the API's long polls stay open (api.NewHTTPServer).
	srv := api.NewHTTPServer(api.Protect(mux, api.ProtectOptions{Auth: auth, Audit: audit, Logger: a.Logger}),
		api.ServerOptions{BodyTimeout: o.bodyTimeout})
	srv.RegisterOnShutdown(con.Close)    // open item pages would otherwise hold Shutdown up
	srv.RegisterOnShutdown(apiSrv.Close) // and so would the API's long polls
	a.Logger.Info("serving", "addr", ln.Addr().String(), "embedded_redis", a.Embedded, "actions_enabled", auth.CanAct(), "read_login", auth.ReadLogin(),
		"worker", withWorker, "scheduler", withScheduler)
	if withWorker {
		logSandbox(a)
		logPrivilege(a.Logger, o.euid, a.Config, a.Runner)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		a.Logger.Info("shutting down: attempts checkpoint and yield")
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	drain, _ := shutdownBudget(o.shutdownTimeout)
	st.stage("http", func() { shutdownHTTP(ctx, srv, a, drain) })
	return nil
}

// shutdownHTTP stops the listener and waits up to drain for the requests under way (the
// console's live streams end on their own, see Console.Close), then closes the connections
// still open: a long poll or a slow client must not hold the process.
func shutdownHTTP(ctx context.Context, srv *http.Server, a *app.App, drain time.Duration) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		a.Logger.Warn("HTTP requests still open after the drain: closing their connections", "drain", drain.String(), "err", err)
		_ = srv.Close()
	}
}

func schedulerCmd(g *globals) *cobra.Command {
	var metricsAddr string
	var shutdownTimeout time.Duration
	c := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the cron scheduler (any number of replicas create each tick's item once)",
		Args:  cobra.NoArgs,
		RunE: g.withLongApp(false, func(ctx context.Context, a *app.App, _ []string) error {
			s, err := a.Scheduler(nil)
			if err != nil {
				return err
			}
			s.Start(ctx)
			stopPoller := a.RunPoller(ctx)
			if metricsAddr != "" {
				stop := serveMetrics(a, metricsAddr)
				defer stop()
			}
			a.Logger.Info("scheduler running", "templates", len(a.Config.Templates))
			<-ctx.Done()
			st := newStopper(a.Logger)
			st.arm(shutdownTimeout) // left armed, as in serve
			st.stage("scheduler", s.Shutdown)
			st.stage("poller of waiting items", stopPoller)
			return nil
		}),
	}
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics on this address (e.g. :9464)")
	c.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "after SIGTERM, exit 1 (logging what was still stopping and every goroutine's stack) if stopping takes longer; a second SIGTERM exits at once")
	return c
}

// serveMetrics serves the process's /metrics on addr until the returned stop is called.
func serveMetrics(a *app.App, addr string) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.Metrics.Handler())
	srv := api.NewHTTPServer(mux, api.ServerOptions{})
	srv.Addr = addr
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Logger.Error("metrics listener failed", "addr", addr, "err", err)
		}
	}()
	return func() { _ = srv.Close() }
}

func workerCmd(g *globals) *cobra.Command {
	var concurrency int
	var id, metricsAddr string
	var shutdownTimeout time.Duration
	c := &cobra.Command{
		Use:    "worker",
		Short:  "Run attempts from the queue",
		Args:   cobra.NoArgs,
		PreRun: func(*cobra.Command, []string) { g.runsItems = true },
		RunE: g.withLongApp(false, func(ctx context.Context, a *app.App, _ []string) error {
			if id == "" {
				host, _ := os.Hostname()
				id = fmt.Sprintf("%s:%d", host, os.Getpid())
			}
			nd, err := a.Dispatcher(id) // notifications: refuses to start without a sink's secret
			if err != nil {
				return err
			}
			w := a.Worker(concurrency, id)
			if err := w.Start(); err != nil {
				return err
			}
			nd.Start()
			st := newStopper(a.Logger)
			defer context.AfterFunc(ctx, func() { st.arm(shutdownTimeout) })() // left armed, as in serve
			defer st.stage("notify dispatcher", nd.Shutdown)
			if metricsAddr != "" {
				stop := serveMetrics(a, metricsAddr)
				defer stop()
			}
			a.Logger.Info("worker running", "id", id, "concurrency", concurrency, "queue", a.QueueName())
			logSandbox(a)
			logPrivilege(a.Logger, g.euid(), a.Config, a.Runner)
			<-ctx.Done()
			a.Logger.Info("worker shutting down: attempts checkpoint and yield")
			st.stage("worker (attempts checkpoint and yield)", func() {
				_, yield := shutdownBudget(shutdownTimeout)
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), yield)
				defer cancel()
				w.Shutdown(wctx)
			})
			return nil
		}),
	}
	c.Flags().IntVar(&concurrency, "concurrency", 2, "attempts run at once")
	c.Flags().StringVar(&id, "id", "", "worker id in leases and events (default host:pid)")
	c.Flags().BoolVar(&g.keepWS, "keep-workspaces", false, "leave the workspaces of closed and cancelled items in the work dir (to look at what an attempt did; the sweeper still removes them past retention)")
	c.Flags().DurationVar(&g.leaseTTL, "lease-ttl", 15*time.Second, "attempt lease, renewed every third of it: a dead worker's attempt is recovered about this long after its last renewal")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics on this address (e.g. :9101)")
	c.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "after SIGTERM, exit 1 (logging what was still stopping and every goroutine's stack) if stopping takes longer; a second SIGTERM exits at once")
	return c
}

// logSandbox says at a worker's start which sandbox is in force and, when it cannot start,
// which templates' items it will refuse and what to do about it.
func logSandbox(a *app.App) {
	a.Logger.Info("sandbox", "mode", a.Runner.Describe(), "limits", a.Runner.DescribeLimits())
	for _, p := range app.SandboxProblems(a.Config, a.Runner) {
		a.Logger.Warn("sandbox: items will be refused", "problem", p)
	}
}
