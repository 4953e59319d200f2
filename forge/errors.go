package forge

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"outerloop/workitems"
)

// Sentinel errors, found with errors.Is in an *Error.
var (
	// ErrMissingToken means the forge's token variable is unset or empty (invalid_input: a
	// configuration error; nothing retries it).
	ErrMissingToken = errors.New("token variable not set")
	// ErrUnsupported means the forge's kind does not implement the operation (see Unsupported).
	ErrUnsupported = errors.New("not supported by this forge kind")
	// ErrUnknownForge means no forge has that key.
	ErrUnknownForge = errors.New("not a key of forges")
	// ErrAuth means the forge refused the credentials (401/403).
	ErrAuth = errors.New("forge refused the credentials")
	// ErrNotFound means the repository, branch or pull request does not exist (404).
	ErrNotFound = errors.New("not found on the forge")
	// ErrRateLimited means a rate limit (primary or secondary) would not reset within
	// Config.MaxRateWait; Error.RetryAt says when it does.
	ErrRateLimited = errors.New("rate limited")
	// ErrPullRequestExists means a pull request for the same head and base is open already.
	ErrPullRequestExists = errors.New("pull request exists")
	// ErrNotMergeable means the forge refused the merge: conflicts, required checks or reviews,
	// a draft, a merge method the repository does not allow.
	ErrNotMergeable = errors.New("pull request not mergeable")
	// ErrHeadMoved means the pull request's head is not the expected SHA any more.
	ErrHeadMoved = errors.New("pull request head moved")
	// ErrNotOpen means the pull request is past what was asked: closing a merged one, marking
	// a closed draft ready (invalid_input: there is nothing to retry).
	ErrNotOpen = errors.New("pull request is not open")
	// ErrStaleLease means git push --force-with-lease found the branch somewhere other than
	// expected (someone else pushed to it).
	ErrStaleLease = errors.New("branch moved since it was read (lease lost)")
	// ErrProtectedBranch means the remote refused the update: a protected branch or another
	// server-side hook.
	ErrProtectedBranch = errors.New("remote refused the push (protected branch or hook)")
)

// Error is a failed forge operation. Its text names the forge, the operation and the
// repository, never a token.
type Error struct {
	Forge      string // the key in forges:
	Op         string // "create pull request", "push", …
	Repo       string // owner/name, when there is one
	Class      workitems.ErrorClass
	StatusCode int       // HTTP status; 0 when none
	RetryAt    time.Time // with rate limits: when the limit resets; zero when unknown
	Message    string    // the server's message (or git's), clipped
	Err        error     // a sentinel above, or the underlying error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "forge %s: %s", e.Forge, e.Op)
	if e.Repo != "" {
		fmt.Fprintf(&b, " %s", e.Repo)
	}
	fmt.Fprintf(&b, ": %s", e.Class)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.StatusCode)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Message != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), e.Message)) {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if !e.RetryAt.IsZero() {
		fmt.Fprintf(&b, " (resets at %s)", e.RetryAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// As lets errors.As (and so workitems.ClassOf) see an *Error as a *workitems.ClassError of the
// same class.
func (e *Error) As(target any) bool {
	if ce, ok := target.(**workitems.ClassError); ok {
		*ce = &workitems.ClassError{Class: e.Class, Err: e}
		return true
	}
	return false
}

// notOpen is the ErrNotOpen of an operation on pull request pr, which is closed or merged.
func notOpen(forge, op, repo string, pr *PullRequest) error {
	return &Error{Forge: forge, Op: op, Repo: repo, Class: workitems.ClassInvalidInput, Err: ErrNotOpen,
		Message: fmt.Sprintf("pull request #%d is %s", pr.Number, pr.State)}
}

// classForStatus is the recovery class of an HTTP status.
func classForStatus(code int) workitems.ErrorClass {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return workitems.ClassPermission
	case code == http.StatusNotFound:
		return workitems.ClassNotFound
	case code == http.StatusMethodNotAllowed || code == http.StatusConflict:
		return workitems.ClassConflict
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		return workitems.ClassTransient
	case code >= 400:
		return workitems.ClassInvalidInput
	}
	return workitems.ClassUnknown
}

// sentinelForStatus is the sentinel an HTTP status means by itself, or nil.
func sentinelForStatus(code int) error {
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrAuth
	case http.StatusNotFound:
		return ErrNotFound
	}
	return nil
}

// transportError classifies an error that came with no HTTP response once the caller's own
// cancellation is ruled out: failing to reach the server or to read its answer (the HTTP
// client's *url.Error, its timeout included) is transient.
func transportError(error) workitems.ErrorClass { return workitems.ClassTransient }

// CheckSummary is a check's one-line summary: at most 200 characters (Check.Summary).
func CheckSummary(s string) string { return clip(s, 200) }

// clip bounds a server message kept in an error or a check summary, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
