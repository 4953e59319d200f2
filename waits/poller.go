package waits

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"outerloop/forge"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Waker enqueues the wake of a waiting item: a short task a worker runs to judge and record
// (scheduler.Queue). It is idempotent per (item, seq): a second wake of the same wait is a no-op.
type Waker interface {
	EnqueueWake(ctx context.Context, item string, seq int64, by workitems.WakeReason) error
}

// Observer receives the poller's measurements (metrics.Metrics implements it).
type Observer interface {
	Polled(forge string, result string)
}

// The poll results (Observer.Polled).
const (
	PollDecided     = "decided"      // the evidence decides: a wake was enqueued
	PollPending     = "pending"      // nothing to decide yet: postponed
	PollRateLimited = "rate_limited" // the forge asked to wait: postponed past its reset
	PollError       = "error"        // reading failed: postponed, tried again
	PollDeadline    = "deadline"     // the wait ran out: a wake was enqueued without reading
)

// Poller wakes waiting items whose evidence changed without a forge event, and those whose
// deadline passed. Every scheduler process runs one; they share the work through the store's
// claim (ClaimDueWaits), so a round costs O(due items) of Redis and forge calls, never
// O(all items), and each item is looked at by one replica at a time.
type Poller struct {
	Store    *itemstore.Store
	Judge    *Judge
	Waker    Waker
	Config   func() *config.Config
	Clock    workitems.Clock
	Logger   *slog.Logger
	Observer Observer
	// Batch is how many due items one round claims (default 200); Hold how long a claim keeps
	// other replicas off an item (default 2 minutes).
	Batch int
	Hold  time.Duration

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	blocked  map[string]time.Time // forge → when its rate limit resets
}

// Run polls every cfg.Waits.PollEvery until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	p.defaults()
	for {
		every := p.Config().Waits.PollEvery.D()
		if _, err := p.Round(ctx); err != nil && ctx.Err() == nil {
			p.Logger.Warn("waits: poll round failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(every):
		}
	}
}

func (p *Poller) defaults() {
	if p.Clock == nil {
		p.Clock = workitems.SystemClock{}
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	if p.Batch <= 0 {
		p.Batch = 200
	}
	if p.Hold <= 0 {
		p.Hold = 2 * time.Minute
	}
	p.mu.Lock()
	if p.limiters == nil {
		p.limiters, p.blocked = map[string]*rate.Limiter{}, map[string]time.Time{}
	}
	p.mu.Unlock()
}

// Round polls the due waits once and returns how many it looked at.
func (p *Poller) Round(ctx context.Context) (int, error) {
	p.defaults()
	now := p.Clock.Now()
	ids, err := p.Store.ClaimDueWaits(ctx, now, p.Hold, p.Batch)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return len(ids), ctx.Err()
		}
		p.poll(ctx, id)
	}
	return len(ids), nil
}

