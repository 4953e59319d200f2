package itemstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// acquireLease takes the lease of an attempt and bumps its fencing epoch, unless a live lease of
// another holder exists.
//
//	KEYS[1] lease key   ("holder|epoch", with a TTL)
//	KEYS[2] epoch key   (counter, no TTL)
//	ARGV[1] holder id
//	ARGV[2] lease TTL in milliseconds
//
// Returns {epoch, 0} on success, {-1, pttl} when another holder's lease is live.
var acquireLease = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local holder = string.match(cur, '^(.*)|')
  if holder ~= ARGV[1] then
    return {-1, redis.call('PTTL', KEYS[1])}
  end
end
local e = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. e, 'PX', ARGV[2])
return {e, 0}
`)

// renewLease extends a lease while its epoch is still the newest; it restores an expired lease
// when nobody took the attempt over in between.
//
//	KEYS[1] lease key, KEYS[2] epoch key
//	ARGV[1] "holder|epoch", ARGV[2] epoch, ARGV[3] TTL ms
//
// Returns 1 when renewed, 0 when the lease is lost.
var renewLease = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`)

// releaseLease deletes the lease if it is still ours.
//
//	KEYS[1] lease key; ARGV[1] "holder|epoch"
var releaseLease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`)

// saveCheckpoint replaces an attempt's checkpoint, appends history entries and, when the
// workspace changed, replaces the workspace snapshot beside it, only while the writer's epoch is
// the newest. A restart from the first step clears the history first. With a charge it also
// charges the attempt's spend so far (charge.go): each field of the charged record rises to the
// spend given, never falls, and what the cost rose by is added to the template's daily cost.
//
//	KEYS[1] epoch key, KEYS[2] checkpoint key, KEYS[3] history list, KEYS[4] snapshot key,
//	KEYS[5] charged hash, KEYS[6] the template's daily cost key (today, UTC), KEYS[7] the item's
//	steer list
//	ARGV[1] epoch, ARGV[2] checkpoint bytes,
//	ARGV[3] snapshot op ("" keep | "set" | "del"), ARGV[4] snapshot bytes,
//	ARGV[5] "1" to clear the history before appending,
//	ARGV[6] "1" to charge, ARGV[7..14] the spend so far (spendFields order), ARGV[15] daily cost
//	key TTL in seconds, ARGV[16] how many steer inputs this checkpoint holds (removed from the
//	head of the steer list), ARGV[17] the write's token ("" for none), ARGV[18..] history
//	entries; KEYS[8] the attempt's last applied token
//
// A write whose token is the last one applied is a retry of a write Redis already ran (its
// reply was lost): the state, snapshot, steer and history are left as they are, so its history
// entries are not appended twice; the charge is rerun (it only rises, so it charges nothing
// more).
//
// Returns {history length, the charged fields after, before} ({n} without a charge), or {-1}
// when the epoch is stale (then nothing is written or charged).
var saveCheckpoint = redis.NewScript(chargeLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {-1} end
if ARGV[17] == '' or redis.call('GET', KEYS[8]) ~= ARGV[17] then
  redis.call('SET', KEYS[2], ARGV[2])
  if ARGV[3] == 'set' then
    redis.call('SET', KEYS[4], ARGV[4])
  elseif ARGV[3] == 'del' then
    redis.call('DEL', KEYS[4])
  end
  if ARGV[5] == '1' then redis.call('DEL', KEYS[3]) end
  local taken = tonumber(ARGV[16]) or 0
  if taken > 0 then redis.call('LTRIM', KEYS[7], taken, -1) end
  for i = 18, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
  if ARGV[17] ~= '' then redis.call('SET', KEYS[8], ARGV[17]) end
end
local n = redis.call('LLEN', KEYS[3])
if ARGV[6] ~= '1' then return {n} end
local after, before = charge(KEYS[5], KEYS[6], ARGV, 6, ARGV[15])
return {n, after, before}
`)

// AcquireLease takes the lease of attempt n of an item for holder, for ttl, and returns the
// fence to write under. ErrLeaseHeld means another holder's lease is live.
func (s *Store) AcquireLease(ctx context.Context, item string, n int, holder string, ttl time.Duration) (*Fence, error) {
	res, err := acquireLease.Run(ctx, s.rdb, []string{s.k.lease(item, n), s.k.epoch(item, n)},
		holder, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("workitems: lease %s attempt %d: %w", item, n, err)
	}
	if res[0] < 0 {
		return nil, fmt.Errorf("workitems: lease %s attempt %d (expires in %dms): %w", item, n, res[1], workitems.ErrLeaseHeld)
	}
	return &Fence{Item: item, Attempt: n, Epoch: res[0], Holder: holder}, nil
}

func (f *Fence) value() string { return f.Holder + "|" + strconv.FormatInt(f.Epoch, 10) }

// RenewLease extends the lease; ErrLeaseLost once another holder took over.
func (s *Store) RenewLease(ctx context.Context, f *Fence, ttl time.Duration) error {
	ok, err := renewLease.Run(ctx, s.rdb, []string{s.k.lease(f.Item, f.Attempt), s.k.epoch(f.Item, f.Attempt)},
		f.value(), f.Epoch, ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("workitems: renew lease %s attempt %d: %w", f.Item, f.Attempt, err)
	}
	if ok == 0 {
		return fmt.Errorf("workitems: renew lease %s attempt %d epoch %d: %w", f.Item, f.Attempt, f.Epoch, workitems.ErrLeaseLost)
	}
	return nil
}

