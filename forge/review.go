package forge

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"outerloop/workitems"
)

// What Reviews keeps of a pull request, so that a huge one cannot exhaust memory. Listings are
// read a page at a time and only what is kept stays in memory.
const (
	// MaxReviews is how many reviews Reviews returns: the newest ones (in submission order);
	// older ones are dropped.
	MaxReviews = 100
	// MaxReviewComments is how many inline comments Reviews keeps in all, the newest reviews'
	// first; a review whose comments did not fit has fewer (or none).
	MaxReviewComments = 200
	// MaxReviewBody is how many bytes of a review's or a comment's body are kept; a longer
	// body is cut there (at a character boundary) and ends with the clipped marker, which
	// says how many bytes were dropped.
	MaxReviewBody = 4 << 10
)

// clippedMarker ends a body cut at MaxReviewBody; %d is the number of bytes dropped.
const clippedMarker = "\n\n[outerloop: clipped, %d more bytes]"

// ReviewState is a submitted review's verdict, normalised across forges.
type ReviewState string

// The review states. Pending reviews (drafts only their author sees) and review requests are
// not reviews: Reviews leaves them out.
const (
	ReviewApproved         ReviewState = "approved"
	ReviewChangesRequested ReviewState = "changes_requested"
	ReviewCommented        ReviewState = "commented"
	// ReviewDismissed is a review a maintainer dismissed: it no longer counts either way.
	ReviewDismissed ReviewState = "dismissed"
)

// AllReviewStates lists every review state.
func AllReviewStates() []ReviewState {
	return []ReviewState{ReviewApproved, ReviewChangesRequested, ReviewCommented, ReviewDismissed}
}

// Review is one submitted review of a pull request. A review is about CommitSHA: when that is
// not the pull request's HeadSHA, the head moved after it (GitHub's and Gitea's "stale").
type Review struct {
	ID          int64       `json:"id"`
	User        string      `json:"user"` // login
	State       ReviewState `json:"state"`
	Body        string      `json:"body,omitempty"` // at most MaxReviewBody bytes and the marker
	CommitSHA   string      `json:"commit_sha,omitempty"`
	SubmittedAt time.Time   `json:"submitted_at,omitzero"`
	URL         string      `json:"url,omitempty"`
	// Comments are the review's inline comments, oldest first (see MaxReviewComments).
	Comments []ReviewComment `json:"comments,omitempty"`
}

// ReviewComment is an inline comment of a review: on Line of Path (the new side of the diff, or
// the old side when the comment is on a removed line; 0 when on the whole file).
type ReviewComment struct {
	ID   int64  `json:"id"`
	User string `json:"user"`
	Path string `json:"path"`
	Line int    `json:"line,omitempty"`
	Body string `json:"body"` // at most MaxReviewBody bytes and the marker
	URL  string `json:"url,omitempty"`
}

// Permission is what a user may do in a repository, normalised across forges.
type Permission string

// The permissions, weakest first.
const (
	PermNone  Permission = "none"
	PermRead  Permission = "read"
	PermWrite Permission = "write"
	PermAdmin Permission = "admin" // the repository's owner too
)

// AllPermissions lists every permission, weakest first.
func AllPermissions() []Permission {
	return []Permission{PermNone, PermRead, PermWrite, PermAdmin}
}

// CanWrite reports whether the user may push to the repository (write or admin).
func (p Permission) CanWrite() bool { return p == PermWrite || p == PermAdmin }

// gitHubReviewState maps a GitHub review's state; ok is false for one that is not a submitted
// review (PENDING). A state GitHub adds later reads as a comment: it neither approves nor
// blocks.
func gitHubReviewState(s string) (state ReviewState, ok bool) {
	switch strings.ToUpper(s) {
	case "APPROVED":
		return ReviewApproved, true
	case "CHANGES_REQUESTED":
		return ReviewChangesRequested, true
	case "DISMISSED":
		return ReviewDismissed, true
	case "PENDING", "":
		return "", false
	}
	return ReviewCommented, true
}

// giteaReviewState maps a Gitea review's state and dismissed flag; ok is false for what is not
// a submitted review (PENDING, a review request). As with GitHub, an unknown state reads as a
// comment.
func giteaReviewState(s string, dismissed bool) (state ReviewState, ok bool) {
	switch strings.ToUpper(s) {
	case "PENDING", "REQUEST_REVIEW", "":
		return "", false
	}
	if dismissed {
		return ReviewDismissed, true
	}
	switch strings.ToUpper(s) {
	case "APPROVED":
		return ReviewApproved, true
	case "REQUEST_CHANGES":
		return ReviewChangesRequested, true
	}
	return ReviewCommented, true
}

