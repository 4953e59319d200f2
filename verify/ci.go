package verify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// CIState is a CI check's state, normalised across providers: workitems.CheckState,
// the vocabulary package forge reads checks into, so evidence from a forge and from the webhook reads the same.
type CIState = workitems.CheckState

// The CI states.
const (
	CIPending        = workitems.CheckPending
	CISuccess        = workitems.CheckSuccess
	CIFailure        = workitems.CheckFailure
	CIInfraError     = workitems.CheckInfraError
	CICancelled      = workitems.CheckCancelled
	CINeutral        = workitems.CheckNeutral
	CIActionRequired = workitems.CheckActionRequired
	CIStale          = workitems.CheckStale
	CIUnknown        = workitems.CheckUnknown
)

// CICheck is one check's latest result for a commit.
type CICheck struct {
	Name    string  `json:"name"`
	State   CIState `json:"state"`
	SHA     string  `json:"sha"`
	URL     string  `json:"url,omitempty"`
	Details string  `json:"details,omitempty"`
}

// CIEvidence is the required checks' results for one SHA.
type CIEvidence struct {
	SHA      string    `json:"sha"`
	Required []string  `json:"required"`
	Checks   []CICheck `json:"checks"`
	Missing  []string  `json:"missing,omitempty"` // required checks without a final result after the wait
}

func (c *CIEvidence) withState(s CIState) []string {
	var out []string
	for _, ch := range c.Checks {
		if ch.State == s {
			out = append(out, ch.Name)
		}
	}
	return out
}

func (c *CIEvidence) failed() []string {
	var out []string
	for _, ch := range c.Checks {
		if ch.State == CIFailure || ch.State == CICancelled || ch.State == CIInfraError {
			out = append(out, ch.Name)
		}
	}
	return out
}

// Green reports whether every required check succeeded (neutral counts as success).
func (c *CIEvidence) Green() bool {
	if len(c.Missing) > 0 {
		return false
	}
	got := map[string]CIState{}
	for _, ch := range c.Checks {
		got[ch.Name] = ch.State
	}
	for _, r := range c.Required {
		if s := got[r]; s != CISuccess && s != CINeutral {
			return false
		}
	}
	return true
}

// CISource reads CI results for a commit. Implementations return every check they know for the
// SHA (latest run per name); the verifier keeps the required ones.
type CISource interface {
	Checks(ctx context.Context, repo, sha string) ([]CICheck, error)
}

// CIRerunner is a CISource that can re-run checks that failed for infrastructure reasons.
type CIRerunner interface {
	Rerun(ctx context.Context, repo, sha string, names []string) error
}

// collectCI waits (until cfg.Wait has passed) for every required check to have a final state
// for the workspace's HEAD commit.
func (v *Verifier) collectCI(ctx context.Context, cfg *config.CICheck, w worktree) (*CIEvidence, error) {
	ev := &CIEvidence{Required: cfg.Required}
	sha, err := w.head()
	if err != nil {
		ev.Missing = slices.Clone(cfg.Required)
		ev.Checks = nil
		v.logger.WarnContext(ctx, "verify: no commit SHA for CI evidence", slog.String("error", err.Error()))
		return ev, nil
	}
	return v.collectCISHA(ctx, cfg, sha)
}

// collectCISHA waits (until cfg.Wait has passed) for every required check to have a final state
// for sha.
func (v *Verifier) collectCISHA(ctx context.Context, cfg *config.CICheck, sha string) (*CIEvidence, error) {
	ev := &CIEvidence{Required: cfg.Required, SHA: sha}
	src := v.ci[ciSource(cfg)]
	if src == nil {
		v.logger.WarnContext(ctx, "verify: no CI source", slog.String("source", ciSource(cfg)))
		ev.Missing = slices.Clone(cfg.Required)
		return ev, nil
	}
	deadline := v.now().Add(cfg.Wait.D())
	for {
		checks, err := src.Checks(ctx, cfg.Repo, sha)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("verify: CI checks: %w", ctx.Err())
			}
			v.logger.WarnContext(ctx, "verify: reading CI checks", slog.String("repo", cfg.Repo), slog.String("error", err.Error()))
		}
		ev.Checks, ev.Missing = pickRequired(checks, cfg.Required, sha)
		if len(ev.Missing) == 0 || !v.now().Before(deadline) {
			return ev, nil
		}
		if err := v.sleep(ctx, v.pollEvery); err != nil {
			return nil, fmt.Errorf("verify: waiting for CI: %w", err)
		}
	}
}

