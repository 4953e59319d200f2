package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
)

// The branch ledger is what makes "a person's commits survive" a fact outerloop knows rather
// than something it reads from the branch: which commits outerloop itself pushed to a branch,
// and whether someone else has committed to it since. What is on the branch (and what a pull
// request's body says) is anyone's to write: it is compared with the ledger, never trusted as
// the ledger.

// BranchKey names one branch on one forge.
type BranchKey struct {
	Forge, Repo, Branch string
}

func (k BranchKey) String() string { return k.Forge + ":" + k.Repo + "@" + k.Branch }

// BranchRecord is what the ledger knows of a branch.
type BranchRecord struct {
	// Pushed are the commits outerloop pushed (or was about to push) to the branch, newest
	// first, at least the last MaxPushedKept (a few more between trims).
	Pushed []string
	// Hold is set once someone else committed to the branch; it stays until the branch is
	// handed back or deleted.
	Hold *workitems.BranchHold
}

// Ours reports whether outerloop pushed sha to the branch.
func (r BranchRecord) Ours(sha string) bool {
	for _, p := range r.Pushed {
		if p == sha {
			return true
		}
	}
	return false
}

// Branches is the branch ledger: small and consumer-owned (RedisBranches is the deployment's).
type Branches interface {
	Branch(ctx context.Context, k BranchKey) (BranchRecord, error)
	// Pushing records sha as outerloop's before it is pushed: a process that dies between the
	// push and a later record would otherwise take its own commit for a person's.
	Pushing(ctx context.Context, k BranchKey, sha string) error
	// Hold records that someone else holds the branch; first is true when it was not held
	// before (the pull request is told once).
	Hold(ctx context.Context, k BranchKey, h workitems.BranchHold) (first bool, err error)
	// Once reports whether what is asked about the branch for the first time since it was last
	// held or handed back (a comment is posted once, not every night).
	Once(ctx context.Context, k BranchKey, what string) (first bool, err error)
	// HandBack ends a hold: a person asked outerloop to take the branch back as it is at head,
	// whose commits count as outerloop's from now on (so the next push may replace them). held
	// says there was a hold to end.
	HandBack(ctx context.Context, k BranchKey, head string) (held bool, err error)
	// Forget drops what the ledger knows of the branch (it was deleted); existed says there was
	// a record (of two who deleted the same branch, one finds it).
	Forget(ctx context.Context, k BranchKey) (existed bool, err error)
}

// MaxPushedKept bounds the commits the ledger keeps per branch: enough for every attempt of
// many nights; an older commit of outerloop's that a person built on reads as theirs (held,
// never rewritten: the safe side).
const MaxPushedKept = 64

// DefaultBranchTTL is how long the ledger keeps a branch nothing was pushed to.
const DefaultBranchTTL = 180 * 24 * time.Hour

// RedisBranches is the ledger in Redis: one hash per branch (field "hold", and "p:<sha>" per
// pushed commit with its time), every change one script.
type RedisBranches struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	clock  workitems.Clock
}

// NewRedisBranches returns the ledger under prefix (ttl <= 0: DefaultBranchTTL).
func NewRedisBranches(rdb redis.UniversalClient, prefix string, ttl time.Duration, clock workitems.Clock) *RedisBranches {
	if ttl <= 0 {
		ttl = DefaultBranchTTL
	}
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &RedisBranches{rdb: rdb, prefix: prefix, ttl: ttl, clock: clock}
}

// key is the one place the ledger's Redis keys are built.
func (b *RedisBranches) key(k BranchKey) string {
	return b.prefix + "publish:branch:" + k.Forge + ":" + strings.ToLower(k.Repo) + ":" + k.Branch
}

const (
	fieldHold   = "hold"
	pushedField = "p:"
	onceField   = "once:"
)

// Branch implements Branches.
func (b *RedisBranches) Branch(ctx context.Context, k BranchKey) (BranchRecord, error) {
	m, err := b.rdb.HGetAll(ctx, b.key(k)).Result()
	if err != nil {
		return BranchRecord{}, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: read the ledger of %s: %w", k, err))
	}
	var rec BranchRecord
	type pushed struct {
		sha string
		at  int64
	}
	var ps []pushed
	for f, v := range m {
		if sha, ok := strings.CutPrefix(f, pushedField); ok {
			var at int64
			fmt.Sscan(v, &at)
			ps = append(ps, pushed{sha, at})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].at > ps[j].at || ps[i].at == ps[j].at && ps[i].sha < ps[j].sha })
	for _, p := range ps {
		rec.Pushed = append(rec.Pushed, p.sha)
	}
	if h := m[fieldHold]; h != "" {
		rec.Hold = &workitems.BranchHold{}
		if err := json.Unmarshal([]byte(h), rec.Hold); err != nil {
			return BranchRecord{}, fmt.Errorf("publish: the ledger's hold of %s: %w", k, err)
		}
	}
	return rec, nil
}

// pushingScript records one pushed commit and keeps the newest ARGV[3] of them, trimming only
// once the hash has 16 fields more (most pushes are one HSET; a read may see up to 16 older
// commits of outerloop's, which are as much outerloop's).
var pushingScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'p:' .. ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if redis.call('HLEN', KEYS[1]) <= tonumber(ARGV[3]) + 16 then return 1 end
local all = redis.call('HGETALL', KEYS[1])
local ps = {}
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == 'p:' then table.insert(ps, {all[i], tonumber(all[i+1])}) end
end
local keep = tonumber(ARGV[3])
if #ps > keep then
  table.sort(ps, function(a, b) return a[2] > b[2] end)
  for i = keep + 1, #ps do redis.call('HDEL', KEYS[1], ps[i][1]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`)

