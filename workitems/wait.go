package workitems

import (
	"fmt"
	"time"

	"outerloop/lib/shorten"
)

// WaitKind is what a waiting item waits for after its change was pushed.
type WaitKind string

// The wait kinds.
const (
	// WaitCI: the required CI checks on exactly the pushed commit (done_check.ci).
	WaitCI WaitKind = "ci"
	// WaitReview: the pull request's review (deliver.review): approvals, or changes requested.
	WaitReview WaitKind = "review"
)

// AllWaitKinds lists every wait kind.
func AllWaitKinds() []WaitKind { return []WaitKind{WaitCI, WaitReview} }

// WakeReason says what woke a waiting item: it is recorded on the item's wake event.
type WakeReason string

// The wake reasons.
const (
	WakeWebhook  WakeReason = "webhook"  // a forge event about the commit or the pull request
	WakePoll     WakeReason = "poll"     // the deployment's poller found the evidence changed
	WakeDeadline WakeReason = "deadline" // the wait's deadline passed
	WakeCommand  WakeReason = "command"  // a person's /outerloop command on the pull request
)

// AllWakeReasons lists every wake reason.
func AllWakeReasons() []WakeReason {
	return []WakeReason{WakeWebhook, WakePoll, WakeDeadline, WakeCommand}
}

// Wait is what a waiting item waits for. It holds no worker, lease or goroutine: the item is
// in the waiting index (by its next poll) and, for CI, in the index of its commit, until a
// forge event, the poller or the deadline wakes it.
type Wait struct {
	Kind WaitKind `json:"kind"`
	// Seq numbers the item's waits; a wake names the one it ends, so two wakes of the same wait
	// (a webhook and a poll at once) record one decision.
	Seq     int64 `json:"seq"`
	Attempt int   `json:"attempt"`
	// Where: the forge (a key of forges:), the repository (owner/name), the pushed commit and
	// the pull request (0: none, mode branch).
	Forge string `json:"forge,omitempty"`
	Repo  string `json:"repo,omitempty"`
	SHA   string `json:"sha,omitempty"`
	PR    int    `json:"pr,omitempty"`
	// Since is when this wait began; PushedAt when the commit it judges was pushed (reviews
	// before it are of an older commit); Deadline when the wait gives up (the policy then
	// decides on what is there: missing CI escalates).
	Since    time.Time `json:"since"`
	PushedAt time.Time `json:"pushed_at,omitzero"`
	Deadline time.Time `json:"deadline"`
	// NextPoll is when the poller looks next; Polls how often it has looked in this wait.
	NextPoll time.Time `json:"next_poll"`
	Polls    int       `json:"polls,omitempty"`
	// Reason is the policy's words for why it waits.
	Reason string `json:"reason,omitempty"`
	// Local is the local evidence's close (its rule and summary) that let the change be pushed.
	LocalRule    RuleName `json:"local_rule,omitempty"`
	LocalSummary string   `json:"local_summary,omitempty"`
	// InfraReruns counts the re-runs of CI checks that failed for infrastructure reasons.
	InfraReruns int `json:"infra_reruns,omitempty"`
}

// Due reports whether the wait's deadline has passed at now.
func (w *Wait) Due(now time.Time) bool { return !now.Before(w.Deadline) }

// String says what the wait is for, in words.
func (w *Wait) String() string {
	what := string(w.Kind)
	switch w.Kind {
	case WaitCI:
		what = "CI on " + shorten.SHA(w.SHA)
	case WaitReview:
		what = fmt.Sprintf("a review of #%d", w.PR)
	}
	return fmt.Sprintf("%s since %s, until %s", what, w.Since.UTC().Format(time.RFC3339), w.Deadline.UTC().Format(time.RFC3339))
}

// WaitPlan is a wait decision's part: what to wait for and until when. The store turns it into
// the item's Wait with the delivery's forge, repository, commit and pull request.
type WaitPlan struct {
	Kind     WaitKind      `json:"kind"`
	Deadline time.Time     `json:"deadline"`
	PollIn   time.Duration `json:"poll_in,omitempty"` // first poll after this long (default 15 s)
	// Forge (a key of forges:) and Repo (owner/name) say where the commit and pull request are.
	Forge string `json:"forge,omitempty"`
	Repo  string `json:"repo,omitempty"`
	// LocalRule and LocalSummary are the local evidence's close that got the change pushed (the
	// first wait of an attempt; later waits keep them).
	LocalRule    RuleName `json:"local_rule,omitempty"`
	LocalSummary string   `json:"local_summary,omitempty"`
	// InfraReruns is how many times CI checks were re-run for infrastructure failures so far.
	InfraReruns int `json:"infra_reruns,omitempty"`
}

// DefaultFirstPoll is how long after parking the poller first looks, unless the plan says.
const DefaultFirstPoll = 15 * time.Second

// TaskTypeWake is the asynq task type that wakes a waiting item: a worker judges its evidence
// as it is now and records the decision (worker.Handler.ProcessWake).
const TaskTypeWake = "outerloop:wake"

// WakePayload is a wake task's body: the item, the wait it ends and what woke it.
type WakePayload struct {
	Item string     `json:"item"`
	Seq  int64      `json:"seq"`
	By   WakeReason `json:"by"`
}

// WakeTaskID is the wake task's id: one wake per wait, whatever woke it first.
func WakeTaskID(item string, seq int64) string { return fmt.Sprintf("%s/wake-%d", item, seq) }
