package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"outerloop/lib/periodic"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Enqueuer enqueues a granted item's attempt task (the scheduler's queue).
type Enqueuer interface {
	EnqueueHeld(ctx context.Context, id string) error
}

// Pauser pauses and reads the pause of a template (the scheduler's queue): the breaker's pause
// is a person's pause, by actor outerloop.
type Pauser interface {
	Paused(ctx context.Context, template string) (bool, error)
	// PauseFleet pauses the template; false when it was paused already.
	PauseFleet(ctx context.Context, template, reason string) (bool, error)
}

// PRStates reads whether a pull request is still open (the deployment's forges).
type PRStates interface {
	PROpen(ctx context.Context, forge, repo string, number int) (bool, error)
}

// Items reads an item (the store): the sweep checks the gate's entries against it.
type Items interface {
	Get(ctx context.Context, id string) (*workitems.Item, error)
}

// Notifier tells people that the breaker paused a template (package notify's outbox).
type Notifier interface {
	FleetPaused(ctx context.Context, template, reason string) error
}

// Admitter grants held items as their turn comes, reads whether the pull requests that fill
// max_open_prs closed, and trips the breaker. Every worker runs one, and the loop's rounds take
// turns across the deployment: one round per Every and one forge check per PRCheckEvery, not
// one per worker (rounds at once would still be safe: the gate's scripts are atomic and a
// task's enqueue is idempotent).
type Admitter struct {
	Gate     *Gate
	Items    Items // nil: no sweep
	Config   func() *config.Config
	Enqueuer Enqueuer
	Pauser   Pauser
	PRs      PRStates // nil: closed pull requests are learnt only from their items
	Notifier Notifier // nil: the pause is logged and shown, not sent
	Clock    workitems.Clock
	Logger   *slog.Logger
	// Every is how often a round runs (default 5s); PRCheckEvery how often a template blocked
	// on max_open_prs has its open pull requests read from the forge (default 1m).
	Every, PRCheckEvery time.Duration
}

// BreakerActor is who the breaker's pause is recorded as.
const BreakerActor = "outerloop"

// grantBatch bounds how many items one round grants per template.
const grantBatch = 100

// Loop returns the periodic loop of rounds (started and stopped with the worker server).
func (a *Admitter) Loop() *periodic.Loop {
	every := a.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	return &periodic.Loop{Every: every, Clock: a.clock(), Logger: a.log(), What: "fleet round failed", Pass: func(ctx context.Context) error {
		// The deployment's round of this period: another worker's took it, or this one does.
		if mine, err := a.Gate.turn(ctx, a.Gate.k.round(), every); err != nil || !mine {
			return err
		}
		_, err := a.Round(ctx)
		return err
	}}
}

// Round runs once over the fleet templates and returns how many items it granted.
func (a *Admitter) Round(ctx context.Context) (int, error) {
	cfg := a.Config()
	granted := 0
	var errs []error
	for i := range cfg.Templates {
		t := &cfg.Templates[i]
		if !t.IsFleet() {
			continue
		}
		if t.Fleet != nil && t.Fleet.PauseAfterFailures > 0 {
			if err := a.breaker(ctx, t); err != nil {
				errs = append(errs, err)
			}
		}
		if err := a.sweep(ctx, t); err != nil {
			errs = append(errs, err)
		}
		n, err := a.admit(ctx, t)
		granted += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return granted, errors.Join(errs...)
}

// Admit grants what t's limits let go now and enqueues it (the tick calls it after making
// the items of a tick; rounds call it for every template).
func (a *Admitter) admit(ctx context.Context, t *config.Template) (int, error) {
	if paused, err := a.Pauser.Paused(ctx, t.Name); err != nil {
		return 0, err
	} else if paused {
		return 0, nil // a paused fleet's items wait in line until it is resumed
	}
	u, err := a.Gate.Usage(ctx, t.Name)
	if err != nil || u.Held == 0 {
		return 0, err
	}
	if t.Fleet != nil && t.Fleet.MaxOpenPRs > 0 && u.OpenPRs+u.Reserved >= int64(t.Fleet.MaxOpenPRs) {
		if err := a.checkPRs(ctx, t); err != nil {
			a.log().Warn("fleet: open pull requests not read; the next round tries again", "template", t.Name, "err", err)
		}
	}
	ids, err := a.Gate.Admit(ctx, t, grantBatch)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		if err := a.Enqueuer.EnqueueHeld(ctx, id); err != nil {
			// Granted, so it holds its slot; the queue's reconcile enqueues it.
			a.log().Warn("fleet: granted item not enqueued; reconcile enqueues it", "template", t.Name, "item", id, "err", err)
			continue
		}
		a.log().Info("fleet: item's turn came", "template", t.Name, "item", id)
	}
	return len(ids), nil
}

// Admit grants and enqueues what t's limits let go now.
func (a *Admitter) Admit(ctx context.Context, t *config.Template) (int, error) {
	return a.admit(ctx, t)
}

