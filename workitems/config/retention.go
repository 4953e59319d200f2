package config

import (
	"errors"
	"time"

	"outerloop/workitems"
)

// Retention says how long what an item leaves behind is kept once the item ended (the
// top-level `retention:` section): its workspaces on the workers, and the item itself with
// its events, checkpoints and patches in Redis (the janitor deletes it).
type Retention struct {
	// Workspaces is how long the workspaces of escalated and failed items stay on the workers
	// (for a person to look at). Those of closed and cancelled items go at once. Default 72h.
	Workspaces workitems.Duration `yaml:"workspaces"`
	// Closed is how long closed and cancelled items stay in the store. Default 720h (30 days).
	Closed workitems.Duration `yaml:"closed"`
	// Failed is how long failed items stay in the store. Default 2160h (90 days).
	Failed workitems.Duration `yaml:"failed"`
	// Escalated, when set, deletes items left escalated this long; by default (0) an escalated
	// item is kept until a person resolves it.
	Escalated workitems.Duration `yaml:"escalated"`
	// Experiments is how long an ended eval experiment stays: its record, its runs' results and
	// its runs' items in the eval namespace. Default 2160h (90 days).
	Experiments workitems.Duration `yaml:"experiments"`
}

// Retention defaults (when the config gives none).
const (
	DefaultWorkspaceRetention  = 72 * time.Hour
	DefaultClosedRetention     = 30 * 24 * time.Hour
	DefaultFailedRetention     = 90 * 24 * time.Hour
	DefaultExperimentRetention = 90 * 24 * time.Hour
)

// WithDefaults fills what the config left out.
func (r Retention) WithDefaults() Retention {
	if r.Workspaces == 0 {
		r.Workspaces = workitems.Duration(DefaultWorkspaceRetention)
	}
	if r.Closed == 0 {
		r.Closed = workitems.Duration(DefaultClosedRetention)
	}
	if r.Failed == 0 {
		r.Failed = workitems.Duration(DefaultFailedRetention)
	}
	if r.Experiments == 0 {
		r.Experiments = workitems.Duration(DefaultExperimentRetention)
	}
	return r
}

// ItemKeep returns how long an item that ended in state s is kept in the store, and false for
// a state whose items are never deleted by retention (open states, and escalated without
// Retention.Escalated).
func (r Retention) ItemKeep(s workitems.State) (time.Duration, bool) {
	r = r.WithDefaults()
	switch s {
	case workitems.StateClosed, workitems.StateCancelled:
		return r.Closed.D(), true
	case workitems.StateFailed:
		return r.Failed.D(), true
	case workitems.StateEscalated:
		return r.Escalated.D(), r.Escalated > 0
	}
	return 0, false
}

func (r Retention) validate() error {
	for _, f := range []struct {
		name string
		d    workitems.Duration
	}{{"workspaces", r.Workspaces}, {"closed", r.Closed}, {"failed", r.Failed}, {"escalated", r.Escalated}, {"experiments", r.Experiments}} {
		if f.d < 0 {
			return &ConfigError{Field: "retention." + f.name, Err: errors.New("must not be negative")}
		}
	}
	return nil
}
