package itemstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// ErrStillOpen means an item cannot be re-run because it has not ended: it is queued, running,
// verifying, waiting to retry or escalated. It is an ErrInvalidTransition too (HTTP 409).
var ErrStillOpen = fmt.Errorf("item is still open (only a closed, failed or cancelled item can be re-run): %w", workitems.ErrInvalidTransition)

// RerunInput is the input a re-run of it starts from: the input its first attempt was created
// with (later attempts' inputs are the verifier's or a person's feedback to that run).
func RerunInput(it *workitems.Item) string {
	for _, a := range it.Attempts {
		if a.N == 1 {
			return a.Condition.Input
		}
	}
	return ""
}

// CreateRerun stores it, a new item of the same template, as a re-run of the item origID, and
// links both ways (it.RerunOf, and it.ID appended to the original's Reruns) in one MULTI. The
// original must have ended (closed, failed or cancelled; else ErrStillOpen) and the new id be
// free (else ErrExists); lim applies as in Create. A refused re-run changes nothing.
func (s *Store) CreateRerun(ctx context.Context, origID string, it *workitems.Item, lim CreateLimits) error {
	if it.ID == "" || it.Template == "" {
		return fmt.Errorf("workitems: rerun of %s: new item needs an id and a template", origID)
	}
	now := s.Now().UTC()
	costKey := s.k.dailyCost(it.Template, now.Format("2006-01-02"))
	var body []byte
	m := func(tx *redis.Tx, orig *workitems.Item) ([]workitems.Event, error) {
		if !orig.State.Terminal() {
			return nil, fmt.Errorf("workitems: rerun %s: it is %s: %w", origID, orig.State, ErrStillOpen)
		}
		if orig.Template != it.Template {
			return nil, fmt.Errorf("workitems: rerun %s: template %q is not the original's %q", origID, it.Template, orig.Template)
		}
		if err := s.checkNew(ctx, tx, it, lim, costKey); err != nil {
			return nil, fmt.Errorf("workitems: rerun %s as %s: %w", origID, it.ID, err)
		}
		it.RerunOf = origID
		it.State = workitems.StateQueued
		it.CreatedAt, it.UpdatedAt = now, now
		if it.Attempt == 0 {
			it.Attempt = 1
		}
		if len(it.Attempts) == 0 {
			it.Attempts = []workitems.Attempt{{N: 1, State: workitems.AttemptQueued}}
		}
		it.Version = 1
		var err error
		if body, err = json.Marshal(it); err != nil {
			return nil, err
		}
		orig.Reruns = append(orig.Reruns, it.ID)
		return []workitems.Event{{Type: workitems.EventRerun, Actor: it.Origin.Actor, Message: "re-run as " + it.ID,
			Data: map[string]string{"rerun": it.ID}}}, nil
	}
	extra := func(_ *workitems.Item, p pipeliner) {
		s.createWrites(ctx, p, it, body, now)
	}
	_, err := s.updateWatched(ctx, origID, nil, []string{s.k.item(it.ID), s.k.open(it.Template), costKey}, m, extra)
	if errors.Is(err, ErrDailyCap) {
		s.hooks.onLimit(ctx, it.Template, ErrDailyCap) // as Create: a refused re-run is told too
	}
	return err
}
