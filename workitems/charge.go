package workitems

// Spend is charged while an attempt runs, not only when it exits: every checkpoint that carries
// the attempt's spend so far charges what no earlier write charged — to the template's daily cost
// (what the scheduler's daily cap reads) and to a per-attempt "charged" record — in the same
// fenced Lua call that writes the checkpoint. RecordExit then charges only the rest. A resumed
// attempt continues from the charged record (its meter starts from the checkpoint's spend, which
// equals it), a fenced-out writer charges nothing, and a charge never goes down, so no spend is
// counted twice.

// Remainder returns, per field, how much spend exceeds charged (never negative): what is left to
// charge.
func Remainder(spend, charged Spend) Spend {
	d := spend.Sub(charged)
	d.WallTime = max(d.WallTime, 0)
	d.ModelCalls = max(d.ModelCalls, 0)
	d.ToolCalls = max(d.ToolCalls, 0)
	d.InputTokens = max(d.InputTokens, 0)
	d.CachedInputTokens = max(d.CachedInputTokens, 0)
	d.OutputTokens = max(d.OutputTokens, 0)
	d.CostUSD = max(d.CostUSD, 0)
	d.Steps = max(d.Steps, 0)
	return d
}
