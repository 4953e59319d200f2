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

// spendFields is the order of a Spend's fields in the charged hash and in the scripts' ARGV.
var spendFields = []string{"wall_time_ns", "model_calls", "tool_calls", "input_tokens", "cached_input_tokens",
	"output_tokens", "cost_usd", "steps"}

func spendArgs(s workitems.Spend) []any {
	return []any{int64(s.WallTime), s.ModelCalls, s.ToolCalls, s.InputTokens, s.CachedInputTokens,
		s.OutputTokens, strconv.FormatFloat(s.CostUSD, 'g', -1, 64), s.Steps}
}

// parseSpend reads values in spendFields order ("" or absent: 0).
func parseSpend(vals []string) workitems.Spend {
	n := func(i int) int64 {
		if i >= len(vals) {
			return 0
		}
		v, _ := strconv.ParseFloat(vals[i], 64) // the script returns numbers as %.17g
		return int64(v)
	}
	var cost float64
	if len(vals) > 6 {
		cost, _ = strconv.ParseFloat(vals[6], 64)
	}
	return workitems.Spend{WallTime: workitems.Duration(n(0)), ModelCalls: n(1), ToolCalls: n(2), InputTokens: n(3),
		CachedInputTokens: n(4), OutputTokens: n(5), CostUSD: cost, Steps: n(7)}
}

// dailyCostTTL keeps a day's cost key long enough for yesterday's figures to be read.
const dailyCostTTL = 72 * time.Hour

// Charge asks a checkpoint write to charge the attempt's spend so far to its template.
type Charge struct {
	Template string
	Spend    workitems.Spend // the attempt's spend so far (what its meter reads), not a delta
}

// Charged is what a charged checkpoint write left: the attempt's charged spend after it, and
// what this write charged.
type Charged struct {
	Total, Delta workitems.Spend
}

// SaveChargedCheckpoint writes an attempt's checkpoint and appends history under the fence, like
// SaveCheckpoint, and in the same atomic write charges spend — the attempt's spend so far — to
// the template's daily cost and the attempt's charged record (see the note on charging). It
// returns the attempt's charged spend after the write and what this write charged. Under a stale
// fence it writes and charges nothing and returns ErrLeaseLost.
func (s *Store) SaveChargedCheckpoint(ctx context.Context, f *Fence, template string, spend workitems.Spend, state []byte,
	history ...[]byte) (charged, delta workitems.Spend, err error) {
	c, err := s.WriteChargedCheckpoint(ctx, f, CheckpointWrite{State: state, History: history,
		Charge: &Charge{Template: template, Spend: spend}})
	return c.Total, c.Delta, err
}

// ChargedSpend returns what the checkpoints of attempt n of an item have charged so far.
func (s *Store) ChargedSpend(ctx context.Context, item string, n int) (workitems.Spend, error) {
	vals, err := s.rdb.HMGet(ctx, s.k.charged(item, n), spendFields...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return workitems.Spend{}, fmt.Errorf("workitems: charged spend of %s attempt %d: %w", item, n, err)
	}
	strs := make([]string, len(vals))
	for i, v := range vals {
		strs[i], _ = v.(string)
	}
	return parseSpend(strs), nil
}

// Uncharged returns what of an attempt's spend its checkpoints have not charged (per field,
// never negative): what RecordExit charges.
func Uncharged(spend, charged workitems.Spend) workitems.Spend {
	return workitems.Remainder(spend, charged)
}

// chargedAfter returns the per-field maximum of a and b.
func chargedAfter(a, b workitems.Spend) workitems.Spend { return a.Add(workitems.Remainder(b, a)) }

// chargedFields renders a Spend for HSET in spendFields order.
func chargedFields(s workitems.Spend) []any {
	args := spendArgs(s)
	out := make([]any, 0, 2*len(args))
	for i, name := range spendFields {
		out = append(out, name, args[i])
	}
	return out
}

// replyStrings reads a Lua reply's array of strings.
func replyStrings(v any) []string {
	raw, _ := v.([]any)
	out := make([]string, len(raw))
	for i, x := range raw {
		out[i], _ = x.(string)
	}
	return out
}

// chargeLua defines charge(charged, daily, argv, base, ttl), the one rise-only charge both the
// checkpoint and ChargeRunning run: each field of the charged hash rises to the spend given in
// argv[base+1..base+8] (spendFields order), never falls, and what cost_usd rose by is added to
// the daily cost key (its TTL set to ttl). It returns the fields after and before, as strings.
const chargeLua = `
local function charge(charged, daily, argv, base, ttl)
  local names = {'wall_time_ns', 'model_calls', 'tool_calls', 'input_tokens', 'cached_input_tokens', 'output_tokens', 'cost_usd', 'steps'}
  local old = redis.call('HMGET', charged, unpack(names))
  local after, before = {}, {}
  for i, name in ipairs(names) do
    local o = tonumber(old[i]) or 0
    before[i] = string.format('%.17g', o)
    local v = tonumber(argv[base + i]) or 0
    if v > o then
      redis.call('HSET', charged, name, argv[base + i])
      if name == 'cost_usd' then
        redis.call('INCRBYFLOAT', daily, string.format('%.17g', v - o))
        redis.call('EXPIRE', daily, ttl)
      end
      o = v
    end
    after[i] = string.format('%.17g', o)
  end
  return after, before
end
`
