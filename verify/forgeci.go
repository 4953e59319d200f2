package verify

import (
	"context"
	"fmt"

	"outerloop/forge"
	"outerloop/lib/shorten"
)

// ErrRateLimited means a forge's rate limit would not reset within its MaxRateWait (the error
// is transient and carries the reset time: see forge.Error).
var ErrRateLimited = forge.ErrRateLimited

// ForgeCI reads CI evidence from a forge: GitHub check runs and commit statuses, Gitea commit
// statuses (Gitea Actions included), each the latest per name for the SHA. It re-runs GitHub
// check runs that failed for infrastructure reasons (CIRerunner).
type ForgeCI struct{ F CIForge }

// CIForge is what CI evidence needs of a forge: a commit's checks, and re-running them. Every
// forge of a forge.Set is one; a new forge kind read for CI implements these two methods.
type CIForge interface {
	// Checks returns the latest result per check name for sha.
	Checks(ctx context.Context, repo, sha string) ([]forge.Check, error)
	// RerunChecks re-requests the named checks of sha and returns those it could.
	RerunChecks(ctx context.Context, repo, sha string, names []string) ([]string, error)
}

// NewForgeCI wraps f.
func NewForgeCI(f CIForge) *ForgeCI { return &ForgeCI{F: f} }

// Checks returns every check the forge knows for sha.
func (s *ForgeCI) Checks(ctx context.Context, repo, sha string) ([]CICheck, error) {
	cs, err := s.F.Checks(ctx, repo, sha)
	if err != nil {
		return nil, fmt.Errorf("verify: CI checks of %s@%s: %w", repo, shorten.SHA(sha), err)
	}
	out := make([]CICheck, len(cs))
	for i, c := range cs {
		out[i] = CICheck{Name: c.Name, State: c.State, SHA: c.SHA, URL: c.URL, Details: c.Summary}
	}
	return out, nil
}

// Rerun asks the forge to re-run the named checks of sha; names it cannot re-request (commit
// statuses) are skipped.
func (s *ForgeCI) Rerun(ctx context.Context, repo, sha string, names []string) error {
	if _, err := s.F.RerunChecks(ctx, repo, sha, names); err != nil {
		return fmt.Errorf("verify: re-run CI checks of %s@%s: %w", repo, shorten.SHA(sha), err)
	}
	return nil
}
