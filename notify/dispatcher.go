package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Result is what one delivery attempt came to (the result label of
// outerloop_notifications_total).
type Result string

// The results of a delivery attempt.
const (
	ResultDelivered Result = "delivered" // the sink took it (a built-in one: a 2xx answer)
	ResultRetry     Result = "retry"     // it failed; another attempt is due after a backoff
	ResultDead      Result = "dead"      // it failed on the last attempt
)

// AllResults lists every Result.
func AllResults() []Result { return []Result{ResultDelivered, ResultRetry, ResultDead} }

// Observer counts delivery attempts (metrics.Notifications implements it).
type Observer interface {
	Notification(sink string, r Result)
}

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Outbox *Outbox
	Clock  workitems.Clock
	Logger *slog.Logger
	// Getenv reads the sinks' secret variables at each delivery (default os.Getenv).
	Getenv func(string) string
	// Sinks are the sink kinds deliveries are sent through, looked up by each sink's
	// configured kind (default: BuiltinSinks(HTTP)).
	Sinks *Registry
	// HTTP sends the built-in sinks' requests when Sinks is not given (default: a client with
	// notify.timeout).
	HTTP *http.Client
	// Observer counts attempts (may be nil).
	Observer Observer
	// ID names this dispatcher in its claims (e.g. host:pid).
	ID string
	// Poll is the longest wait between looks at the outbox (default 1s): notifications queued by
	// other processes are seen within it.
	Poll time.Duration
	// Batch is how many deliveries are claimed and sent at once (default 8).
	Batch int
	// Visibility is how long a claim holds before another dispatcher may take the delivery
	// over (default twice notify.timeout plus 10s).
	Visibility time.Duration
	// Rand returns the jitter in [0, 1) (default math/rand/v2).
	Rand func() float64
}

// Dispatcher delivers the outbox's notifications to their sinks, at least once each.
type Dispatcher struct {
	o      DispatcherOptions
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    uint64
	mu     sync.Mutex
}

// NewDispatcher checks that every sink's kind is registered and its environment variables are
// set (the error names the sink and the variable) and returns a dispatcher, not started.
func NewDispatcher(o DispatcherOptions) (*Dispatcher, error) {
	if o.Outbox == nil {
		return nil, errors.New("notify: dispatcher needs an outbox")
	}
	if o.Clock == nil {
		o.Clock = workitems.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	cfg := o.Outbox.Config().Notify
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: cfg.Timeout.D()}
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 8
	}
	if o.Visibility <= 0 {
		o.Visibility = 2*cfg.Timeout.D() + 10*time.Second
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.ID == "" {
		host, _ := os.Hostname()
		o.ID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.Sinks == nil {
		o.Sinks = BuiltinSinks(o.HTTP)
	}
	d := &Dispatcher{o: o}
	for _, name := range cfg.SinkNames() {
		to := d.target(name, cfg.Sinks[name])
		s, err := o.Sinks.lookup(to)
		if err != nil {
			return nil, err
		}
		if err := s.Check(to); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Start runs the dispatcher until Shutdown (nothing on a nil dispatcher).
func (d *Dispatcher) Start() {
	if d == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.run(ctx)
	}()
}

// Shutdown stops the dispatcher and waits for it. A request in flight is abandoned and its
// delivery released, due again at once (for this or another dispatcher): the receiver may
// have got it, so it may come twice — never not at all.
func (d *Dispatcher) Shutdown() {
	if d == nil {
		return
	}
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
}

func (d *Dispatcher) run(ctx context.Context) {
	for {
		n, err := d.RunOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := d.o.Poll
		if err != nil {
			d.o.Logger.Warn("notification outbox unavailable", "err", err)
		} else if n > 0 {
			continue // there may be more
		} else if next, ok, err := d.o.Outbox.NextDue(ctx); err == nil && ok {
			if w := next.Sub(d.o.Clock.Now()); w < wait {
				wait = w
			}
			if wait <= 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.o.Clock.After(wait):
		}
	}
}

func (d *Dispatcher) token() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	return fmt.Sprintf("%s#%d", d.o.ID, d.seq)
}

// RunOnce claims one batch of due deliveries, sends them concurrently and records each
// outcome; it returns how many it claimed.
func (d *Dispatcher) RunOnce(ctx context.Context) (int, error) {
	cfg := d.o.Outbox.Config().Notify
	now := d.o.Clock.Now()
	batch, err := d.o.Outbox.Claim(ctx, now, now.Add(d.o.Visibility), d.o.Batch, d.token(), cfg.Retry.MaxAttempts)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, dl := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, cfg, dl)
		}()
	}
	wg.Wait()
	return len(batch), nil
}

func (d *Dispatcher) deliver(ctx context.Context, cfg config.Notify, dl Delivery) {
	log := d.o.Logger.With("notification", dl.Notification.ID, "sink", dl.Sink, "attempt", dl.Attempts+1)
	bg := context.WithoutCancel(ctx) // outcomes are recorded even while shutting down
	err := d.send(ctx, cfg, dl)
	if err != nil && ctx.Err() != nil {
		if rerr := d.o.Outbox.Release(bg, dl, d.o.Clock.Now()); rerr != nil {
			log.Warn("notification not released (claimed again after the visibility timeout)", "err", rerr)
		}
		return
	}
	now := d.o.Clock.Now()
	if err == nil {
		if aerr := d.o.Outbox.Ack(bg, dl, now); aerr != nil {
			log.Warn("notification delivered but not recorded (it may be sent again)", "err", aerr)
		}
		d.observe(dl.Sink, ResultDelivered)
		log.Info("notification delivered")
		return
	}
	next := now.Add(Backoff(dl.Attempts+1, cfg.Retry.Backoff.D(), cfg.Retry.MaxBackoff.D(), d.o.Rand()))
	st, ferr := d.o.Outbox.Fail(bg, dl, now, next, err.Error(), cfg.Retry.MaxAttempts)
	switch {
	case ferr != nil:
		log.Warn("failed notification not recorded (claimed again after the visibility timeout)", "err", ferr, "cause", err)
	case st == StateDead:
		d.observe(dl.Sink, ResultDead)
		log.Error("notification dead after its last attempt (outerloop notify list --state dead)", "err", err)
	case st == StatePending:
		d.observe(dl.Sink, ResultRetry)
		log.Warn("notification failed; retrying", "err", err, "next", next)
	}
}

func (d *Dispatcher) target(name string, s config.NotifySink) Target {
	return Target{Name: name, Config: s, Getenv: d.o.Getenv}
}

// send makes one attempt of dl through the sink of its configured kind.
func (d *Dispatcher) send(ctx context.Context, cfg config.Notify, dl Delivery) error {
	sc, ok := cfg.Sinks[dl.Sink]
	if !ok {
		return fmt.Errorf("notify: sink %q is no longer configured", dl.Sink)
	}
	to := d.target(dl.Sink, sc)
	s, err := d.o.Sinks.lookup(to)
	if err != nil {
		return err
	}
	return s.Send(ctx, to, dl)
}

func (d *Dispatcher) observe(sink string, r Result) {
	if d.o.Observer != nil {
		d.o.Observer.Notification(sink, r)
	}
}
