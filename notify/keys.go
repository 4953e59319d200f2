package notify

// keys builds every Redis key of the outbox, all under the store's prefix.
type keys struct{ p string }

func (k keys) deliveryPrefix() string    { return k.p + "notify:d:" }
func (k keys) delivery(id string) string { return k.deliveryPrefix() + id }  // hash: see deliveryFields
func (k keys) due() string               { return k.p + "notify:due" }       // zset: id → due at (unix ms)
func (k keys) inflight() string          { return k.p + "notify:inflight" }  // zset: id → claim expires (unix ms)
func (k keys) dead() string              { return k.p + "notify:dead" }      // zset: id → dead since (unix ms)
func (k keys) delivered() string         { return k.p + "notify:delivered" } // zset: id → delivered at (unix ms)

// byState returns the index of deliveries in state s.
func (k keys) byState(s State) string {
	switch s {
	case StatePending:
		return k.due()
	case StateInflight:
		return k.inflight()
	case StateDead:
		return k.dead()
	default:
		return k.delivered()
	}
}
