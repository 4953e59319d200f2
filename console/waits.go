package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"outerloop/api"
	"outerloop/lib/shorten"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// waitView is what the item page says about a waiting item's wait.
type waitView struct {
	*workitems.Wait
	// What is what it waits for, in words: "CI on abc123 of #7", "a review of #7".
	What string
	// PullRequest is the pull request waited on (from the item's delivery), for its link; nil in
	// branch mode or when the delivery has none.
	PullRequest *workitems.PullRequest
	// NextPoll is when the poller looks next, from the poller's index (a forge's rate limit or a
	// claim moves it past Wait.NextPoll); zero when the index has none.
	NextPoll time.Time
}

// waitWhat says what a wait is for, in words.
func waitWhat(w *workitems.Wait) string {
	switch w.Kind {
	case workitems.WaitCI:
		s := "CI on " + shorten.SHA(w.SHA)
		if w.PR != 0 {
			s += fmt.Sprintf(" of #%d", w.PR)
		}
		return s
	case workitems.WaitReview:
		return fmt.Sprintf("a review of #%d", w.PR)
	}
	return string(w.Kind)
}

// loadWait builds the wait card of a waiting item (nil otherwise): one more read, the
// poller's index.
func (c *Console) loadWait(ctx context.Context, it *workitems.Item) (*waitView, error) {
	if it.Wait == nil || it.State != workitems.StateWaiting {
		return nil, nil
	}
	v := &waitView{Wait: it.Wait, What: waitWhat(it.Wait)}
	if d := it.Delivery; d != nil && d.PR != nil && d.PR.Number == it.Wait.PR {
		v.PullRequest = d.PR
	}
	np, err := c.store.NextPoll(ctx, it.ID)
	if err != nil {
		return nil, err
	}
	v.NextPoll = np
	return v, nil
}

// waitRow is a past or current wait on the item page, from the item's event log.
type waitRow struct {
	api.WaitRecord
	What   string
	Waited string
}

func waitRows(evs []workitems.Event, now time.Time) []waitRow {
	h := api.WaitHistory(evs)
	out := make([]waitRow, 0, len(h))
	for _, r := range h {
		w := &workitems.Wait{Kind: workitems.WaitKind(r.Kind), SHA: r.SHA, PR: r.PR}
		out = append(out, waitRow{WaitRecord: r, What: waitWhat(w), Waited: coarse(r.Waited(now))})
	}
	return out
}

// waitingPerPage is how many waiting items one view of the inbox reads for its "Pull requests
// waiting for a person" section.
const waitingPerPage = 50

// waitingSection is the inbox's list of pull requests that have waited for a person's review
// longer than waits.inbox_after.
type waitingSection struct {
	Rows       []waitingRow
	After      string // waits.inbox_after, in words
	Waiting    int64  // waiting items of every kind, in all
	From, To   int    // the waiting items this view read (1-based, inclusive)
	Prev, Next string
}

type waitingRow struct {
	Item *workitems.Item
	PR   *workitems.PullRequest // nil when the delivery has no link
	Age  string
}

// waitingForPeople reads one page of waiting items (Store.Waiting: O(page), whatever the number
// waiting) and keeps those waiting for a review since longer than waits.inbox_after. A page may
// so show fewer rows than it read, or none: the pager walks the waiting items, not the matches.
func (c *Console) waitingForPeople(r *http.Request, pageNo int) (*waitingSection, error) {
	ctx := r.Context()
	after := config.Waits{}.WithDefaults().InboxAfter
	if c.o.Queue != nil {
		after = c.o.Queue.Config().Waits.WithDefaults().InboxAfter
	}
	now := c.store.Now()
	s := &waitingSection{After: coarse(after.D())}
	var err error
	if s.Waiting, err = c.store.WaitingCount(ctx); err != nil {
		return nil, err
	}
	offset := (pageNo - 1) * waitingPerPage
	items, err := c.store.Waiting(ctx, offset, waitingPerPage)
	if err != nil {
		return nil, err
	}
	s.From, s.To = offset+1, offset+len(items)
	for _, it := range items {
		w := it.Wait
		if w == nil || w.Kind != workitems.WaitReview || now.Sub(w.Since) < after.D() {
			continue
		}
		row := waitingRow{Item: it, Age: coarse(now.Sub(w.Since))}
		if d := it.Delivery; d != nil && d.PR != nil && d.PR.Number == w.PR {
			row.PR = d.PR
		}
		s.Rows = append(s.Rows, row)
	}
	link := func(n int) string {
		q := r.URL.Query()
		q.Set("waiting", strconv.Itoa(n))
		return "/escalations?" + q.Encode()
	}
	if pageNo > 1 {
		s.Prev = link(pageNo - 1)
	}
	if int64(offset+waitingPerPage) < s.Waiting {
		s.Next = link(pageNo + 1)
	}
	return s, nil
}
