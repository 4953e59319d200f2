package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"
	"time"

	"outerloop/metrics"
	"outerloop/workitems/config"
)

// DefaultReloadEvery is how often a long-running process looks at its config file.
const DefaultReloadEvery = 5 * time.Second

// reloader keeps the config a process runs and loads the file again on request: a valid new
// config is swapped in whole (the components read it through an atomic pointer), an invalid
// one is logged and counted and the old one stays.
type reloader struct {
	path    string // "" → the config did not come from a file: nothing to reload
	metrics *metrics.ConfigReloads

	mu      sync.Mutex // one reload at a time
	stat    fileStamp  // the file as last read
	sum     [32]byte   // sha256 of its bytes
	lastErr string     // the last invalid config's error ("" after a good load)
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// ReloadResult says what one reload did; Err is the invalid config's error.
type ReloadResult struct {
	Result  metrics.ReloadResult
	Version string // the version in force afterwards
	Err     error
}

// CurrentConfig returns the config in force (Config is the one Open started with).
func (a *App) CurrentConfig() *config.Config {
	if c := a.live.Load(); c != nil {
		return c
	}
	return a.Config
}

func (a *App) initReload() {
	a.live.Store(a.Config)
	// The file's modification time and size only (a stat): a one-shot command hashes neither
	// the config nor the file; the version gauge is set by WatchConfig.
	a.reload = &reloader{path: a.opts.ConfigPath, metrics: a.Metrics.NewConfigReloads()}
	if a.reload.path != "" {
		if st, err := os.Stat(a.reload.path); err == nil {
			a.reload.stat = fileStamp{mod: st.ModTime(), size: st.Size()}
		}
	}
}

func readStamped(path string) ([]byte, fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	b, err := os.ReadFile(path)
	return b, fileStamp{mod: st.ModTime(), size: st.Size()}, err
}

// Reload loads the config file again (SIGHUP). force reads it even when its modification time
// and size are as last read; a file whose bytes are unchanged is "unchanged" without parsing.
func (a *App) Reload(ctx context.Context, force bool) ReloadResult {
	res := a.doReload(ctx, force)
	if a.opts.OnReload != nil && (force || res.Result != metrics.ReloadUnchanged) {
		a.opts.OnReload(res)
	}
	return res
}

func (a *App) doReload(ctx context.Context, force bool) ReloadResult {
	r := a.reload
	if r == nil || r.path == "" {
		return ReloadResult{Result: metrics.ReloadUnchanged, Version: a.CurrentConfig().Version()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := a.CurrentConfig()
	if !force {
		st, err := os.Stat(r.path)
		if err == nil && st.ModTime().Equal(r.stat.mod) && st.Size() == r.stat.size {
			return ReloadResult{Result: metrics.ReloadUnchanged, Version: cur.Version()}
		}
		if err != nil && r.lastErr != "" { // still missing: counted and logged when it went
			return ReloadResult{Result: metrics.ReloadInvalid, Version: cur.Version(), Err: errors.New(r.lastErr)}
		}
	}
	b, st, err := readStamped(r.path)
	if err == nil && sha256.Sum256(b) == r.sum {
		r.stat = st
		if force {
			r.metrics.Reloaded(metrics.ReloadUnchanged)
		}
		return ReloadResult{Result: metrics.ReloadUnchanged, Version: cur.Version()}
	}
	var cfg *config.Config
	if err == nil {
		cfg, err = config.LoadConfigWith(r.path, a.Kinds())
	}
	if err != nil {
		r.metrics.Reloaded(metrics.ReloadInvalid)
		r.stat = st // an unchanged broken file is reported once, not every poll
		if err.Error() != r.lastErr || force {
			a.Logger.Error("config reload refused: the new config is invalid; the old one stays in force",
				"path", r.path, "version", cur.Version(), "err", err)
		}
		r.lastErr = err.Error()
		return ReloadResult{Result: metrics.ReloadInvalid, Version: cur.Version(), Err: err}
	}
	r.stat, r.sum, r.lastErr = st, sha256.Sum256(b), ""
	if cfg.Version() == cur.Version() {
		r.metrics.Reloaded(metrics.ReloadUnchanged)
		return ReloadResult{Result: metrics.ReloadUnchanged, Version: cur.Version()}
	}
	a.apply(ctx, cur, cfg)
	r.metrics.Reloaded(metrics.ReloadApplied)
	return ReloadResult{Result: metrics.ReloadApplied, Version: cfg.Version()}
}

// apply swaps cfg in: new requests, new attempts, the scheduler's entries and the metrics'
// labels follow it. What was built from the config at start (Redis, sandbox, forge clients,
// retention of the janitor and sweeper) stays until a restart; a change there is logged.
func (a *App) apply(_ context.Context, old, cfg *config.Config) {
	a.live.Store(cfg)
	a.Queue.SetConfig(cfg)
	a.Metrics.SetConfig(cfg)
	a.Outbox.SetConfig(cfg) // later events go to the new sinks and per-template targets
	a.mu.Lock()
	sched := a.sched
	a.mu.Unlock()
	if sched != nil {
		if err := sched.Replan(cfg); err != nil {
			a.Logger.Error("scheduler not re-planned", "err", err)
		}
	}
	a.reload.metrics.SetVersion(cfg.Version())
	added, removed, changed := templateDiff(old, cfg)
	a.Logger.Info("config reloaded", "path", a.reload.path, "from", old.Version(), "to", cfg.Version(),
		"templates", len(cfg.Templates), "added", added, "removed", removed, "changed", changed)
	if fields := restartFields(a.Config, cfg); len(fields) > 0 {
		a.Logger.Warn("config reloaded, but these settings take effect only after a restart", "fields", fields)
	}
}

// templateDiff names (up to a few) the templates a reload added, removed and changed.
func templateDiff(old, cfg *config.Config) (added, removed, changed []string) {
	const most = 20
	for i := range cfg.Templates {
		t := &cfg.Templates[i]
		if _, ok := old.Template(t.Name); !ok {
			added = appendMost(added, t.Name, most)
		} else if old.TemplateVersion(t.Name) != cfg.TemplateVersion(t.Name) {
			changed = appendMost(changed, t.Name, most)
		}
	}
	for i := range old.Templates {
		if _, ok := cfg.Template(old.Templates[i].Name); !ok {
			removed = appendMost(removed, old.Templates[i].Name, most)
		}
	}
	return added, removed, changed
}

func appendMost(s []string, v string, most int) []string {
	if len(s) == most {
		return append(s, "…")
	}
	if len(s) > most {
		return s
	}
	return append(s, v)
}

// restartFields lists the deployment settings that differ from those the process started with
// and are read only at start.
func restartFields(start, cfg *config.Config) []string {
	var out []string
	if start.Redis != cfg.Redis {
		out = append(out, "redis")
	}
	if !reflect.DeepEqual(start.Sandbox, cfg.Sandbox) {
		out = append(out, "sandbox")
	}
	if !reflect.DeepEqual(start.Forges, cfg.Forges) {
		out = append(out, "forges")
	}
	if !reflect.DeepEqual(start.Retention, cfg.Retention) {
		out = append(out, "retention")
	}
	// A dispatcher is started (and its sinks' secrets checked) only when sinks are configured
	// at start: adding the first sink or removing the last needs a restart.
	if (len(start.Notify.Sinks) == 0) != (len(cfg.Notify.Sinks) == 0) {
		out = append(out, "notify.sinks")
	}
	return out
}

// reloadForWorker is the worker's reload before it decides on an item of a template it does
// not know: it reads the file only when it changed since the last read.
func (a *App) reloadForWorker(ctx context.Context) *config.Config {
	a.Reload(ctx, false)
	return a.CurrentConfig()
}

// WatchConfig reloads the config on SIGHUP and when the file changes (its modification time
// and size looked at every `every` on the app's clock, its bytes hashed when they moved), until
// ctx ends or the returned stop is called. every ≤ 0 leaves only SIGHUP.
func (a *App) WatchConfig(ctx context.Context, every time.Duration) (stop func()) {
	a.reload.metrics.SetVersion(a.CurrentConfig().Version())
	ctx, cancel := context.WithCancel(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer signal.Stop(hup)
		for {
			var tick <-chan time.Time
			if every > 0 {
				tick = a.opts.Clock.After(every)
			}
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r := a.Reload(ctx, true)
				a.Logger.Info("config reload on SIGHUP", "result", r.Result, "version", r.Version)
			case <-tick:
				a.Reload(ctx, false)
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}
