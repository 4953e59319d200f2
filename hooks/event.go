package hooks

import (
	"time"

	"outerloop/workitems"
)

// Kind is what an Event reports.
type Kind string

// The event kinds.
const (
	// KindCheck: a commit status or a check run reached a state (Event.Check; Event.SHA).
	KindCheck Kind = "check"
	// KindReview: a pull request review was submitted or dismissed (Event.Review).
	KindReview Kind = "review"
	// KindReviewComment: a comment on a line of a pull request's diff (Event.ReviewComment).
	KindReviewComment Kind = "review_comment"
	// KindPullRequest: a pull request was opened, closed, merged, reopened or got new commits
	// (Event.PullRequest).
	KindPullRequest Kind = "pull_request"
	// KindComment: a comment on an issue or a pull request's conversation (Event.Comment).
	KindComment Kind = "comment"
	// KindLabeled: labels were added to an issue or a pull request (Event.Labeled).
	KindLabeled Kind = "labeled"
)

// AllKinds lists every event kind.
func AllKinds() []Kind {
	return []Kind{KindCheck, KindReview, KindReviewComment, KindPullRequest, KindComment, KindLabeled}
}

// Event is one forge webhook delivery, normalised. Exactly the field named by Kind is set among
// Check, Review, ReviewComment, PullRequest, Comment and Labeled.
type Event struct {
	Kind Kind `json:"kind"`
	// Forge is the forge's key in forges: (the {forge} of POST /hooks/{forge}).
	Forge string `json:"forge"`
	// DeliveryID is the forge's id of the delivery ("" when it sent none).
	DeliveryID string `json:"delivery_id,omitempty"`
	// Repo is the repository, owner/name.
	Repo string `json:"repo"`
	// Sender is the account whose action caused the delivery.
	Sender string `json:"sender,omitempty"`
	// Received is when the delivery arrived (the handler's clock).
	Received time.Time `json:"received"`

	// Number is the pull request's or issue's number (every kind but check).
	Number int `json:"number,omitempty"`
	// IsPR says Number is a pull request (always for review, review_comment and pull_request).
	IsPR bool `json:"is_pr,omitempty"`
	// SHA is the commit a check is for, or the pull request's head commit (review,
	// review_comment, pull_request) when the payload says.
	SHA string `json:"sha,omitempty"`
	// Branch is the check's branch when the forge says (GitHub: the one branch holding the
	// commit, the check suite's head branch), or the pull request's head branch.
	Branch string `json:"branch,omitempty"`

	Check         *Check         `json:"check,omitempty"`
	Review        *Review        `json:"review,omitempty"`
	ReviewComment *ReviewComment `json:"review_comment,omitempty"`
	PullRequest   *PullRequest   `json:"pull_request,omitempty"`
	Comment       *Comment       `json:"comment,omitempty"`
	Labeled       *Labeled       `json:"labeled,omitempty"`
}

// Check is a commit status or check run that reached a state.
type Check struct {
	Name    string               `json:"name"`
	State   workitems.CheckState `json:"state"`
	URL     string               `json:"url,omitempty"`
	Summary string               `json:"summary,omitempty"` // one line, at most 200 characters
}

// The review states (the same words as forge's review states).
const (
	reviewApproved         = "approved"
	reviewChangesRequested = "changes_requested"
	reviewCommented        = "commented"
	reviewDismissed        = "dismissed"
)

// Review is a pull request review.
type Review struct {
	User string `json:"user"`
	// State is approved, changes_requested, commented or dismissed.
	State string `json:"state"`
	Body  string `json:"body,omitempty"`
}

// ReviewComment is a comment on a line of a pull request's diff.
type ReviewComment struct {
	User string `json:"user"`
	Path string `json:"path"`
	Line int    `json:"line,omitempty"` // 0 when the comment is on the file or the line is gone
	Body string `json:"body"`
	URL  string `json:"url,omitempty"`
}

// PRAction is what happened to a pull request.
type PRAction string

// The pull request actions.
const (
	PROpened       PRAction = "opened"
	PRClosed       PRAction = "closed" // without merging
	PRMerged       PRAction = "merged"
	PRReopened     PRAction = "reopened"
	PRSynchronized PRAction = "synchronized" // its head branch got new commits
)

// PullRequest is a pull request's change of state. Event.SHA is its head commit and
// Event.Branch its head branch.
type PullRequest struct {
	Action PRAction          `json:"action"`
	State  workitems.PRState `json:"state"`
	Title  string            `json:"title,omitempty"`
	// MergedBy is who merged it (merged only).
	MergedBy string `json:"merged_by,omitempty"`
	// MergeCommitSHA is the merge commit (merged only, when the forge says).
	MergeCommitSHA string `json:"merge_commit_sha,omitempty"`
}

// Comment is a new comment on an issue or on a pull request's conversation.
type Comment struct {
	User string `json:"user"`
	Body string `json:"body"`
	URL  string `json:"url,omitempty"`
}

// Labeled is labels added to an issue or a pull request.
type Labeled struct {
	// Labels are the labels added (GitHub: the one label of the delivery). When Current is
	// true they are every label the issue has now: Gitea's webhooks do not say which were added.
	Labels  []string `json:"labels"`
	Current bool     `json:"current,omitempty"`
	User    string   `json:"user"`
	Title   string   `json:"title,omitempty"`
	Body    string   `json:"body,omitempty"`
}
