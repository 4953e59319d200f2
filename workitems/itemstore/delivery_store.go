package itemstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"outerloop/lib/shorten"
	"outerloop/workitems"
)

// ErrNoPatch means no patch is stored for that attempt of the item.
var ErrNoPatch = errors.New("no patch stored")

// ErrDeliveredMeanwhile refuses the record of a patch another item of the template delivered,
// with the same tree on the same base tree, after the delivery read the template's last one
// (LastDelivered): the attempt is delivered again and the policy decides on what it finds then
// (already_delivered). It is transient: the task is tried again.
var ErrDeliveredMeanwhile = errors.New("the same change was delivered meanwhile")

// LastDelivered is a template's last delivered patch-mode result: a delivery compares its own
// with it, so that ticks of a template deliver one identical change once.
type LastDelivered struct {
	BaseTree string `json:"base_tree"`
	Tree     string `json:"tree"`
	Item     string `json:"item"`
	Attempt  int    `json:"attempt"`
	Commit   string `json:"commit"`
}

// RecordDelivery is RecordDecision with the attempt's delivery: the record goes on the attempt
// and on the item (its latest), and the patch under the attempt's patch key, in the same
// transaction as the decision, so a reader sees all of it or none. del may be nil (nothing was
// delivered: a retry or an escalation before any commit) and patch empty.
//
// A close delivered as a patch becomes the template's last delivered result (LastDelivered).
// The template's record is read under WATCH: when another item delivered the same tree on the
// same base tree since this delivery read it, the record is refused (ErrDeliveredMeanwhile,
// transient) and nothing changes, so two items finishing at once cannot both deliver it. The
// store decides nothing: the delivery finds the change already there and the policy's
// already_delivered row closes it.
func (s *Store) RecordDelivery(ctx context.Context, f *Fence, d workitems.Decision, v *workitems.Verdict, del *workitems.Delivery, patch []byte) (*workitems.Item, error) {
	cur, err := s.Get(ctx, f.Item)
	if err != nil {
		return nil, err
	}
	lastKey := s.k.delivered(cur.Template) // an item's template never changes
	var becomesLast *LastDelivered
	return s.updateWatched(ctx, f.Item, f, []string{lastKey}, func(tx *redis.Tx, it *workitems.Item) ([]workitems.Event, error) {
		becomesLast = nil
		if err := guard(workitems.OpDecide, it, f.Attempt); err != nil {
			return nil, err
		}
		a := it.Current()
		now := s.Now().UTC()
		if d.At.IsZero() {
			d.At = now
		}
		a.Verified = v
		var evs []workitems.Event
		if del != nil {
			rec := *del
			rec.Attempt = a.N
			if rec.At.IsZero() {
				rec.At = now
			}
			if d.Outcome == workitems.OutcomeClose && rec.Mode == workitems.DeliverPatch && rec.Outcome == workitems.DeliveryPatched {
				last, err := readLastDelivered(ctx, tx, lastKey)
				if err != nil {
					return nil, err
				}
				if last != nil && last.Item != it.ID && last.BaseTree == rec.BaseTree && last.Tree == rec.Tree {
					return nil, workitems.Classify(workitems.ClassTransient, fmt.Errorf("workitems: item %s: %w: item %s attempt %d delivered tree %s on base tree %s",
						it.ID, ErrDeliveredMeanwhile, last.Item, last.Attempt, shorten.SHA(rec.Tree), shorten.SHA(rec.BaseTree)))
				}
				becomesLast = &LastDelivered{BaseTree: rec.BaseTree, Tree: rec.Tree, Item: it.ID, Attempt: a.N, Commit: rec.Commit}
			}
			a.Delivery, it.Delivery = &rec, &rec
			data := map[string]string{"step": string(workitems.StepRecorded), "mode": string(rec.Mode), "outcome": string(rec.Outcome)}
			if rec.Commit != "" {
				data["commit"] = rec.Commit
			}
			if len(patch) > 0 {
				data["patch_bytes"] = strconv.FormatInt(rec.PatchBytes, 10)
				data["patch_truncated"] = strconv.FormatBool(rec.PatchTruncated)
			}
			if rec.SameAs != nil {
				data["same_as"] = rec.SameAs.Item
			}
			msg := "delivery: " + string(rec.Outcome)
			if rec.Error != "" {
				msg += ": " + rec.Error
			}
			evs = append(evs, workitems.Event{Type: workitems.EventDelivery, Attempt: a.N, Message: msg, Data: data})
		}
		more, err := s.applyDecision(workitems.OpDecide, it, a, d)
		return append(evs, more...), err
	}, func(it *workitems.Item, p pipeliner) {
		if len(patch) > 0 {
			p.Set(ctx, s.k.patch(it.ID, f.Attempt), patch, 0)
		}
		if becomesLast != nil {
			b, _ := json.Marshal(becomesLast) // plain strings and ints
			p.Set(ctx, lastKey, b, 0)
		}
	})
}

// LastDelivered returns the template's last delivered patch-mode result (nil: none yet, or a
// record that cannot be read: it is only the memory of an optimisation).
func (s *Store) LastDelivered(ctx context.Context, template string) (*LastDelivered, error) {
	return readLastDelivered(ctx, s.rdb, s.k.delivered(template))
}

func readLastDelivered(ctx context.Context, r redis.Cmdable, key string) (*LastDelivered, error) {
	b, err := r.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l LastDelivered
	if json.Unmarshal(b, &l) != nil {
		return nil, nil // unreadable: treat as none (it is only an optimisation's memory)
	}
	return &l, nil
}

// Patch returns the patch stored for attempt n of an item (cut and marked when the whole one
// was over the delivery flow's bound: see Delivery.PatchTruncated). ErrNotFound: no such
// item; ErrNoPatch: the attempt has none.
func (s *Store) Patch(ctx context.Context, id string, n int) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.k.patch(id, n)).Bytes()
	if errors.Is(err, redis.Nil) {
		if _, err := s.Get(ctx, id); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("workitems: item %s attempt %d: %w", id, n, ErrNoPatch)
	}
	if err != nil {
		return nil, fmt.Errorf("workitems: patch %s attempt %d: %w", id, n, err)
	}
	return b, nil
}