// poll looks at one claimed item: wake it (deadline passed, or its evidence decides), or set
// its next poll.
func (p *Poller) poll(ctx context.Context, id string) {
	log := p.Logger.With("item", id)
	it, err := p.Store.Get(ctx, id)
	if err != nil {
		if !errors.Is(err, workitems.ErrNotFound) {
			log.Warn("waits: reading a waiting item", "err", err)
		}
		return
	}
	w := it.Wait
	if it.State != workitems.StateWaiting || w == nil {
		return // it left waiting after the claim; its indexes are already gone
	}
	now := p.Clock.Now()
	if w.Due(now) {
		p.wake(ctx, it, workitems.WakeDeadline, PollDeadline, log)
		return
	}
	cfg := p.Config()
	tmpl, ok := cfg.ItemTemplate(it)
	if !ok {
		p.wake(ctx, it, workitems.WakePoll, PollDecided, log) // the wake escalates it: template removed
		return
	}
	if until, blocked := p.rateBlocked(w.Forge, now); blocked {
		p.postpone(ctx, it, until, w.Forge, PollRateLimited, log)
		return
	}
	if err := p.limiter(w.Forge, cfg.Waits.PollRate).Wait(ctx); err != nil {
		return
	}
	// One look is a few reads; a forge that makes it wait out a rate limit must not hold the
	// round (the item is postponed and looked at again).
	pctx, cancel := context.WithTimeout(ctx, pollTimeout)
	d, err := p.Judge.Peek(pctx, tmpl, it)
	cancel()
	var fe *forge.Error
	switch {
	case errors.As(err, &fe) && errors.Is(err, forge.ErrRateLimited):
		until := fe.RetryAt
		if until.IsZero() {
			until = now.Add(time.Minute)
		}
		p.block(w.Forge, until)
		p.postpone(ctx, it, until, w.Forge, PollRateLimited, log)
	case err != nil:
		log.Warn("waits: reading a waiting item's evidence", "err", err)
		p.postpone(ctx, it, now.Add(Backoff(now.Sub(w.Since), cfg.Waits.FirstPoll.D())), w.Forge, PollError, log)
	case d.Outcome != workitems.OutcomeWait || d.Rule != waitRule(w):
		// Something to decide (or a different wait: CI green, now the review): the wake task
		// reads again and records.
		p.wake(ctx, it, workitems.WakePoll, PollDecided, log)
	default:
		p.postpone(ctx, it, now.Add(Backoff(now.Sub(w.Since), cfg.Waits.FirstPoll.D())), w.Forge, PollPending, log)
	}
}

// pollTimeout bounds one item's look at its evidence.
const pollTimeout = 20 * time.Second

// waitRule is the rule that keeps an item in its kind of wait.
func waitRule(w *workitems.Wait) workitems.RuleName {
	if w.Kind == workitems.WaitReview {
		return workitems.RuleReviewPending
	}
	return workitems.RuleCIPending
}

func (p *Poller) wake(ctx context.Context, it *workitems.Item, by workitems.WakeReason, result string, log *slog.Logger) {
	w := it.Wait
	if err := p.Waker.EnqueueWake(ctx, it.ID, w.Seq, by); err != nil {
		log.Warn("waits: enqueue of a wake failed; polled again", "err", err)
		p.postpone(ctx, it, p.Clock.Now().Add(p.Config().Waits.FirstPoll.D()), w.Forge, PollError, log)
		return
	}
	p.observe(w.Forge, result)
	// Looked at again later should the wake task be lost: the wake that ends the wait takes
	// the item out of the index first.
	_ = p.Store.PostponeWait(ctx, it.ID, p.Clock.Now().Add(p.Hold))
}

func (p *Poller) postpone(ctx context.Context, it *workitems.Item, next time.Time, forgeKey, result string, log *slog.Logger) {
	if dl := it.Wait.Deadline; next.After(dl) {
		next = dl
	}
	if err := p.Store.PostponeWait(ctx, it.ID, next); err != nil {
		log.Warn("waits: postponing a poll", "err", err)
	}
	p.observe(forgeKey, result)
}

func (p *Poller) observe(forgeKey, result string) {
	if p.Observer != nil {
		p.Observer.Polled(forgeKey, result)
	}
}

// Backoff is the time to the next poll of a wait that has lasted age: first (waits.first_poll)
// at first, a fifth of the age later on, at most 10 minutes (a forge event wakes it sooner).
func Backoff(age, first time.Duration) time.Duration {
	return min(max(age/5, first), 10*time.Minute)
}

func (p *Poller) limiter(forgeKey string, perSecond float64) *rate.Limiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.limiters[forgeKey]
	if l == nil || l.Limit() != rate.Limit(perSecond) {
		l = rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))
		p.limiters[forgeKey] = l
	}
	return l
}

func (p *Poller) block(forgeKey string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[forgeKey] = until
}

func (p *Poller) rateBlocked(forgeKey string, now time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.blocked[forgeKey]
	if !ok || !now.Before(until) {
		delete(p.blocked, forgeKey)
		return time.Time{}, false
	}
	return until, true
}
