package workitems

// A running attempt's spend is charged between checkpoints too: a step that runs for minutes
// writes no checkpoint, and an execution interrupted in the middle of it (SIGTERM, a crash)
// would otherwise lose the wall time it ran — the resumed execution started its meter from the
// last checkpoint. ChargeRunning raises the attempt's charged record to the meter's reading
// without touching the checkpoint; a resumed execution starts its meter from the larger of the
// checkpoint's spend and the charged record, so the interrupted time stays charged to the
// attempt and, at its exit, to the item.

// AtLeast returns, per field, the larger of s and o: the spend a resumed execution starts from,
// given its checkpoint's spend and what the attempt was charged.
func (s Spend) AtLeast(o Spend) Spend { return s.Add(Remainder(o, s)) }
