package hooks

import (
	"strings"

	"outerloop/forge"
)

// The check-state mappings below are the ones forge applies to what it reads from the APIs
// (forge/github.go checkRunState and statusState, forge/gitea.go giteaState): a check seen in a
// webhook has the same state as when forge.Checks reads it.

// checkRunState normalises a GitHub check run's (or a Gitea Actions job's) status and conclusion.
func checkRunState(status, conclusion string) forge.CheckState {
	if status != "completed" {
		switch status {
		case "queued", "in_progress", "waiting", "requested", "pending":
			return forge.CheckPending
		}
		return forge.CheckUnknown
	}
	switch conclusion {
	case "success":
		return forge.CheckSuccess
	case "failure", "timed_out":
		return forge.CheckFailure
	case "neutral", "skipped":
		return forge.CheckNeutral
	case "cancelled":
		return forge.CheckCancelled
	case "action_required":
		return forge.CheckActionRequired
	case "stale":
		return forge.CheckStale
	case "startup_failure":
		return forge.CheckInfraError
	}
	return forge.CheckUnknown
}

// githubStatusState normalises a GitHub commit status ("error" is the CI system's own failure).
func githubStatusState(s string) forge.CheckState {
	switch s {
	case "success":
		return forge.CheckSuccess
	case "failure":
		return forge.CheckFailure
	case "error":
		return forge.CheckInfraError
	case "pending":
		return forge.CheckPending
	}
	return forge.CheckUnknown
}

// giteaStatusState normalises a Gitea commit status: "warning" is a failure, as in Gitea's own
// combined status; "skipped" passes.
func giteaStatusState(s string) forge.CheckState {
	switch s {
	case "success":
		return forge.CheckSuccess
	case "failure", "warning":
		return forge.CheckFailure
	case "error":
		return forge.CheckInfraError
	case "pending":
		return forge.CheckPending
	case "skipped":
		return forge.CheckNeutral
	}
	return forge.CheckUnknown
}

// summaryMax is the longest Check.Summary, in runes (as forge's).
const summaryMax = 200

// summary makes a one-line summary of at most summaryMax runes, as forge does.
func summary(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > summaryMax {
		return string(r[:summaryMax-1]) + "…"
	}
	return s
}
