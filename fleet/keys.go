package fleet

// keys builds the gate's Redis keys. A template's keys share the hash tag {template}, so a
// script touching several of them runs on one Redis Cluster slot.
type keys struct{ p string }

func (k keys) base(template string) string     { return k.p + "fleet:{" + template + "}:" }
func (k keys) held(template string) string     { return k.base(template) + "held" }     // zset: item → created (µs)
func (k keys) hasPR(template string) string    { return k.base(template) + "haspr" }    // set: held items with an open PR
func (k keys) running(template string) string  { return k.base(template) + "running" }  // set: items holding a slot
func (k keys) reserved(template string) string { return k.base(template) + "reserved" } // set: running items that may open a PR
func (k keys) prs(template string) string      { return k.base(template) + "prs" }      // hash: "<repo>#<n>" → item
func (k keys) opened(template string) string   { return k.base(template) + "opened" }   // zset: "<repo>#<n>" → opened (ms)
func (k keys) streak(template string) string   { return k.base(template) + "streak" }   // int: consecutive failures
func (k keys) repos(template string) string    { return k.base(template) + "repos" }    // hash: repository → newest item
func (k keys) prCheck(template string) string  { return k.base(template) + "prcheck" }  // string, expiring: a PR check's turn
func (k keys) round() string                   { return k.p + "fleet:round" }           // string, expiring: a round's turn
func (k keys) gateKeys(template string) []string {
	return []string{k.held(template), k.hasPR(template), k.running(template), k.reserved(template), k.prs(template), k.opened(template), k.repos(template), k.streak(template)}
}
