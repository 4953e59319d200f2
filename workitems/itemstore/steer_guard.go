package itemstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// ErrNotSteerable means steer input was refused: no loop of the item that reads steer input
// (LoopTraits.Steerable) is running or queued, so it would wait unread forever.
var ErrNotSteerable = errors.New("no loop of the item that reads steer input is running or queued")

// SteerableStates are the states in which an item's loop reads steer input: its
// attempt runs, or is queued (a retry waiting for its turn is queued too).
func SteerableStates() []workitems.State {
	return []workitems.State{workitems.StateQueued, workitems.StateRunning, workitems.StateRetryWait}
}

// SteerIf queues input like Steer, only when accept approves the item as it is at that moment:
// the item is watched, so a state change between the check and the write refuses nothing
// wrongly and stores nothing wrongly. accept's error is returned as it is, and nothing is
// stored.
func (s *Store) SteerIf(ctx context.Context, id, text, actor string, accept func(*workitems.Item) error) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("workitems: steer %s: empty text", id)
	}
	key := s.k.item(id)
	return s.retryWatch(ctx, func(tx *redis.Tx) error {
		b, err := tx.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return fmt.Errorf("workitems: item %q: %w", id, workitems.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("workitems: steer %s: %w", id, err)
		}
		var it workitems.Item
		if err := json.Unmarshal(b, &it); err != nil {
			return fmt.Errorf("workitems: item %s: corrupt record: %w", id, err)
		}
		if err := accept(&it); err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.RPush(ctx, s.k.steer(id), text)
			s.addEvent(ctx, p, workitems.Event{Item: id, Type: workitems.EventSteer, Actor: actor, Message: "steer input queued", At: s.Now().UTC()})
			return nil
		})
		return err
	}, key)
}
