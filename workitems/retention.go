package workitems

import (
	"errors"
	"time"
)

// Retention says how long what an item leaves behind is kept once the item ended (the
// top-level `retention:` section). Each key is one kind of leftover; more join as they get a
// retention of their own.
type Retention struct {
	// Workspaces is how long the workspaces of escalated and failed items stay on the workers
	// (for a person to look at). Those of closed and cancelled items go at once. Default 72h.
	Workspaces Duration `yaml:"workspaces"`
}

// DefaultWorkspaceRetention is Retention.Workspaces when the config gives none.
const DefaultWorkspaceRetention = 72 * time.Hour

// WithDefaults fills what the config left out.
func (r Retention) WithDefaults() Retention {
	if r.Workspaces == 0 {
		r.Workspaces = Duration(DefaultWorkspaceRetention)
	}
	return r
}

func (r Retention) validate() error {
	if r.Workspaces < 0 {
		return &ConfigError{Field: "retention.workspaces", Err: errors.New("must not be negative")}
	}
	return nil
}