// sweepLine is how far down the line a sweep looks.
const sweepLine = 20

// sweep takes out of the gate what the store says has moved on: an item holding a slot that is
// no longer queued, running or verifying (or is gone), and one at the front of the line that is
// no longer queued. The store's transitions keep the gate true; this mends what they cannot see
// (an attempt that asked the gate on a stale read of its item, a deleted item), so a fleet never
// stalls on a slot nobody holds. O(concurrency + sweepLine) reads per round.
func (a *Admitter) sweep(ctx context.Context, t *config.Template) error {
	if a.Items == nil {
		return nil
	}
	running, err := a.Gate.Running(ctx, t.Name)
	if err != nil {
		return err
	}
	line, err := a.Gate.Line(ctx, t.Name, sweepLine)
	if err != nil {
		return err
	}
	check := func(id string, ok func(workitems.State) bool) error {
		it, err := a.Items.Get(ctx, id)
		switch {
		case errors.Is(err, workitems.ErrNotFound):
		case err != nil:
			return err
		case ok(it.State):
			return nil
		}
		a.log().Info("fleet: released an entry whose item moved on", "template", t.Name, "item", id)
		return a.Gate.Release(ctx, t.Name, id)
	}
	for _, id := range running {
		if err := check(id, func(s workitems.State) bool {
			return s == workitems.StateQueued || s == workitems.StateRunning || s == workitems.StateVerifying
		}); err != nil {
			return err
		}
	}
	for _, id := range line {
		if err := check(id, func(s workitems.State) bool { return s == workitems.StateQueued }); err != nil {
			return err
		}
	}
	return nil
}

// checkPRs reads from the forge whether the template's open pull requests are still open, at
// most once per PRCheckEvery: a person merging one by hand frees its place.
func (a *Admitter) checkPRs(ctx context.Context, t *config.Template) error {
	if a.PRs == nil {
		return nil
	}
	every := a.PRCheckEvery
	if every <= 0 {
		every = time.Minute
	}
	if mine, err := a.Gate.turn(ctx, a.Gate.k.prCheck(t.Name), every); err != nil || !mine {
		return err // checked within the period, by this worker or another
	}
	prs, err := a.Gate.OpenPRs(ctx, t.Name)
	if err != nil {
		return err
	}
	var errs []error
	for key := range prs {
		repo, number, ok := splitPRKey(key)
		if !ok {
			continue
		}
		rt := t.ForRepo(repo)
		open, err := a.PRs.PROpen(ctx, rt.Deliver.Forge, rt.Deliver.Repo, number)
		if err != nil { // one unreadable keeps its place; the others are read on
			errs = append(errs, fmt.Errorf("fleet: template %s: pull request %s: %w", t.Name, key, err))
			continue
		}
		if !open {
			if err := a.Gate.PRClosed(ctx, t.Name, key); err != nil {
				return err
			}
			a.log().Info("fleet: pull request closed; its place is free", "template", t.Name, "pr", key)
		}
	}
	return errors.Join(errs...)
}

func splitPRKey(key string) (repo string, number int, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[i+1:])
	return key[:i], n, err == nil && n > 0
}

// breaker pauses t when its failure streak reached pause_after_failures.
func (a *Admitter) breaker(ctx context.Context, t *config.Template) error {
	n, err := a.Gate.Streak(ctx, t.Name)
	if err != nil || n < t.Fleet.PauseAfterFailures {
		return err
	}
	reason := fmt.Sprintf("%d items in a row ended failed or escalated (fleet.pause_after_failures: %d)", n, t.Fleet.PauseAfterFailures)
	paused, err := a.Pauser.PauseFleet(ctx, t.Name, reason)
	if err != nil {
		return fmt.Errorf("fleet: template %s: pause: %w", t.Name, err) // the streak stays: the next round tries again
	}
	// Paused now or already: the failures that tripped it are spent (never below 0, should two
	// rounds read the same streak; only the one that paused tells).
	if err := a.Gate.ResetStreak(ctx, t.Name, n); err != nil {
		return err
	}
	if !paused {
		a.log().Info("fleet: breaker tripped on a paused template", "template", t.Name, "failures", n)
		return nil
	}
	a.log().Warn("fleet: template paused by its breaker", "template", t.Name, "failures", n, "reason", reason)
	if a.Notifier != nil {
		if err := a.Notifier.FleetPaused(ctx, t.Name, reason); err != nil {
			return fmt.Errorf("fleet: template %s: notify pause: %w", t.Name, err)
		}
	}
	return nil
}

func (a *Admitter) clock() workitems.Clock {
	if a.Clock == nil {
		return workitems.SystemClock{}
	}
	return a.Clock
}

func (a *Admitter) log() *slog.Logger {
	if a.Logger == nil {
		return slog.Default()
	}
	return a.Logger
}
