package workitems

import "fmt"

// keys builds every Redis key of the store, all under one prefix (default "ol:") so that
// deployments and tests can share a server. Keys of one item are not hash-tagged: the store
// targets a single Redis primary (see README), as the indexes span items.
type keys struct{ p string }

func (k keys) item(id string) string       { return k.p + "item:" + id }
func (k keys) events(id string) string     { return k.p + "events:" + id }
func (k keys) allEvents() string           { return k.p + "events" }
func (k keys) items() string               { return k.p + "items" }     // zset: id → created (unix ms)
func (k keys) byTemplate(t string) string  { return k.p + "tmpl:" + t } // zset: id → created (unix ms)
func (k keys) state(s State) string        { return k.p + "state:" + string(s) }
func (k keys) open(template string) string { return k.p + "open:" + template }
func (k keys) escalated() string           { return k.p + "escalated" } // zset: id → escalated at (unix ms)
func (k keys) counts() string              { return k.p + "counts" }    // hash: template|state → n
func (k keys) lastClosed() string          { return k.p + "last_closed" }
func (k keys) steer(id string) string      { return k.p + "steer:" + id }
func (k keys) dailyCost(template, day string) string {
	return k.p + "cost:" + template + ":" + day
}
func (k keys) epoch(id string, n int) string { return fmt.Sprintf("%sepoch:%s:%d", k.p, id, n) }
func (k keys) lease(id string, n int) string { return fmt.Sprintf("%slease:%s:%d", k.p, id, n) }
func (k keys) ckpt(id string, n int) string  { return fmt.Sprintf("%sckpt:%s:%d", k.p, id, n) }
func (k keys) hist(id string, n int) string  { return fmt.Sprintf("%shist:%s:%d", k.p, id, n) }
func (k keys) snap(id string, n int) string  { return fmt.Sprintf("%ssnap:%s:%d", k.p, id, n) } // workspace diff
