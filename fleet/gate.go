package fleet

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"outerloop/workitems"
	"outerloop/workitems/config"
)

// Gate is the fleet limits in Redis (see the package doc).
type Gate struct {
	rdb    redis.UniversalClient
	k      keys
	clock  workitems.Clock
	paused func(ctx context.Context, template string) (bool, error) // nil: pauses hold nothing
}

// NewGate returns the gate under the store's prefix.
func NewGate(rdb redis.UniversalClient, prefix string, clock workitems.Clock) *Gate {
	if clock == nil {
		clock = workitems.SystemClock{}
	}
	return &Gate{rdb: rdb, k: keys{p: prefix}, clock: clock}
}

// HoldWhilePaused makes Acquire hold the items of a paused template (paused reads the pause:
// the scheduler's queue); the Admitter lets them go once it is resumed.
func (g *Gate) HoldWhilePaused(paused func(ctx context.Context, template string) (bool, error)) {
	g.paused = paused
}

// Release takes an item out of the gate altogether (its slot, reservation and place in line):
// the Admitter's sweep, for an item the store says has moved on or is gone.
func (g *Gate) Release(ctx context.Context, template, id string) error {
	_, err := g.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SRem(ctx, g.k.running(template), id)
		p.SRem(ctx, g.k.reserved(template), id)
		p.ZRem(ctx, g.k.held(template), id)
		p.SRem(ctx, g.k.hasPR(template), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fleet: template %s: release %s: %w", template, id, err)
	}
	return nil
}

// Running returns the items holding a slot of the template.
func (g *Gate) Running(ctx context.Context, template string) ([]string, error) {
	ids, err := g.rdb.SMembers(ctx, g.k.running(template)).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: template %s: running: %w", template, err)
	}
	return ids, nil
}

// Line returns the first n items waiting in the template's line, in order.
func (g *Gate) Line(ctx context.Context, template string, n int) ([]string, error) {
	ids, err := g.rdb.ZRange(ctx, g.k.held(template), 0, int64(n)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: template %s: line: %w", template, err)
	}
	return ids, nil
}

// hour is the window of prs_per_hour.
const hour = time.Hour

// lookAhead bounds how far down the line one admission looks for items that open no pull
// request while the head waits for a place (a round's cost stays O(lookAhead)).
const lookAhead = 1000

// freeLua is the one test of the limits both scripts share: may one more item run, and, when
// it may open a pull request (needs), one more pull request be counted? A failure streak at
// pause_after_failures lets nothing start: the transition that ends the tripping failure and
// frees its slot is one MULTI with the streak's count, so no grant falls between the trip and
// the Admitter's pause.
//
//	KEYS: held, haspr, running, reserved, prs, opened, repos, streak
//	ARGV[1] concurrency, ARGV[2] max_open_prs, ARGV[3] prs_per_hour, ARGV[4] now (ms),
//	ARGV[5] pause_after_failures
const freeLua = `
local function free(needs)
  local pauseAfter = tonumber(ARGV[5])
  if pauseAfter > 0 and tonumber(redis.call('GET', KEYS[8]) or '0') >= pauseAfter then return false end
  local conc = tonumber(ARGV[1])
  if conc > 0 and redis.call('SCARD', KEYS[3]) >= conc then return false end
  if not needs then return true end
  local reserved = redis.call('SCARD', KEYS[4])
  local maxOpen = tonumber(ARGV[2])
  if maxOpen > 0 and redis.call('HLEN', KEYS[5]) + reserved >= maxOpen then return false end
  local perHour = tonumber(ARGV[3])
  if perHour > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', tonumber(ARGV[4]) - ` + "3600000" + `)
    if redis.call('ZCARD', KEYS[6]) + reserved >= perHour then return false end
  end
  return true
end
local function take(item, needs)
  redis.call('ZREM', KEYS[1], item)
  redis.call('SREM', KEYS[2], item)
  redis.call('SADD', KEYS[3], item)
  if needs then redis.call('SADD', KEYS[4], item) end
end
`

// acquireScript lets an item's attempt run, or holds it.
//
//	ARGV[6] item, ARGV[7] order (µs), ARGV[8] needs a PR (1/0), ARGV[9] already running (1/0),
//	ARGV[10] repository, ARGV[11] its open pull request's key ("" with none)
//
// Returns 1 when the item may run, 0 when it is held.
var acquireScript = redis.NewScript(freeLua + `
local item, needs = ARGV[6], ARGV[8] == '1'
-- The item's record may call a pull request open that the forge says closed (prs forgot it):
-- it needs a new place then.
if not needs and ARGV[11] ~= '' and redis.call('HEXISTS', KEYS[5], ARGV[11]) == 0 then needs = true end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[7], ARGV[10], item) end
if redis.call('SISMEMBER', KEYS[3], item) == 1 then return 1 end
if ARGV[9] == '1' then take(item, needs) return 1 end
local head = redis.call('ZRANGE', KEYS[1], 0, 0)
if (#head == 0 or head[1] == item) and free(needs) then take(item, needs) return 1 end
-- One that opens no pull request passes a line that waits for pull request places.
if not needs and free(false) and not free(true) then take(item, needs) return 1 end
redis.call('ZADD', KEYS[1], 'NX', ARGV[7], item)
if needs then redis.call('SREM', KEYS[2], item) else redis.call('SADD', KEYS[2], item) end
return 0
`)

