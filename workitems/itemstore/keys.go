package itemstore

import (
	"fmt"

	"outerloop/workitems"
)

// keys builds every Redis key of the store, all under one prefix (default "ol:") so that
// deployments and tests can share a server. Keys of one item are not hash-tagged: the store
// targets a single Redis primary (see README), as the indexes span items.
type keys struct{ p string }

func (k keys) item(id string) string      { return k.p + "item:" + id }
func (k keys) events(id string) string    { return k.p + "events:" + id }
func (k keys) allEvents() string          { return k.p + "events" }
func (k keys) items() string              { return k.p + "items" }     // zset: id → created (unix ms)
func (k keys) byTemplate(t string) string { return k.p + "tmpl:" + t } // zset: id → created (unix ms)
// legacyState is the unordered set per state that stores before index version 2 kept (see
// MigrateIndexes); nothing writes it any more.
func (k keys) legacyState(s workitems.State) string { return k.p + "state:" + string(s) }

// The ordered indexes (index version 2). Every list reads its page from one of them.
func (k keys) state(s workitems.State) string { return k.p + "ix:state:" + string(s) } // zset: id → created (unix ms)
func (k keys) tmplState(t string, s workitems.State) string { // zset: id → created (unix ms)
	return k.p + "ix:ts:" + string(s) + ":" + t
}
func (k keys) ended(s workitems.State) string      { return k.p + "ix:ended:" + string(s) }  // zset: id → entered terminal s (unix ms)
func (k keys) spend() string                       { return k.p + "ix:spend" }               // zset: id → spendScore
func (k keys) tmplSpend(t string) string           { return k.p + "ix:tspend:" + t }         // zset: id → spendScore
func (k keys) stateSpend(s workitems.State) string { return k.p + "ix:sspend:" + string(s) } // zset: id → spendScore
func (k keys) tmplStateSpend(t string, s workitems.State) string { // zset: id → spendScore
	return k.p + "ix:tsspend:" + string(s) + ":" + t
}
func (k keys) indexVersion() string        { return k.p + "index_version" }
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

// ckptToken holds the token of attempt n's last applied checkpoint write (a retry's dedup).
func (k keys) ckptToken(id string, n int) string { return fmt.Sprintf("%sckpttok:%s:%d", k.p, id, n) }

// charged is a hash of what an attempt's checkpoints charged (charge.go's spendFields).
func (k keys) charged(id string, n int) string { return fmt.Sprintf("%scharged:%s:%d", k.p, id, n) }

// patch holds attempt n's delivered patch (bounded by the delivery flow; see Delivery).
func (k keys) patch(id string, n int) string { return fmt.Sprintf("%spatch:%s:%d", k.p, id, n) }

// delivered holds a template's last delivered patch-mode result (base, tree, item), for
// "nothing new" across ticks.
func (k keys) delivered(template string) string { return k.p + "delivered:" + template }

// waits holds the waiting items by when the poller looks next: a zset id → unix ms.
func (k keys) waits() string { return k.p + "waits" }

// waitKinds counts the waiting items by wait kind (a hash kind → n).
func (k keys) waitKinds() string { return k.p + "waitkinds" }

// waitSHA holds the items waiting on one pushed commit (a set), so a forge's event about that
// commit finds them in O(1).
func (k keys) waitSHA(sha string) string { return k.p + "waitsha:" + sha }

// waitPR holds the items waiting on one pull request (a set): forge, repository and number.
func (k keys) waitPR(forge, repo string, n int) string {
	return fmt.Sprintf("%swaitpr:%s:%s#%d", k.p, forge, repo, n)
}

// ofItem lists every key that belongs to one item with attempts 1..attempts alone (not the
// indexes it is a member of): Store.Delete removes them. A new per-item key goes here too.
func (k keys) ofItem(id string, attempts int) []string {
	out := []string{k.item(id), k.events(id), k.steer(id)}
	for n := 1; n <= attempts; n++ {
		out = append(out, k.epoch(id, n), k.lease(id, n), k.ckpt(id, n), k.hist(id, n), k.patch(id, n), k.snap(id, n), k.charged(id, n), k.ckptToken(id, n))
	}
	return out
}
