package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// Fleets. A fleet template (repos: or repos_from:) makes, at every tick, one item per
// repository, each with a deterministic id (workitems.FleetItemID), so every replica makes
// each once. The repositories come from a RepoSource; one that cannot be read is skipped and
// counted, never fatal to the tick. A template with fleet limits puts its new items in the
// gate's line (package fleet) instead of on the queue: the admitter enqueues them in order as
// its limits let them go.

// ErrBadRepo refuses a request whose repository does not fit its template: a fleet template's
// item names one of its repositories, any other template's names none.
var ErrBadRepo = errors.New("bad repository for the template")

func checkRepo(t *config.Template, repo string) error {
	switch {
	case !t.IsFleet() && repo != "":
		return workitems.Classify(workitems.ClassInvalidInput,
			fmt.Errorf("scheduler: template %q: repo %q: %w (it has one repository: %s)", t.Name, repo, ErrBadRepo, t.Repo))
	case t.IsFleet() && strings.TrimSpace(repo) == "":
		return workitems.Classify(workitems.ClassInvalidInput,
			fmt.Errorf("scheduler: template %q: %w: a fleet template's item names one of its repositories", t.Name, ErrBadRepo))
	case len(t.Repos) > 0 && !containsRepo(t.Repos, repo):
		return workitems.Classify(workitems.ClassInvalidInput,
			fmt.Errorf("scheduler: template %q: repo %q: %w (not one of its repos)", t.Name, repo, ErrBadRepo))
	}
	return nil
}

func containsRepo(repos []string, repo string) bool {
	k := workitems.RepoKey(repo)
	for _, r := range repos {
		if workitems.RepoKey(r) == k {
			return true
		}
	}
	return false
}

// fleetRepoOf is the repository of a fleet template that a forge event's repository (owner/name
// on forge key) is: one of its repos, or, for repos_from, one its listing keeps (the clone URL
// the forge gave: a GitHub repository's is not under its API's base_url, and an archived,
// empty, unreadable or excluded one is no work). false: the event is about a repository
// outside the fleet, or the listing could not be read (logged; the forge's next event tries
// again).
func (q *Queue) fleetRepoOf(ctx context.Context, t *config.Template, forgeKey, slug string) (string, bool) {
	for _, r := range t.Repos {
		if s, err := workitems.RepoSlugFromURL(r); err == nil && strings.EqualFold(s, slug) {
			return r, true
		}
	}
	rf := t.ReposFrom
	if rf == nil || rf.Forge != forgeKey {
		return "", false
	}
	owner, _, err := workitems.ParseRepoSlug(slug)
	if err != nil || !strings.EqualFold(owner, rf.Owner) {
		return "", false
	}
	if q.repos == nil {
		q.log.Warn("fleet: repos_from has no repository source in this process; the event makes no item", "template", t.Name, "repo", slug)
		return "", false
	}
	fr, err := q.repos.FleetRepos(ctx, t)
	if err != nil && len(fr.Repos) == 0 {
		q.log.Warn("fleet: repositories not listed; the event makes no item", "template", t.Name, "repo", slug, "err", err)
		return "", false
	}
	for _, r := range fr.Repos {
		if s, err := workitems.RepoSlugFromURL(r); err == nil && strings.EqualFold(s, slug) {
			return r, true
		}
	}
	return "", false
}

// holdInFleet puts a new fleet item in its template's line when the template has limits
// (true: its task is the admitter's to enqueue), and records it as its repository's newest.
func (q *Queue) holdInFleet(ctx context.Context, t *config.Template, it *workitems.Item) (bool, error) {
	if q.fleet == nil || it.Repo == "" {
		return false, nil
	}
	if !t.Fleet.Limited() {
		return false, q.fleet.Record(ctx, t, it)
	}
	if err := q.fleet.Hold(ctx, t, it); err != nil {
		return false, err
	}
	return true, nil
}