// ReleaseLease gives the lease up so that another worker need not wait for it to expire.
func (s *Store) ReleaseLease(ctx context.Context, f *Fence) error {
	if err := releaseLease.Run(ctx, s.rdb, []string{s.k.lease(f.Item, f.Attempt)}, f.value()).Err(); err != nil {
		return fmt.Errorf("workitems: release lease %s attempt %d: %w", f.Item, f.Attempt, err)
	}
	return nil
}

// Epoch returns the newest fencing epoch of an attempt (0 before any lease).
func (s *Store) Epoch(ctx context.Context, item string, n int) (int64, error) {
	v, err := s.rdb.Get(ctx, s.k.epoch(item, n)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// SaveCheckpoint writes an attempt's checkpoint and appends history under the fence.
func (s *Store) SaveCheckpoint(ctx context.Context, f *Fence, state []byte, history ...[]byte) error {
	return s.WriteCheckpoint(ctx, f, CheckpointWrite{State: state, History: history})
}

// CheckpointWrite is one fenced checkpoint write.
type CheckpointWrite struct {
	State   []byte
	History [][]byte // appended
	// Snapshot replaces the stored workspace diff; nil keeps it (the tree did not change). One
	// that is too large or failed deletes it, so that no diff outlives the tree it recreates.
	Snapshot *workitems.Snapshot
	// Reset drops the history first: the attempt starts over from its first step.
	Reset bool
	// Charge, when set, charges the attempt's spend so far in the same write (charge.go).
	Charge *Charge
	// SteerTaken is how many queued steer inputs (PeekSteer, oldest first) this checkpoint
	// holds; they leave the queue in the same write, so a crash before it keeps them queued
	// and one after it finds them in the checkpoint.
	SteerTaken int
	// Token, when set, makes the write idempotent: a write with the token the attempt's last
	// applied write had is a retry whose reply was lost after Redis ran it, and writes nothing
	// again (its history is not appended twice). A writer gives each write a new token, unique
	// within the attempt (CheckpointToken), and reuses it only when it retries that write.
	Token string
}

// CheckpointToken is the token of a fenced execution's seq-th checkpoint write: unique within
// the attempt, because every execution has its own epoch.
func CheckpointToken(f *Fence, seq int64) string {
	return strconv.FormatInt(f.Epoch, 10) + ":" + strconv.FormatInt(seq, 10)
}

// WriteCheckpoint writes w in one fenced Lua call: the state, the history and the workspace
// snapshot change together or not at all.
func (s *Store) WriteCheckpoint(ctx context.Context, f *Fence, w CheckpointWrite) error {
	_, err := s.WriteChargedCheckpoint(ctx, f, w)
	return err
}

// WriteChargedCheckpoint is WriteCheckpoint returning what w.Charge charged (zero without one).
func (s *Store) WriteChargedCheckpoint(ctx context.Context, f *Fence, w CheckpointWrite) (Charged, error) {
	op, snap := snapshotOp(w.Snapshot)
	reset := ""
	if w.Reset {
		reset = "1"
	}
	if w.SteerTaken < 0 {
		return Charged{}, fmt.Errorf("workitems: checkpoint %s attempt %d: steer taken %d is negative", f.Item, f.Attempt, w.SteerTaken)
	}
	args := make([]any, 0, 16+len(w.History))
	args = append(args, f.Epoch, w.State, op, snap, reset)
	template := ""
	if w.Charge != nil {
		if w.Charge.Template == "" {
			return Charged{}, fmt.Errorf("workitems: checkpoint %s attempt %d: no template to charge", f.Item, f.Attempt)
		}
		template = w.Charge.Template
		args = append(args, "1")
		args = append(args, spendArgs(w.Charge.Spend)...)
	} else {
		args = append(args, "", 0, 0, 0, 0, 0, 0, 0, 0)
	}
	args = append(args, int64(dailyCostTTL.Seconds()), w.SteerTaken, w.Token)
	for _, h := range w.History {
		args = append(args, h)
	}
	res, err := saveCheckpoint.Run(ctx, s.rdb, []string{s.k.epoch(f.Item, f.Attempt), s.k.ckpt(f.Item, f.Attempt),
		s.k.hist(f.Item, f.Attempt), s.k.snap(f.Item, f.Attempt), s.k.charged(f.Item, f.Attempt),
		s.k.dailyCost(template, s.Now().UTC().Format(time.DateOnly)), s.k.steer(f.Item),
		s.k.ckptToken(f.Item, f.Attempt)}, args...).Slice()
	if err != nil {
		return Charged{}, fmt.Errorf("workitems: checkpoint %s attempt %d: %w", f.Item, f.Attempt, err)
	}
	if n, _ := res[0].(int64); n < 0 {
		return Charged{}, fmt.Errorf("workitems: checkpoint %s attempt %d epoch %d: %w", f.Item, f.Attempt, f.Epoch, workitems.ErrLeaseLost)
	}
	if len(res) < 3 {
		return Charged{}, nil
	}
	after, before := parseSpend(replyStrings(res[1])), parseSpend(replyStrings(res[2]))
	return Charged{Total: after, Delta: workitems.Remainder(after, before)}, nil
}

// LoadCheckpoint returns an attempt's last checkpoint (nil when none) and its history.
func (s *Store) LoadCheckpoint(ctx context.Context, item string, n int) ([]byte, [][]byte, error) {
	var st *redis.StringCmd
	var hist *redis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		st = p.Get(ctx, s.k.ckpt(item, n))
		hist = p.LRange(ctx, s.k.hist(item, n), 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("workitems: load checkpoint %s attempt %d: %w", item, n, err)
	}
	var state []byte
	if b, err := st.Bytes(); err == nil {
		state = b
	}
	out := make([][]byte, 0, len(hist.Val()))
	for _, h := range hist.Val() {
		out = append(out, []byte(h))
	}
	return state, out, nil
}
