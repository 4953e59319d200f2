// Command outerloop runs coding and maintenance agents as durable, budgeted, verified jobs:
// `serve` (scheduler + worker + HTTP), `scheduler`, `worker`, `enqueue`, `items`, `escalations`,
// `resolve`, `steer`, `verify`, `demo`, `bench` and `validate`. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"outerloop/internal/app"
	"outerloop/internal/redisconn"
	"outerloop/metrics"
	"outerloop/proc"
	"outerloop/workitems/config"
)

func main() {
	proc.MaybeGuard() // the runner re-executes this binary as each command's guard
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot(os.Stdout, os.Stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "outerloop:", err)
		os.Exit(1)
	}
}

// exitError carries an exit status that is not a failure of the command itself
// (verify's "decision: retry" exits 1 by design).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// globals are the root's persistent flags.
type globals struct {
	oneShot   bool // the command serves no /metrics (see longRunning)
	config    string
	redis     string
	prefix    string
	queue     string
	logFormat string
	logLevel  string
	workdir   string
	out, errw io.Writer
	// euid is the process's effective uid (os.Geteuid; a test gives its own): a worker as root
	// says so at start, and validate warns (privilege.go).
	euid func() int
	// waitRedis: a long-running command (serve, scheduler, worker) waits for Redis at start.
	waitRedis bool
	leaseTTL  time.Duration // worker --lease-ttl
	keepWS    bool          // worker --keep-workspaces
	// reloadEvery: how often a long-running command looks whether its config file changed.
	reloadEvery time.Duration
	// runsItems: the command runs attempts (worker, serve with its worker): only then does
	// opening the app make the process runner (guard, `go env`, sandbox probe).
	runsItems bool
	// noTemplates: the command reads no template, so the config's templates are not parsed
	// (withStoreApp).
	noTemplates bool
	// template: the command reads the one template it names, so the others are not parsed or
	// validated (withTemplateApp).
	template string
}

func newRoot(out, errw io.Writer) *cobra.Command {
	return newRootFor(&globals{out: out, errw: errw, euid: os.Geteuid})
}

// newRootFor is the command tree over g, whose out, errw and euid are set.
func newRootFor(g *globals) *cobra.Command {
	out, errw := g.out, g.errw
	root := &cobra.Command{
		Use:           "outerloop",
		Short:         "Run coding and maintenance agents as durable, budgeted, verified jobs",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errw)
	f := root.PersistentFlags()
	f.StringVar(&g.config, "config", "outerloop.yaml", "config file")
	f.StringVar(&g.redis, "redis", "", "Redis URL (default $REDIS_URL, then the config's redis:, else embedded for serve/demo)")
	f.StringVar(&g.prefix, "prefix", "ol:", "key prefix of outerloop's Redis keys")
	f.StringVar(&g.queue, "queue", "outerloop", "asynq queue name")
	f.StringVar(&g.logFormat, "log-format", "auto", "log format: text, json, or auto (json when stderr is not a terminal)")
	f.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.DurationVar(&g.reloadEvery, "reload-every", app.DefaultReloadEvery, "serve, scheduler, worker: reload the config when its file changed, looking this often (0: only on SIGHUP)")
	f.StringVar(&g.workdir, "workdir", "", "root of attempt workspaces (default $TMPDIR/outerloop-work)")
	root.AddCommand(
		serveCmd(g), schedulerCmd(g), workerCmd(g),
		enqueueCmd(g), itemsCmd(g), escalationsCmd(g), resolveCmd(g), steerCmd(g),
		verifyCmd(g), demoCmd(g), benchCmd(g), gcCmd(g), validateCmd(g), versionCmd(g), notifyCmd(g), auditCmd(g),
		templatesCmd(g), rerunCmd(g), // templates.go
		evalCmd(g), // eval.go
	)
	return root
}