// heldInFleet reports whether a queued item waits in its fleet's line (not lost: unqueued on
// purpose). An error counts as not held: reconcile enqueues it and its task meets the gate. An
// item whose template is gone or no longer limited waits for no admitter: it is not held.
func (q *Queue) heldInFleet(ctx context.Context, it *workitems.Item) bool {
	if q.fleet == nil || it.Repo == "" {
		return false
	}
	if t, ok := q.Config().Template(it.Template); !ok || !t.Fleet.Limited() {
		return false
	}
	held, err := q.fleet.Held(ctx, it.Template, it.ID)
	return err == nil && held
}

// EnqueueHeld enqueues the attempt of an item the fleet's admitter granted.
func (q *Queue) EnqueueHeld(ctx context.Context, id string) error {
	it, err := q.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if it.State != workitems.StateQueued {
		return nil // cancelled or moved on meanwhile: nothing to run
	}
	return q.EnqueueAttempt(ctx, it)
}

// Paused reports whether a template is paused.
func (q *Queue) Paused(ctx context.Context, template string) (bool, error) {
	p, err := q.PauseOf(ctx, template)
	return p != nil, err
}

// PauseFleet is the fleet breaker's pause, recorded with actor outerloop; false when the
// template was paused already.
func (q *Queue) PauseFleet(ctx context.Context, template, reason string) (bool, error) {
	_, err := q.Pause(ctx, template, "outerloop", reason)
	if errors.Is(err, ErrAlreadyPaused) {
		return false, nil
	}
	return err == nil, err
}

// RepoSource lists the repositories of a repos_from template at a tick (package
// fleet/discover, through the template's forge).
type RepoSource interface {
	FleetRepos(ctx context.Context, t *config.Template) (FleetRepos, error)
}

// FleetRepos is a fleet's repositories at one tick: the ones to work on, in order, and how
// many were skipped for each reason (archived, empty, unreadable, excluded).
type FleetRepos struct {
	Repos   []string
	Skipped map[string]int
}

// FleetAdmitter grants the items a limited fleet's tick just put in line (fleet.Admitter).
type FleetAdmitter interface {
	Admit(ctx context.Context, t *config.Template) (int, error)
}

// FleetTick is what one tick of a fleet template did.
type FleetTick struct {
	Repos    int            // repositories worked on
	Created  int            // items made
	Existing int            // items another replica (or an earlier run of this tick) made
	Skipped  map[string]int // repositories skipped, by reason
	Failed   int            // items not made for an error (each logged)
	Granted  int            // items the gate let start at once (limited fleets)
	Items    []string       // the items made, in the order of the repositories
}

// SkippedCount is how many repositories the tick skipped.
func (f *FleetTick) SkippedCount() int {
	n := 0
	for _, c := range f.Skipped {
		n += c
	}
	return n
}

// fleetTick makes the items of a fleet template's tick and grants what its limits let go.
func (s *Scheduler) fleetTick(ctx context.Context, t *config.Template, at time.Time) (*FleetTick, error) {
	ft, err := s.q.SubmitFleet(ctx, t, workitems.Origin{Kind: workitems.OriginCron, Actor: "scheduler", Tick: at.UTC()}, "",
		func(repo string) string { return workitems.FleetItemID(t.Name, at, repo) })
	if ft != nil && ft.Created > 0 && s.fleet != nil {
		n, aerr := s.fleet.Admit(ctx, t)
		ft.Granted = n
		if aerr != nil {
			s.log.Warn("fleet: items not granted at the tick; the workers' admitters grant them", "template", t.Name, "err", aerr)
		}
	}
	return ft, err
}

