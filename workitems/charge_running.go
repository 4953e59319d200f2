package workitems

// AtLeast returns, per field, the larger of s and o: the spend a resumed execution starts from,
// given its checkpoint's spend and what the attempt was charged between checkpoints
// (itemstore's ChargeRunning), so time an interrupted execution ran stays charged.
func (s Spend) AtLeast(o Spend) Spend { return s.Add(Remainder(o, s)) }
