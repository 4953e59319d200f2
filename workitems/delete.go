package workitems

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// EventDeleted is written to the deployment-wide event log when an item is deleted.
const EventDeleted EventType = "deleted"

// Delete removes an item that has ended (closed, failed or cancelled) with everything that
// belongs to it alone — its record, event log, steer queue, and every attempt's lease, epoch,
// checkpoint, history and patch — and takes it out of the indexes and counts. A template's
// last-delivered record that points at it goes too. An open item is refused
// (ErrInvalidTransition): its worker may still write.
func (s *Store) Delete(ctx context.Context, id string) error {
	cur, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	lastKey := s.k.delivered(cur.Template)
	return s.retryWatch(ctx, func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, s.k.item(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("workitems: item %q: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		var it Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("workitems: item %s: corrupt record: %w", id, err)
		}
		if !it.State.Terminal() {
			return fmt.Errorf("workitems: delete %s: it is %s, only closed, failed or cancelled items can be deleted: %w",
				id, it.State, ErrInvalidTransition)
		}
		last, err := readLastDelivered(ctx, tx, lastKey)
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, s.k.ofItem(id, max(it.Attempt, len(it.Attempts)))...)
			p.ZRem(ctx, s.k.items(), id)
			p.ZRem(ctx, s.k.byTemplate(it.Template), id)
			p.SRem(ctx, s.k.state(it.State), id)
			p.SRem(ctx, s.k.open(it.Template), id)
			p.ZRem(ctx, s.k.escalated(), id)
			p.HIncrBy(ctx, s.k.counts(), it.Template+"|"+string(it.State), -1)
			if last != nil && last.Item == id {
				p.Del(ctx, lastKey)
			}
			// The item's own log goes with it; the deployment-wide log keeps a trace.
			e, _ := json.Marshal(Event{Item: id, Type: EventDeleted, Message: "deleted (was " + string(it.State) + ")", At: s.now().UTC()})
			p.XAdd(ctx, &redis.XAddArgs{Stream: s.k.allEvents(), MaxLen: 10 * s.maxEvents, Approx: true, Values: []any{"e", e}})
			return nil
		})
		return err
	}, s.k.item(id), lastKey)
}
