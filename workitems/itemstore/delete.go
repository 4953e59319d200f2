package itemstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Delete removes an item that has ended (closed, failed or cancelled) with everything that
// belongs to it alone — its record, event log, steer queue, and every attempt's lease, epoch,
// checkpoint, history and patch — and takes it out of the indexes and counts. A template's
// last-delivered record that points at it goes too. An open item is refused
// (ErrInvalidTransition): its worker may still write.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.deleteIf(ctx, id, func(it *workitems.Item) error {
		if !it.State.Terminal() {
			return fmt.Errorf("workitems: delete %s: it is %s, only closed, failed or cancelled items can be deleted: %w",
				id, it.State, workitems.ErrInvalidTransition)
		}
		return nil
	})
}

// ErrNotDue is returned by DeleteIfDue when the item, read inside the transaction, is not to
// be deleted (any more): it was resolved, or its retention has not passed.
var ErrNotDue = errors.New("item is not due for deletion")

// DeleteIfDue deletes the item like Delete, but only if due holds for its record as read in the
// same transaction (else ErrNotDue); the retention janitor uses it so that an escalation
// resolved an instant before is kept. Escalated items can be deleted this way (no worker
// writes to a parked item; a resolve in between changes the record and retries the check).
func (s *Store) DeleteIfDue(ctx context.Context, id string, due func(*workitems.Item) bool) error {
	return s.deleteIf(ctx, id, func(it *workitems.Item) error {
		if !it.State.Terminal() && it.State != workitems.StateEscalated || !due(it) {
			return fmt.Errorf("workitems: delete %s (%s): %w", id, it.State, ErrNotDue)
		}
		return nil
	})
}

func (s *Store) deleteIf(ctx context.Context, id string, allowed func(*workitems.Item) error) error {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	lastKey := s.k.delivered(cur.Template)
	return s.retryWatch(ctx, func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, s.k.item(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("workitems: item %q: %w", id, workitems.ErrNotFound)
		}
		if err != nil {
			return err
		}
		var it workitems.Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("workitems: item %s: corrupt record: %w", id, err)
		}
		if err := allowed(&it); err != nil {
			return err
		}
		last, err := readLastDelivered(ctx, tx, lastKey)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, s.k.ofItem(id, max(it.Attempt, len(it.Attempts)))...)
			s.unindex(ctx, p, &it)
			if last != nil && last.Item == id {
				p.Del(ctx, lastKey)
			}
			// The item's own log goes with it; the deployment-wide log keeps a trace.
			e, _ := json.Marshal(workitems.Event{Item: id, Type: workitems.EventDeleted, Message: "deleted (was " + string(it.State) + ")", At: s.Now().UTC()})
			p.XAdd(ctx, &redis.XAddArgs{Stream: s.k.allEvents(), MaxLen: 10 * s.maxEvents, Approx: true, Values: []any{"e", e}})
			return nil
		})
		return err
	}, s.k.item(id), lastKey)
}

// Due is an item whose retention has passed, as the janitor found it.
type Due struct {
	ID    string
	State workitems.State
	Since time.Time // when it ended (or escalated)
}

// DueForDeletion returns up to limit items per retained state whose retention (r) has passed at
// now, oldest first: one ZRANGEBYSCORE per state on the ended indexes (and the escalation queue
// when r.Escalated is set), so finding them costs O(what is due), never O(the store).
func (s *Store) DueForDeletion(ctx context.Context, r config.Retention, now time.Time, limit int) ([]Due, error) {
	if limit <= 0 {
		limit = 500
	}
	var out []Due
	for _, st := range []workitems.State{workitems.StateClosed, workitems.StateCancelled, workitems.StateFailed, workitems.StateEscalated} {
		keep, ok := r.ItemKeep(st)
		if !ok {
			continue
		}
		key := s.k.ended(st)
		if st == workitems.StateEscalated {
			key = s.k.escalated()
		}
		zs, err := s.rdb.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "-inf",
			Max: strconv.FormatInt(now.Add(-keep).UnixMilli(), 10), Count: int64(limit)}).Result()
		if err != nil {
			return nil, fmt.Errorf("workitems: items due for deletion: %w", err)
		}
		for _, z := range zs {
			out = append(out, Due{ID: z.Member.(string), State: st, Since: time.UnixMilli(int64(z.Score)).UTC()})
		}
	}
	return out, nil
}

// RetentionDue says whether an item's record, read now, is still the one DueForDeletion found
// (d) past its retention: DeleteIfDue repeats this inside its transaction. An ended item never
// changes state, so its ended index time stands; an escalated one must still be in the same
// escalation (a resolve and a new escalation start its retention again).
func RetentionDue(it *workitems.Item, d Due, r config.Retention, now time.Time) bool {
	keep, ok := r.ItemKeep(it.State)
	if !ok || it.State != d.State {
		return false
	}
	if it.State == workitems.StateEscalated {
		return !now.Before(escalatedAt(it).Add(keep))
	}
	return true
}

// DropFromEnded removes an id from the ended index of state st (or the escalation queue): an
// entry whose item is gone, so that the janitor does not meet it again.
func (s *Store) DropFromEnded(ctx context.Context, id string, st workitems.State) {
	key := s.k.ended(st)
	if st == workitems.StateEscalated {
		key = s.k.escalated()
	}
	s.rdb.ZRem(ctx, key, id)
}

func escalatedAt(it *workitems.Item) time.Time {
	if it.Escalation != nil {
		return it.Escalation.At
	}
	return it.UpdatedAt
}
