package agentloop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"outerloop/worker"
	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Defaults of a Loop, overridable with options.
const (
	// DefaultMaxRetries is how often a transient model error is retried within one sampling step.
	DefaultMaxRetries = model.MaxRetries
	// DefaultWrapUpAt is the fraction of a budget cap at which the model is told to wrap up.
	DefaultWrapUpAt = 0.8
	// DefaultShellTimeout bounds one shell tool call when the model gives no timeout.
	DefaultShellTimeout = 2 * time.Minute
	// DefaultHookTimeout bounds one command stop hook.
	DefaultHookTimeout = time.Minute
	// DefaultNoProgressLimit applies when the template sets none.
	DefaultNoProgressLimit = 3
)

// ProviderFactory builds the model provider named by a template's loop.provider.
type ProviderFactory func(cfg config.ProviderConfig, name string) (model.Provider, error)

// Loop is the native agent inner loop. It is safe for concurrent use: every Run has its own
// runtime.
type Loop struct {
	providers  ProviderFactory
	clock      workitems.Clock // the one clock: retry waits and the default providers' Retry-After dates
	sleep      func(ctx context.Context, d time.Duration) error
	jitter     func() float64
	maxRetries int
	wrapUpAt   float64
	hooks      []StopHook
	shellEnv   []string // names of environment variables the shell tool passes through
	lookupEnv  func(string) (string, bool)
	// progressEvery paces a running shell tool call's progress events (progress.go).
	progressEvery time.Duration
}

// Option configures a Loop.
type Option func(*Loop)

// WithProviderFactory sets how providers are built (tests and the demo pass scripted or
// replay providers). The default is model.New with os.Getenv and http.DefaultClient.
func WithProviderFactory(f ProviderFactory) Option { return func(l *Loop) { l.providers = f } }

// WithProvider makes every run use p, whatever the template names.
func WithProvider(p model.Provider) Option {
	return WithProviderFactory(func(config.ProviderConfig, string) (model.Provider, error) { return p, nil })
}

// WithClock sets the one clock the loop waits on between model retries and that the default
// provider factory reads Retry-After dates against (default the system clock). A factory set with
// WithProviderFactory should pass the same clock to model.New (model.WithClock).
func WithClock(c workitems.Clock) Option { return func(l *Loop) { l.clock = c } }

// WithSleep sets how the loop waits between model retries (tests record instead of sleeping);
// it overrides the clock's wait.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(l *Loop) { l.sleep = sleep }
}

// WithJitter sets the source of backoff jitter, a value in [0.9, 1.1).
func WithJitter(j func() float64) Option { return func(l *Loop) { l.jitter = j } }

// WithStopHooks adds in-process stop hooks, run after the built-in hook and before the
// template's command hooks.
func WithStopHooks(h ...StopHook) Option { return func(l *Loop) { l.hooks = append(l.hooks, h...) } }

// New returns an agent loop.
func New(opts ...Option) *Loop {
	l := &Loop{
		clock:      workitems.SystemClock{},
		jitter:     func() float64 { return 0.9 + rand.Float64()*0.2 },
		maxRetries: DefaultMaxRetries,
		wrapUpAt:   DefaultWrapUpAt,
		shellEnv:   defaultShellEnv(),
		lookupEnv:  os.LookupEnv,
	}
	l.providers = func(cfg config.ProviderConfig, name string) (model.Provider, error) {
		return model.New(cfg, name, os.Getenv, http.DefaultClient, model.WithClock(l.clock))
	}
	for _, o := range opts {
		o(l)
	}
	if l.sleep == nil {
		l.sleep = clockSleep(l.clock)
	}
	return l
}

var _ worker.InnerLoop = (*Loop)(nil)

// clockSleep waits d on c, or until ctx ends.
func clockSleep(c workitems.Clock) func(ctx context.Context, d time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.After(d):
			return nil
		}
	}
}

// errWallTime is the cancellation cause when the attempt's wall-time budget runs out.
var errWallTime = errors.New("agentloop: wall-time budget reached")

// Run runs one attempt as one turn and returns its exit.
func (l *Loop) Run(ctx context.Context, a *worker.Attempt) workitems.Exit {
	if a.Meter == nil {
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassInvalidInput,
			Message: "agentloop: the attempt has no budget meter"}
	}
	// The deadline runs on the meter's clock, the one the handler injects.
	ctx, cancel := a.Meter.DeadlineContext(ctx, errWallTime)
	defer cancel()
	rt, err := l.newRuntime(ctx, a)
	if err != nil {
		if errors.Is(err, workitems.ErrLeaseLost) {
			return leaseLostExit()
		}
		ex := workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassOf(err),
			Message: fmt.Sprintf("agentloop: prepare: %v", err)}
		emit(ctx, a, workitems.KindTurnError, ex.Message, map[string]string{"reason": string(ex.Reason), "class": string(ex.Class)})
		return ex
	}
	defer rt.tools.root.Close()
	return rt.run(ctx)
}

func leaseLostExit() workitems.Exit {
	return workitems.Exit{Reason: workitems.ExitAborted, Class: workitems.ClassConflict,
		Message: "agentloop: attempt lease lost; stopped without writing"}
}

// emit sends a step event; it never fails the loop (the sink owns its errors).
func emit(ctx context.Context, a *worker.Attempt, kind workitems.EventKind, msg string, data map[string]string) {
	if a.Events == nil {
		return
	}
	d := map[string]string{"kind": string(kind)}
	for k, v := range data {
		d[k] = v
	}
	a.Events.Emit(context.WithoutCancel(ctx), workitems.Event{Type: workitems.EventStep, Message: msg, Data: d})
}