// holdScript holds a new item (the tick's: its task is enqueued when the Admitter grants it).
//
//	KEYS: held, repos
//	ARGV[1] item, ARGV[2] order (µs), ARGV[3] repository
var holdScript = redis.NewScript(`
redis.call('ZADD', KEYS[1], 'NX', ARGV[2], ARGV[1])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
return 1
`)

// admitScript grants held items, in order, while the limits let them go.
//
//	ARGV[6] the most to grant, ARGV[7] how far down the line to look
//
// Returns the granted items.
var admitScript = redis.NewScript(freeLua + `
local granted, prBlocked = {}, false
local line = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[7]) - 1)
for _, item in ipairs(line) do
  if #granted >= tonumber(ARGV[6]) or not free(false) then break end
  local needs = redis.call('SISMEMBER', KEYS[2], item) == 0
  -- In order: once one waits for a pull request place, those behind it that need one wait
  -- too; one that needs none may go past.
  if needs and not prBlocked and not free(true) then prBlocked = true end
  if not (needs and prBlocked) then
    take(item, needs)
    granted[#granted + 1] = item
  end
end
return granted
`)

// limitArgs are ARGV[1..5] of the scripts that grant.
func (g *Gate) limitArgs(f *config.Fleet) []any {
	var c, m, h, p int
	if f != nil {
		c, m, h, p = f.Concurrency, f.MaxOpenPRs, f.PRsPerHour, f.PauseAfterFailures
	}
	return []any{c, m, h, g.clock.Now().UnixMilli(), p}
}

// NeedsPR reports whether an attempt of it may open a pull request of t: t delivers pull
// requests and the item has none open.
func NeedsPR(t *config.Template, it *workitems.Item) bool {
	if t.Deliver.Mode != workitems.DeliverPullRequest {
		return false
	}
	d := it.Delivery
	return d == nil || d.PR == nil || d.PR.State != workitems.PROpen
}

// order is where an item waits: by creation, to the microsecond (exact in a float score until
// the year 2255), so a tick's items go in the order it made them.
func order(it *workitems.Item) int64 { return it.CreatedAt.UnixMicro() }

// Acquire asks whether the item's attempt may run now under t's limits: true takes a slot
// (kept until the item leaves running and verifying); false holds the item in order, and the
// Admitter enqueues it when its turn comes. An item already running (a resumed attempt) always
// may. A template without limits always may, and nothing is written.
func (g *Gate) Acquire(ctx context.Context, t *config.Template, it *workitems.Item) (bool, error) {
	running := it.State == workitems.StateRunning || it.State == workitems.StateVerifying
	if !running && g.paused != nil {
		// A paused fleet (its breaker's pause, or a person's) starts no new attempt: the item
		// waits in line until the template is resumed.
		paused, err := g.paused(ctx, t.Name)
		if err != nil {
			return false, fmt.Errorf("fleet: template %s: acquire %s: %w", t.Name, it.ID, err)
		}
		if paused {
			return false, g.Hold(ctx, t, it)
		}
	}
	if !t.Fleet.Limited() {
		if running || t.Fleet == nil || t.Fleet.PauseAfterFailures == 0 {
			return true, nil
		}
		// No limit's script runs here, so the tripped breaker is read apart: nothing starts
		// between the trip and the Admitter's pause.
		n, err := g.Streak(ctx, t.Name)
		if err != nil {
			return false, fmt.Errorf("fleet: template %s: acquire %s: %w", t.Name, it.ID, err)
		}
		if n >= t.Fleet.PauseAfterFailures {
			return false, g.Hold(ctx, t, it)
		}
		return true, nil
	}
	prKey := ""
	if d := it.Delivery; d != nil && d.PR != nil && d.PR.State == workitems.PROpen {
		prKey = PRKey(it.Repo, d.PR.Number)
	}
	args := append(g.limitArgs(t.Fleet), it.ID, order(it), flag(NeedsPR(t, it)), flag(running), it.Repo, prKey)
	n, err := acquireScript.Run(ctx, g.rdb, g.k.gateKeys(t.Name), args...).Int()
	if err != nil {
		return false, fmt.Errorf("fleet: template %s: acquire %s: %w", t.Name, it.ID, err)
	}
	return n == 1, nil
}

// Hold puts a new item of a limited template in line without a task; the Admitter enqueues it
// when its turn comes.
func (g *Gate) Hold(ctx context.Context, t *config.Template, it *workitems.Item) error {
	keys := []string{g.k.held(t.Name), g.k.repos(t.Name)}
	if err := holdScript.Run(ctx, g.rdb, keys, it.ID, order(it), it.Repo).Err(); err != nil {
		return fmt.Errorf("fleet: template %s: hold %s: %w", t.Name, it.ID, err)
	}
	return nil
}

