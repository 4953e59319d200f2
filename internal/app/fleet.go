package app

import (
	"context"
	"errors"
	"fmt"

	"outerloop/fleet"
	"outerloop/fleet/discover"
	"outerloop/forge"
	"outerloop/metrics"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Admitter returns the fleet admitter over this app's gate, queue, forges and outbox (a
// worker server runs its loop; the scheduler grants a tick's items with it at once).
func (a *App) Admitter() *fleet.Admitter {
	return &fleet.Admitter{Gate: a.Fleet, Items: a.Store, Config: a.CurrentConfig, Enqueuer: a.Queue, Pauser: a.Queue,
		PRs: forgePRs{a.Forges}, Notifier: a.Outbox, Clock: a.opts.Clock, Logger: a.Logger.With("component", "fleet"),
		Every: a.opts.FleetEvery, PRCheckEvery: a.opts.FleetPRCheckEvery}
}

// fleetUsage reads every fleet template's gate for the metrics (at scrape time).
func (a *App) fleetUsage(ctx context.Context) (map[string]metrics.FleetUsage, error) {
	cfg := a.CurrentConfig()
	out := map[string]metrics.FleetUsage{}
	for i := range cfg.Templates {
		t := &cfg.Templates[i]
		if !t.IsFleet() {
			continue
		}
		u, err := a.Fleet.Usage(ctx, t.Name)
		if err != nil {
			return nil, err
		}
		out[t.Name] = metrics.FleetUsage{Held: u.Held, Running: u.Running, OpenPRs: u.OpenPRs, OpenedLastHour: u.OpenedLastHour, Streak: u.Streak}
	}
	return out, nil
}

// forgePRs reads a pull request's state through the deployment's forges.
type forgePRs struct{ set forge.Set }

func (f forgePRs) PROpen(ctx context.Context, forgeKey, repo string, number int) (bool, error) {
	fg, ok := f.set[forgeKey]
	if !ok {
		return false, fmt.Errorf("app: forge %q is not configured", forgeKey)
	}
	pr, err := fg.PullRequest(ctx, repo, number)
	if errors.Is(err, forge.ErrNotFound) {
		return false, nil // the repository or the pull request is gone: it holds no place
	}
	if err != nil {
		return false, err
	}
	return pr.State == workitems.PROpen, nil
}

// fleetRepos lists a repos_from template's repositories through its forge, cached in Redis
// (package fleet/discover), for the scheduler's ticks.
type fleetRepos struct {
	d *discover.Discoverer
	a *App // its forges: made after the queue
}

func (f fleetRepos) FleetRepos(ctx context.Context, t *config.Template) (scheduler.FleetRepos, error) {
	rf := t.ReposFrom
	fg, err := f.a.Forges.Get(rf.Forge)
	if err != nil {
		return scheduler.FleetRepos{}, err
	}
	l, ok := fg.(forge.RepoLister)
	if !ok {
		return scheduler.FleetRepos{}, fmt.Errorf("app: forge %q cannot list repositories", rf.Forge)
	}
	res, err := f.d.Discover(ctx, *rf, l)
	if res == nil {
		return scheduler.FleetRepos{}, err
	}
	out := scheduler.FleetRepos{Skipped: map[string]int{}}
	for _, r := range res.Repos {
		out.Repos = append(out.Repos, r.CloneURL)
	}
	for reason, n := range res.Skipped {
		out.Skipped[string(reason)] = n
	}
	return out, err // with a stale listing: its repositories and why it is stale
}