// pickRequired keeps, per required name, the check for sha; names with no final state are missing.
func pickRequired(checks []CICheck, required []string, sha string) (got []CICheck, missing []string) {
	byName := map[string]CICheck{}
	for _, c := range checks {
		if c.SHA != "" && c.SHA != sha {
			continue // evidence for another commit proves nothing about this one
		}
		byName[c.Name] = c
	}
	for _, r := range required {
		c, ok := byName[r]
		if !ok || !c.State.Final() {
			missing = append(missing, r)
			if ok {
				got = append(got, c)
			}
			continue
		}
		got = append(got, c)
	}
	return got, missing
}

func (v *Verifier) rerunCI(ctx context.Context, cfg *config.CICheck, f *Facts) error {
	if cfg == nil || f.CI == nil {
		return nil
	}
	rr, ok := v.ci[ciSource(cfg)].(CIRerunner)
	if !ok {
		return nil
	}
	var names []string
	for _, c := range f.CI.Checks {
		if c.State == CIInfraError || c.State == CICancelled {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := rr.Rerun(ctx, cfg.Repo, f.CI.SHA, names); err != nil {
		v.logger.WarnContext(ctx, "verify: re-running CI checks", slog.String("error", err.Error()))
	}
	return nil
}

// ciSource names where a template's CI evidence comes from: its forge (ci.forge, which config
// sets for provider: github too), else its provider (webhook).
func ciSource(cfg *config.CICheck) string {
	if cfg.Forge != "" {
		return cfg.Forge
	}
	return string(cfg.Provider)
}

// ReadCI reads the required checks of cfg on sha once, without waiting: what the checks say now,
// with those that have no final state yet listed as missing. An error is the CI source's (the
// caller tries again later); a deployment without the source reads every check as missing.
func (v *Verifier) ReadCI(ctx context.Context, cfg *config.CICheck, sha string) (*CIEvidence, error) {
	ev := &CIEvidence{Required: cfg.Required, SHA: sha}
	src := v.ci[ciSource(cfg)]
	if src == nil {
		ev.Missing = slices.Clone(cfg.Required)
		return ev, nil
	}
	checks, err := src.Checks(ctx, cfg.Repo, sha)
	if err != nil {
		return nil, fmt.Errorf("verify: CI checks of %s on %s: %w", cfg.Repo, shorten.SHA(sha), err)
	}
	ev.Checks, ev.Missing = pickRequired(checks, cfg.Required, sha)
	return ev, nil
}

// RerunInfraFailures asks the CI source to re-run the checks of ev that failed for
// infrastructure reasons (infra_error, cancelled) and reports whether it asked for any.
func (v *Verifier) RerunInfraFailures(ctx context.Context, cfg *config.CICheck, ev *CIEvidence) bool {
	f := &Facts{CI: ev}
	if _, ok := v.ci[ciSource(cfg)].(CIRerunner); !ok || infraProblem(f) == "" {
		return false
	}
	return v.rerunCI(ctx, cfg, f) == nil
}

// InfraProblem says which required checks failed for infrastructure reasons ("": none).
func InfraProblem(ev *CIEvidence) string { return infraProblem(&Facts{CI: ev}) }

// Now is the verifier's clock.
func (v *Verifier) Now() time.Time { return v.now() }
