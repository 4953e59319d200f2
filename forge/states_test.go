package forge

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gsdk "code.gitea.io/sdk/gitea"

	"outerloop/workitems"
)

func TestCheckRunStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status, conclusion string
		want               workitems.CheckState
	}{
		{"queued", "", workitems.CheckPending}, {"in_progress", "", workitems.CheckPending}, {"waiting", "", workitems.CheckPending},
		{"requested", "", workitems.CheckPending}, {"pending", "", workitems.CheckPending},
		{"completed", "success", workitems.CheckSuccess}, {"completed", "failure", workitems.CheckFailure}, {"completed", "timed_out", workitems.CheckFailure},
		{"completed", "neutral", workitems.CheckNeutral}, {"completed", "skipped", workitems.CheckNeutral}, {"completed", "cancelled", workitems.CheckCancelled},
		{"completed", "action_required", workitems.CheckActionRequired}, {"completed", "stale", workitems.CheckStale},
		{"completed", "startup_failure", workitems.CheckInfraError}, {"completed", "weird", workitems.CheckUnknown}, {"odd", "", workitems.CheckUnknown},
	}
	for _, c := range cases {
		t.Run(c.status+" "+c.conclusion+" is "+string(c.want), func(t *testing.T) {
			t.Parallel()
			if got := CheckRunState(c.status, c.conclusion); got != c.want {
				t.Fatalf("got %s", got)
			}
		})
	}
}

func TestCommitStatusStates(t *testing.T) {
	t.Parallel()
	gh := map[string]workitems.CheckState{"success": workitems.CheckSuccess, "failure": workitems.CheckFailure, "error": workitems.CheckInfraError,
		"pending": workitems.CheckPending, "odd": workitems.CheckUnknown}
	for in, want := range gh {
		if got := GitHubStatusState(in); got != want {
			t.Errorf("github status %s: %s, want %s", in, got, want)
		}
	}
	gt := map[gsdk.StatusState]workitems.CheckState{gsdk.StatusSuccess: workitems.CheckSuccess, gsdk.StatusFailure: workitems.CheckFailure,
		gsdk.StatusWarning: workitems.CheckFailure, gsdk.StatusError: workitems.CheckInfraError, gsdk.StatusPending: workitems.CheckPending,
		"skipped": workitems.CheckNeutral, "odd": workitems.CheckUnknown}
	for in, want := range gt {
		if got := GiteaStatusState(string(in)); got != want {
			t.Errorf("gitea status %s: %s, want %s", in, got, want)
		}
	}
}

func TestStatusClasses(t *testing.T) {
	t.Parallel()
	cases := map[int]workitems.ErrorClass{400: workitems.ClassInvalidInput, 401: workitems.ClassPermission,
		403: workitems.ClassPermission, 404: workitems.ClassNotFound, 405: workitems.ClassConflict, 409: workitems.ClassConflict,
		408: workitems.ClassTransient, 422: workitems.ClassInvalidInput, 429: workitems.ClassTransient,
		500: workitems.ClassTransient, 502: workitems.ClassTransient, 503: workitems.ClassTransient, 302: workitems.ClassUnknown}
	for code, want := range cases {
		if got := classForStatus(code); got != want {
			t.Errorf("HTTP %d: %s, want %s", code, got, want)
		}
	}
}

func TestErrorIsAClassErrorAndReadsWell(t *testing.T) {
	t.Parallel()
	reset := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	e := &Error{Forge: "github", Op: "merge pull request", Repo: "acme/pay", Class: workitems.ClassTransient,
		StatusCode: 403, RetryAt: reset, Message: "API rate limit exceeded", Err: ErrRateLimited}
	var wrapped error = fmt.Errorf("delivery: %w", e)
	if workitems.ClassOf(wrapped) != workitems.ClassTransient || !errors.Is(wrapped, ErrRateLimited) {
		t.Fatalf("class %s", workitems.ClassOf(wrapped))
	}
	var fe *Error
	if !errors.As(wrapped, &fe) || fe.RetryAt != reset {
		t.Fatal("errors.As")
	}
	want := "forge github: merge pull request acme/pay: transient (HTTP 403): rate limited: API rate limit exceeded (resets at 2026-12-01T03:00:00Z)"
	if e.Error() != want {
		t.Fatalf("text\n got %s\nwant %s", e, want)
	}
}

func TestBackoffDoubles(t *testing.T) {
	t.Parallel()
	got := []time.Duration{backoff(time.Second, 1), backoff(time.Second, 2), backoff(time.Second, 3)}
	if !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Fatal(got)
	}
}