// forgePermission maps a permission string of either forge. Gitea says "owner" for the
// repository's owner; GitHub's finer roles (role_name) fold into its permission field, but a
// "maintain" or "triage" there is read as the permission it includes. Anything else is none.
func forgePermission(s string) Permission {
	switch strings.ToLower(s) {
	case "admin", "owner":
		return PermAdmin
	case "write", "maintain", "push":
		return PermWrite
	case "read", "triage", "pull":
		return PermRead
	}
	return PermNone
}

// clipBody bounds a review or comment body to MaxReviewBody bytes, cut at a character
// boundary, followed by the clipped marker.
func clipBody(s string) string {
	if len(s) <= MaxReviewBody {
		return s
	}
	n := MaxReviewBody
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf(clippedMarker, len(s)-n)
}

// reviewWindow keeps the newest MaxReviews reviews of a listing read oldest first, each review
// once (a review submitted while the listing is read can shift it by one).
type reviewWindow struct {
	seen map[int64]bool
	list []Review
}

func (w *reviewWindow) add(r Review) {
	if w.seen == nil {
		w.seen = map[int64]bool{}
	}
	if w.seen[r.ID] {
		return
	}
	w.seen[r.ID] = true
	w.list = append(w.list, r)
	if len(w.list) > 2*MaxReviews {
		w.trim()
	}
}

// trim sorts by submission (then id) and drops all but the newest MaxReviews.
func (w *reviewWindow) trim() {
	slices.SortStableFunc(w.list, func(a, b Review) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID))
	})
	if len(w.list) > MaxReviews {
		w.list = slices.Clone(w.list[len(w.list)-MaxReviews:])
	}
}

// reviews is the kept reviews, oldest first.
func (w *reviewWindow) reviews() []Review {
	w.trim()
	return w.list
}

// sortComments orders a review's comments oldest first (ids grow with time on both forges).
func sortComments(cs []ReviewComment) {
	slices.SortFunc(cs, func(a, b ReviewComment) int { return cmp.Compare(a.ID, b.ID) })
}

// selfCache remembers the login of the token's account, keyed by a hash of the token, so a
// rotated token is asked about again.
type selfCache struct {
	mu    sync.Mutex
	key   [sha256.Size]byte
	login string
}

// get returns the cached login for the current token, or fetches and caches it. The token is
// read before and after the fetch; the answer is cached only if it did not change meanwhile
// (the request may have carried either).
func (c *selfCache) get(cfg Config, fetch func() (string, error)) (string, error) {
	tok := cfg.Getenv(cfg.TokenEnv)
	if tok == "" {
		return "", &Error{Forge: cfg.Name, Op: "get own user", Class: workitems.ClassInvalidInput, Err: missingToken(cfg.TokenEnv)}
	}
	key := sha256.Sum256([]byte(tok))
	c.mu.Lock()
	if c.login != "" && c.key == key {
		login := c.login
		c.mu.Unlock()
		return login, nil
	}
	c.mu.Unlock()
	login, err := fetch()
	if err != nil {
		return "", err
	}
	if login == "" {
		return "", &Error{Forge: cfg.Name, Op: "get own user", Class: workitems.ClassInvariantViolation,
			Err: errors.New("the forge answered no login")}
	}
	if sha256.Sum256([]byte(cfg.Getenv(cfg.TokenEnv))) == key {
		c.mu.Lock()
		c.key, c.login = key, login
		c.mu.Unlock()
	}
	return login, nil
}

// tooManyReviews is the error of a review listing longer than a client reads: its newest
// reviews are out of reach, and a partial answer could hide the verdict that counts.
func tooManyReviews(forge, op, repo string) error {
	return &Error{Forge: forge, Op: op, Repo: repo, Class: workitems.ClassInvalidInput,
		Err: errors.New("too many reviews to read the newest ones")}
}

// checkLogin refuses a user name that cannot be a login (it goes into a URL path).
func checkLogin(forge, op, repo, user string) error {
	ok := user != "" && strings.Trim(user, ".") != ""
	for _, r := range user {
		if !(r == '-' || r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			ok = false
		}
	}
	if ok {
		return nil
	}
	return &Error{Forge: forge, Op: op, Repo: repo, Class: workitems.ClassInvalidInput,
		Err: fmt.Errorf("%q is not a user name", clip(user, 60))}
}
