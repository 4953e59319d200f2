package api

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"outerloop/workitems"
)

// reviewMarker starts the part of a next attempt's input that the verifier wrote from a review
// (verify's withReviewInput): what a person said before it is theirs.
const reviewMarker = "A reviewer requested changes on the pull request"

var (
	reviewPRRE   = regexp.MustCompile(`^` + reviewMarker + ` #(\d+)`)
	reviewUserRE = regexp.MustCompile(`(?m)^Review by (.+):$`)
)

// ReviewRound is one review that requested changes and sent the item into another attempt.
type ReviewRound struct {
	N  int       `json:"n"` // 1 for the first round
	At time.Time `json:"at"`
	// PR is the pull request's number and Reviewers who requested changes, as read back from
	// the input (0 and empty when the input does not say).
	PR        int      `json:"pr,omitempty"`
	Reviewers []string `json:"reviewers,omitempty"`
	// Review is the review's body and inline comments ("- path:line: comment") exactly as the
	// next attempt got them; Input is that attempt's whole input (a person's words first, if any).
	Review string `json:"review"`
	Input  string `json:"input,omitempty"`
	// Reasons are the decision's reasons (the verifier's headline of the review).
	Reasons []string `json:"reasons,omitempty"`
}

// ReviewRounds lists the item's review rounds, oldest first: its decisions with rule
// changes_requested and outcome retry. Each is read from the decision's Next.Input.
func ReviewRounds(it *workitems.Item) []ReviewRound {
	var out []ReviewRound
	for _, d := range it.Decisions {
		if d.Rule != workitems.RuleChangesRequested || d.Outcome != workitems.OutcomeRetry {
			continue
		}
		r := ReviewRound{N: len(out) + 1, At: d.At, Reasons: d.Reasons}
		if d.Next != nil {
			r.Input = d.Next.Input
			r.Review = r.Input
			if i := strings.Index(r.Input, reviewMarker); i >= 0 {
				r.Review = r.Input[i:]
			}
			if m := reviewPRRE.FindStringSubmatch(r.Review); m != nil {
				r.PR, _ = strconv.Atoi(m[1])
			}
			for _, m := range reviewUserRE.FindAllStringSubmatch(r.Review, -1) {
				r.Reviewers = append(r.Reviewers, m[1])
			}
		}
		if r.Input == r.Review {
			r.Input = "" // nothing but the review: said once
		}
		out = append(out, r)
	}
	return out
}

// WaitRecord is one wait of an item, read from its event log: the waiting event that began it
// and the woken event that ended it (none yet: the item still waits, or the log was trimmed).
type WaitRecord struct {
	Seq      int64     `json:"seq"`
	Attempt  int       `json:"attempt"`
	Kind     string    `json:"kind"`
	SHA      string    `json:"sha,omitempty"`
	PR       int       `json:"pr,omitempty"`
	Since    time.Time `json:"since"`
	Deadline time.Time `json:"deadline,omitzero"`
	// WokenAt and By say when and what ended it (workitems.WakeReason); zero while it lasts.
	WokenAt time.Time `json:"woken_at,omitzero"`
	By      string    `json:"by,omitempty"`
}

// Waited is how long the wait lasted (until now while it lasts).
func (w WaitRecord) Waited(now time.Time) time.Duration {
	if w.WokenAt.IsZero() {
		return max(now.Sub(w.Since), 0)
	}
	return max(w.WokenAt.Sub(w.Since), 0)
}

// WaitHistory pairs an item's waiting and woken events by the wait's seq, oldest first.
func WaitHistory(evs []workitems.Event) []WaitRecord {
	var out []WaitRecord
	index := map[int64]int{}
	for _, e := range evs {
		seq, err := strconv.ParseInt(e.Data["seq"], 10, 64)
		if err != nil {
			continue
		}
		switch e.Type {
		case workitems.EventWaiting:
			r := WaitRecord{Seq: seq, Attempt: e.Attempt, Kind: e.Data["kind"], SHA: e.Data["sha"], Since: e.At}
			r.PR, _ = strconv.Atoi(e.Data["pr"])
			r.Deadline, _ = time.Parse(time.RFC3339, e.Data["deadline"])
			index[seq] = len(out)
			out = append(out, r)
		case workitems.EventWoken:
			i, ok := index[seq]
			if !ok { // its waiting event was trimmed from the log
				index[seq] = len(out)
				out = append(out, WaitRecord{Seq: seq, Attempt: e.Attempt, Kind: e.Data["kind"]})
				i = len(out) - 1
			}
			out[i].WokenAt, out[i].By = e.At, e.Data["by"]
		}
	}
	return out
}
