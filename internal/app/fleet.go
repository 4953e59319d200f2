package app

import (
	"context"
	"fmt"

	"outerloop/fleet"
	"outerloop/forge"
)

// Admitter returns the fleet admitter over this app's gate, queue, forges and outbox (a
// worker server runs its loop; the scheduler grants a tick's items with it at once).
func (a *App) Admitter() *fleet.Admitter {
	return &fleet.Admitter{Gate: a.Fleet, Config: a.CurrentConfig, Enqueuer: a.Queue, Pauser: a.Queue,
		PRs: forgePRs{a.Forges}, Notifier: a.Outbox, Clock: a.opts.Clock, Logger: a.Logger.With("component", "fleet"),
		Every: a.opts.FleetEvery, PRCheckEvery: a.opts.FleetPRCheckEvery}
}

// forgePRs reads a pull request's state through the deployment's forges.
type forgePRs struct{ set forge.Set }

func (f forgePRs) PROpen(ctx context.Context, forgeKey, repo string, number int) (bool, error) {
	fg, ok := f.set[forgeKey]
	if !ok {
		return false, fmt.Errorf("app: forge %q is not configured", forgeKey)
	}
	pr, err := fg.PullRequest(ctx, repo, number)
	if err != nil {
		return false, err
	}
	return pr.State == forge.PROpen, nil
}