// Record notes a repository's newest item (the fleet view), for a template without limits.
func (g *Gate) Record(ctx context.Context, t *config.Template, it *workitems.Item) error {
	if it.Repo == "" {
		return nil
	}
	if err := g.rdb.HSet(ctx, g.k.repos(t.Name), it.Repo, it.ID).Err(); err != nil {
		return fmt.Errorf("fleet: template %s: record %s: %w", t.Name, it.ID, err)
	}
	return nil
}

// Admit grants up to max held items of t, in order, as far as its limits allow, and returns
// them: their tasks are the caller's to enqueue (an item granted and never enqueued is found
// by the queue's reconcile, and its task passes Acquire: it holds the slot).
func (g *Gate) Admit(ctx context.Context, t *config.Template, max int) ([]string, error) {
	args := append(g.limitArgs(t.Fleet), max, lookAhead)
	ids, err := admitScript.Run(ctx, g.rdb, g.k.gateKeys(t.Name), args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("fleet: template %s: admit: %w", t.Name, err)
	}
	return ids, nil
}

// Held reports whether the item waits its turn in the gate (its task is not enqueued on
// purpose: the queue's reconcile leaves it).
func (g *Gate) Held(ctx context.Context, template, id string) (bool, error) {
	err := g.rdb.ZScore(ctx, g.k.held(template), id).Err()
	if err == redis.Nil {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fleet: template %s: held %s: %w", template, id, err)
	}
	return true, nil
}

// Usage is what holds a template's limits now.
type Usage struct {
	Held, Running, Reserved, OpenPRs, OpenedLastHour int64
	Streak                                           int64
}

// Usage reads a template's counts.
func (g *Gate) Usage(ctx context.Context, template string) (Usage, error) {
	now := g.clock.Now().UnixMilli()
	var c [6]*redis.IntCmd
	var s *redis.StringCmd
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		c[0] = p.ZCard(ctx, g.k.held(template))
		c[1] = p.SCard(ctx, g.k.running(template))
		c[2] = p.SCard(ctx, g.k.reserved(template))
		c[3] = p.HLen(ctx, g.k.prs(template))
		c[4] = p.ZCount(ctx, g.k.opened(template), strconv.FormatInt(now-hour.Milliseconds()+1, 10), "+inf")
		s = p.Get(ctx, g.k.streak(template))
		return nil
	})
	if err != nil && err != redis.Nil {
		return Usage{}, fmt.Errorf("fleet: template %s: usage: %w", template, err)
	}
	u := Usage{Held: c[0].Val(), Running: c[1].Val(), Reserved: c[2].Val(), OpenPRs: c[3].Val(), OpenedLastHour: c[4].Val()}
	u.Streak, _ = s.Int64()
	return u, nil
}

// OpenPRs returns the template's open pull requests: "<repo>#<n>" → item.
func (g *Gate) OpenPRs(ctx context.Context, template string) (map[string]string, error) {
	m, err := g.rdb.HGetAll(ctx, g.k.prs(template)).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: template %s: open pull requests: %w", template, err)
	}
	return m, nil
}

// PRClosed forgets an open pull request that closed (read from the forge by the Admitter).
func (g *Gate) PRClosed(ctx context.Context, template, key string) error {
	if err := g.rdb.HDel(ctx, g.k.prs(template), key).Err(); err != nil {
		return fmt.Errorf("fleet: template %s: pull request %s closed: %w", template, key, err)
	}
	return nil
}

// Repos returns the template's repositories with their newest item (one hash: O(the fleet's
// size), not its history; scheduler/fleetview sorts and pages it).
func (g *Gate) Repos(ctx context.Context, template string) (map[string]string, error) {
	m, err := g.rdb.HGetAll(ctx, g.k.repos(template)).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: template %s: repositories: %w", template, err)
	}
	return m, nil
}

// Streak returns the template's failure streak: consecutive items ended failed or escalated.
func (g *Gate) Streak(ctx context.Context, template string) (int, error) {
	n, err := g.rdb.Get(ctx, g.k.streak(template)).Int()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fleet: template %s: breaker: %w", template, err)
	}
	return n, nil
}

// resetScript takes n off the streak (never below 0): failures counted while the breaker
// paused the template stay counted.
var resetScript = redis.NewScript(`
local v = redis.call('DECRBY', KEYS[1], ARGV[1])
if v < 0 then redis.call('SET', KEYS[1], 0) end
return 1
`)

// ResetStreak takes the n failures that tripped the breaker off the streak, once the template
// is paused: a breaker that could not pause keeps them and trips again next round.
func (g *Gate) ResetStreak(ctx context.Context, template string, n int) error {
	if err := resetScript.Run(ctx, g.rdb, []string{g.k.streak(template)}, n).Err(); err != nil {
		return fmt.Errorf("fleet: template %s: breaker reset: %w", template, err)
	}
	return nil
}

// turn takes key's turn for ttl: true for the one caller of the deployment that got it. A
// holder that dies lets the turn lapse with ttl.
func (g *Gate) turn(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	ok, err := g.rdb.SetNX(ctx, key, "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("fleet: turn %s: %w", key, err)
	}
	return ok, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