// Pushing implements Branches.
func (b *RedisBranches) Pushing(ctx context.Context, k BranchKey, sha string) error {
	err := pushingScript.Run(ctx, b.rdb, []string{b.key(k)}, sha, b.clock.Now().UnixNano(), MaxPushedKept, b.ttl.Milliseconds()).Err()
	if err != nil {
		return workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: record the push of %s to %s: %w", sha, k, err))
	}
	return nil
}

// holdScript sets the hold and says whether there was none.
var holdScript = redis.NewScript(`
local had = redis.call('HEXISTS', KEYS[1], 'hold')
redis.call('HSET', KEYS[1], 'hold', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return had`)

// Hold implements Branches.
func (b *RedisBranches) Hold(ctx context.Context, k BranchKey, h workitems.BranchHold) (bool, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return false, err
	}
	had, err := holdScript.Run(ctx, b.rdb, []string{b.key(k)}, js, b.ttl.Milliseconds()).Int()
	if err != nil {
		return false, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: record the hold of %s: %w", k, err))
	}
	return had == 0, nil
}

var onceScript = redis.NewScript(`
local first = redis.call('HSETNX', KEYS[1], ARGV[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return first`)

// Once implements Branches.
func (b *RedisBranches) Once(ctx context.Context, k BranchKey, what string) (bool, error) {
	first, err := onceScript.Run(ctx, b.rdb, []string{b.key(k)}, onceField+what, b.ttl.Milliseconds()).Int()
	if err != nil {
		return false, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: the ledger of %s: %w", k, err))
	}
	return first == 1, nil
}

// handBackScript drops the hold and what was said once about it, and takes ARGV[1] as pushed.
var handBackScript = redis.NewScript(`
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'p:' .. ARGV[1], ARGV[2]) end
local held = redis.call('HDEL', KEYS[1], 'hold')
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 5) == 'once:' then redis.call('HDEL', KEYS[1], f) end
end
return held`)

// HandBack implements Branches.
func (b *RedisBranches) HandBack(ctx context.Context, k BranchKey, head string) (bool, error) {
	held, err := handBackScript.Run(ctx, b.rdb, []string{b.key(k)}, head, b.clock.Now().UnixNano()).Int()
	if err != nil {
		return false, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: hand back %s: %w", k, err))
	}
	return held == 1, nil
}

// Forget implements Branches.
func (b *RedisBranches) Forget(ctx context.Context, k BranchKey) (bool, error) {
	n, err := b.rdb.Del(ctx, b.key(k)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, workitems.Classify(workitems.ClassTransient, fmt.Errorf("publish: forget %s: %w", k, err))
	}
	return n > 0, nil
}

// MemoryBranches is the ledger in this process's memory (a Publisher without a shared one).
type MemoryBranches struct {
	mu sync.Mutex
	m  map[BranchKey]*memBranch
}

type memBranch struct {
	pushed []string
	hold   *workitems.BranchHold
	once   map[string]bool
}

// NewMemoryBranches returns an empty ledger.
func NewMemoryBranches() *MemoryBranches { return &MemoryBranches{m: map[BranchKey]*memBranch{}} }

func (b *MemoryBranches) get(k BranchKey) *memBranch {
	k.Repo = strings.ToLower(k.Repo)
	e := b.m[k]
	if e == nil {
		e = &memBranch{once: map[string]bool{}}
		b.m[k] = e
	}
	return e
}

// Branch implements Branches.
func (b *MemoryBranches) Branch(_ context.Context, k BranchKey) (BranchRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(k)
	rec := BranchRecord{Pushed: slices.Clone(e.pushed)}
	if e.hold != nil {
		h := *e.hold
		rec.Hold = &h
	}
	return rec, nil
}

// Pushing implements Branches.
func (b *MemoryBranches) Pushing(_ context.Context, k BranchKey, sha string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(k)
	e.pushed = append([]string{sha}, slices.DeleteFunc(e.pushed, func(p string) bool { return p == sha })...)
	if len(e.pushed) > MaxPushedKept {
		e.pushed = e.pushed[:MaxPushedKept]
	}
	return nil
}

// Hold implements Branches.
func (b *MemoryBranches) Hold(_ context.Context, k BranchKey, h workitems.BranchHold) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(k)
	first := e.hold == nil
	e.hold = &h
	return first, nil
}

// Once implements Branches.
func (b *MemoryBranches) Once(_ context.Context, k BranchKey, what string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(k)
	if e.once[what] {
		return false, nil
	}
	e.once[what] = true
	return true, nil
}

// HandBack implements Branches.
func (b *MemoryBranches) HandBack(_ context.Context, k BranchKey, head string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(k)
	held := e.hold != nil
	e.hold, e.once = nil, map[string]bool{}
	if head != "" && !slices.Contains(e.pushed, head) {
		e.pushed = append([]string{head}, e.pushed...)
	}
	return held, nil
}

// Forget implements Branches.
func (b *MemoryBranches) Forget(_ context.Context, k BranchKey) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k.Repo = strings.ToLower(k.Repo)
	_, ok := b.m[k]
	delete(b.m, k)
	return ok, nil
}