func (g *globals) logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch g.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(g.errw, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(g.errw, opts)), nil
	case "auto":
		if f, ok := g.errw.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				return slog.New(slog.NewTextHandler(g.errw, opts)), nil
			}
		}
		return slog.New(slog.NewJSONHandler(g.errw, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text, json or auto", g.logFormat)
}

func (g *globals) loadConfig() (*config.Config, error) {
	if g.noTemplates {
		return config.LoadDeploymentConfig(g.config)
	}
	if g.template != "" {
		return config.LoadTemplateConfig(g.config, g.template)
	}
	return config.LoadConfig(g.config)
}

// redisURL resolves where Redis is; "" means embedded, allowed only where the whole system
// runs in this process.
func (g *globals) redisURL(cfg *config.Config, allowEmbedded bool) (string, error) {
	switch {
	case g.redis != "":
		return g.redis, nil
	case os.Getenv("REDIS_URL") != "":
		return os.Getenv("REDIS_URL"), nil
	case cfg != nil && cfg.Redis != "":
		return cfg.Redis, nil
	case allowEmbedded:
		return "", nil
	}
	return "", errors.New("no Redis: give --redis URL, set REDIS_URL, or put redis: in the config (the embedded Redis lives only inside serve and demo)")
}

// open loads the config and opens the system.
func (g *globals) open(ctx context.Context, allowEmbedded bool) (*app.App, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, err
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	url, err := g.redisURL(cfg, allowEmbedded)
	if err != nil {
		return nil, err
	}
	// go-redis logs a few lines of its own (pool, sentinel): into our log, not plain stderr.
	redis.SetLogger(redisconn.SlogLogger{L: log})
	o := app.Options{Config: cfg, ConfigPath: g.config, RedisURL: url, Prefix: g.prefix, Queue: g.queue, Workdir: g.workdir, Logger: log,
		WaitForRedis: g.waitRedis, LeaseTTL: g.leaseTTL, KeepWorkspaces: g.keepWS, NoRunner: !g.runsItems}
	if g.oneShot {
		o.Metrics = []metrics.Option{metrics.WithoutSeriesAhead()}
		o.OneShot = true
	}
	return app.Open(ctx, o)
}

// withLongApp is withApp for a long-running process: it waits for Redis instead of failing.
func (g *globals) withLongApp(allowEmbedded bool, run func(ctx context.Context, a *app.App, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g.waitRedis = true
		return g.withApp(allowEmbedded, func(ctx context.Context, a *app.App, args []string) error {
			stop := a.WatchConfig(ctx, g.reloadEvery) // reload.go: SIGHUP and a changed file
			defer stop()
			return run(ctx, a, args)
		})(cmd, args)
	}
}

// longRunning are the commands that serve /metrics; the others skip creating series ahead.
func longRunning(cmd string) bool {
	switch cmd {
	case "serve", "scheduler", "worker", "demo":
		return true
	}
	return false
}

// withStoreApp is withApp for a command that reads or changes items and reads no template
// (items, escalations, audit, notify, gc): the config's templates are neither parsed nor
// validated (config.LoadDeploymentConfig), what at 10k templates is nearly all of opening.
func (g *globals) withStoreApp(run func(ctx context.Context, a *app.App, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g.noTemplates = true
		return g.withApp(false, run)(cmd, args)
	}
}

// withTemplateApp is withApp for a command that reads or controls the one template its first
// argument names and records no config version (templates status, history, controls, pause,
// resume): the config's other templates are neither parsed nor validated
// (config.LoadTemplateConfig). Commands that make items (enqueue, templates run) pin the
// whole config's version and load it whole.
func (g *globals) withTemplateApp(run func(ctx context.Context, a *app.App, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			g.template = args[0]
		}
		return g.withApp(false, run)(cmd, args)
	}
}

// withApp makes a command body that runs with the system open, closing it afterwards.
func (g *globals) withApp(allowEmbedded bool, run func(ctx context.Context, a *app.App, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		g.oneShot = !longRunning(cmd.Name())
		if g.oneShot && os.Getenv("GOGC") == "" {
			// A one-shot command lives for one config parse and a few reads: collecting at 4×
			// the live heap instead of 2× saves a fifth of its CPU at 10k templates (bench --scale).
			debug.SetGCPercent(400)
		}
		a, err := g.open(cmd.Context(), allowEmbedded)
		if err != nil {
			return err
		}
		defer a.Close()
		err = run(cmd.Context(), a, args)
		recordCLI(cmd, a, args, err)
		return err
	}
}
