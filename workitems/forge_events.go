package workitems

import (
	"fmt"
	"strings"
)

// A forge event (a pull request merged or closed, a /outerloop command in a pull request's
// conversation, a review) changes an item only when it is about the item's own delivery — the
// forge, repository and pull request outerloop recorded when it pushed — and its actor has
// write access to that repository. A marker in a pull request's body (publish's hidden
// "outerloop: item=… tree=…") is copied as easily as it is read: it only finds the candidate
// item, it never makes a pull request the item's.

// ForgePR is one pull request on one forge: the forge's key in forges:, the repository
// (owner/name) and the number.
type ForgePR struct {
	Forge  string `json:"forge"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
}

// String is "forge:owner/name#number".
func (p ForgePR) String() string { return fmt.Sprintf("%s:%s#%d", p.Forge, p.Repo, p.Number) }

// Same reports whether p and o are the same pull request: the same forge, the same repository
// whatever its spelling (RepoKey) and the same number. A pull request with no forge, no
// repository or no number is no pull request, the same as none.
func (p ForgePR) Same(o ForgePR) bool {
	if p.Forge == "" || p.Repo == "" || p.Number <= 0 {
		return false
	}
	return p.Forge == o.Forge && RepoKey(p.Repo) == RepoKey(o.Repo) && p.Number == o.Number
}

// DeliverTarget is where a template's deliver: section sends its changes: the key of the forge
// and the repository (owner/name). config.Deliver implements it, a nil one naming neither.
type DeliverTarget interface {
	ForgeRepo() (forge, repo string)
}

// DeliveredPRs returns the pull requests outerloop delivered the item's change to, the wait's
// first and then each attempt's, newest first, without repeats: a delivery that pushed to,
// opened, updated or merged a pull request for this item. A pull request a delivery only found
// to hold the same change (SameAs: another item's, or one the publisher matched by its marker)
// is not the item's. A delivery recorded before deliveries named their forge and repository
// takes them from deliver (the item's template's deliver:, config.Config.ItemTemplate); with deliver
// nil such a record names no pull request.
func (it *Item) DeliveredPRs(deliver DeliverTarget) []ForgePR {
	var out []ForgePR
	add := func(p ForgePR) {
		if p.Forge == "" || p.Repo == "" || p.Number <= 0 {
			return
		}
		for _, o := range out {
			if o.Same(p) {
				return
			}
		}
		out = append(out, p)
	}
	if w := it.Wait; w != nil && w.PR != 0 {
		add(ForgePR{Forge: w.Forge, Repo: w.Repo, Number: w.PR})
	}
	dels := []*Delivery{it.Delivery}
	for i := len(it.Attempts) - 1; i >= 0; i-- {
		dels = append(dels, it.Attempts[i].Delivery)
	}
	for _, d := range dels {
		if d == nil || d.PR == nil || d.SameAs != nil {
			continue
		}
		p := ForgePR{Forge: d.Forge, Repo: d.Repo, Number: d.PR.Number}
		if p.Forge == "" && p.Repo == "" && deliver != nil {
			p.Forge, p.Repo = deliver.ForgeRepo()
		}
		add(p)
	}
	return out
}

// DeliveredTo reports whether pr is one of the item's own pull requests (DeliveredPRs).
func (it *Item) DeliveredTo(pr ForgePR, deliver DeliverTarget) bool {
	for _, p := range it.DeliveredPRs(deliver) {
		if p.Same(pr) {
			return true
		}
	}
	return false
}

// ForgeRefusal is why a forge event that would have changed an item did not: the reason of
// the item's forge_refused event and of the refused audit entry.
type ForgeRefusal string

// The refusals.
const (
	// RefusedNotDelivered: the event is about a pull request that is not the item's own
	// delivery (another number, repository or forge; a pull request whose body only carries the
	// item's marker; an item that delivered none).
	RefusedNotDelivered ForgeRefusal = "not_its_delivery"
	// RefusedPermission: the actor has no write access to the item's repository (or the forge
	// did not say who the actor was).
	RefusedPermission ForgeRefusal = "permission"
)

// NotDeliveredReason says in words that pr is not one of delivered (an item's DeliveredPRs).
func NotDeliveredReason(pr ForgePR, item string, delivered []ForgePR) string {
	if len(delivered) == 0 {
		return fmt.Sprintf("%s is not a pull request of item %s: the item delivered none", pr, item)
	}
	own := make([]string, len(delivered))
	for i, p := range delivered {
		own[i] = p.String()
	}
	return fmt.Sprintf("%s is not a pull request of item %s, which delivered %s", pr, item, strings.Join(own, ", "))
}
