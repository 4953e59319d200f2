package workitems

// WaitSeqs is the number of wait decisions the item has recorded, so a new wait's Seq is new
// even after the item left waiting and came back (a retry's next attempt).
func (it *Item) WaitSeqs() int64 {
	var n int64
	for _, d := range it.Decisions {
		if d.Outcome == OutcomeWait {
			n++
		}
	}
	return n
}