// SubmitFleet makes one item per repository of a fleet template, with the id idFor gives it.
// Its error is nil when any item was made, ErrExists when every one existed, a limit's when a
// limit refused them, or the first failure; a repository that fails is skipped, never fatal.
func (q *Queue) SubmitFleet(ctx context.Context, t *config.Template, origin workitems.Origin, input string,
	idFor func(repo string) string) (*FleetTick, error) {
	var fr FleetRepos
	switch {
	case len(t.Repos) > 0:
		fr.Repos = t.Repos
	case t.ReposFrom == nil:
		return nil, fmt.Errorf("scheduler: template %q: %w: it has one repository", t.Name, ErrBadRepo)
	case q.repos == nil:
		return nil, fmt.Errorf("scheduler: template %q: repos_from has no repository source in this process", t.Name)
	default:
		var err error
		if fr, err = q.repos.FleetRepos(ctx, t); err != nil && len(fr.Repos) == 0 {
			return nil, fmt.Errorf("scheduler: template %q: repos_from: %w", t.Name, err)
		} else if err != nil {
			q.log.Warn("fleet: repositories listed from an older listing", "template", t.Name, "err", err)
		}
	}
	ft := &FleetTick{Repos: len(fr.Repos), Skipped: fr.Skipped}
	for reason, n := range fr.Skipped {
		q.log.Info("fleet: repositories skipped", "template", t.Name, "reason", reason, "count", n)
	}
	var first, limit error
	for _, repo := range fr.Repos {
		if ctx.Err() != nil {
			return ft, ctx.Err()
		}
		_, err := q.Submit(ctx, Request{Template: t.Name, ID: idFor(repo), Repo: repo, Origin: origin, Input: input})
		switch {
		case err == nil:
			ft.Created++
			ft.Items = append(ft.Items, idFor(repo))
		case errors.Is(err, workitems.ErrExists):
			ft.Existing++
		case errors.Is(err, itemstore.ErrDailyCap), errors.Is(err, itemstore.ErrMaxOpen):
			limit = err // the rest would be refused too
		default:
			ft.Failed++
			q.log.Warn("fleet: item not made; the repository is skipped this time", "template", t.Name, "repo", repo, "err", err)
			if first == nil {
				first = err
			}
		}
		if limit != nil {
			ft.Failed += len(fr.Repos) - ft.Created - ft.Existing - ft.Failed
			break
		}
	}
	switch {
	case ft.Created > 0:
		return ft, nil
	case limit != nil:
		return ft, limit
	case first != nil:
		return ft, first
	case ft.Existing > 0:
		return ft, workitems.ErrExists
	}
	return ft, nil // no repository to work on
}

// runFleetNow is RunNow of a fleet template: RunFleet, answering with its first item.
func (q *Queue) runFleetNow(ctx context.Context, t *config.Template, actor, input string) (*workitems.Item, error) {
	ft, err := q.RunFleet(ctx, t.Name, actor, input)
	if err != nil {
		return nil, err
	}
	if len(ft.Items) == 0 {
		return nil, fmt.Errorf("scheduler: run %q: no repository to work on (%d skipped)", t.Name, ft.SkippedCount())
	}
	return q.store.Get(ctx, ft.Items[0])
}

// RunFleet makes, at once, one item per repository of a fleet template (a manual tick of it:
// templates run, the console's and the API's run now), logged as a control.
func (q *Queue) RunFleet(ctx context.Context, template, actor, input string) (*FleetTick, error) {
	if err := checkControl(actor, ""); err != nil {
		return nil, err
	}
	t, ok := q.Config().Template(template)
	if !ok {
		return nil, fmt.Errorf("scheduler: template %q: %w", template, ErrUnknownTemplate)
	}
	now := q.clock.Now()
	suffix := manualID("", now)[len("@")+len("20060102T150405Z"):] // a run's own: two runs in a second differ
	ft, err := q.SubmitFleet(ctx, t, workitems.Origin{Kind: workitems.OriginManual, Actor: actor}, input,
		func(repo string) string { return workitems.FleetItemID(t.Name, now, repo) + suffix })
	if err != nil {
		return ft, err
	}
	q.logControl(ctx, ControlRecord{Action: ControlRunNow, Template: template, Actor: actor, At: now.UTC()})
	q.log.Info("fleet template run now", "template", template, "actor", actor, "items", ft.Created)
	return ft, nil
}
