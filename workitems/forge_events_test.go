package workitems_test

import (
	"slices"
	"strings"
	"testing"

	"outerloop/workitems"
)

// An item's pull requests are those its deliveries pushed to, named by forge, repository and
// number; a pull request it only found to hold the same change is not one of them, and an old
// record without its forge and repository is the template's.
func TestAForgeEventIsAboutAnItemOnlyOnTheItemsOwnDelivery(t *testing.T) {
	t.Parallel()
	pr := func(n int) *workitems.PullRequest { return &workitems.PullRequest{Number: n, State: workitems.PROpen} }
	opened := func(n int) *workitems.Delivery {
		return &workitems.Delivery{Outcome: workitems.DeliveryPROpened, Forge: "tea", Repo: "acme/calc", PR: pr(n)}
	}
	withAttempts := func(dels ...*workitems.Delivery) *workitems.Item {
		it := &workitems.Item{ID: "i@1"}
		for n, d := range dels {
			it.Attempts = append(it.Attempts, workitems.Attempt{N: n + 1, Delivery: d})
			it.Delivery = d
		}
		return it
	}
	deliver := &deliverTo{Forge: "tea", Repo: "acme/calc"}
	ev := func(forge, repo string, n int) workitems.ForgePR {
		return workitems.ForgePR{Forge: forge, Repo: repo, Number: n}
	}
	for _, c := range []struct {
		name    string
		it      *workitems.Item
		deliver *deliverTo
		event   workitems.ForgePR
		want    bool
	}{
		{"the same forge, repository and number is the item's", withAttempts(opened(7)), deliver, ev("tea", "acme/calc", 7), true},
		{"the repository's spelling does not matter", withAttempts(opened(7)), deliver, ev("tea", "Acme/Calc.git", 7), true},
		{"another number is not", withAttempts(opened(7)), deliver, ev("tea", "acme/calc", 8), false},
		{"another repository is not", withAttempts(opened(7)), deliver, ev("tea", "mallory/calc", 7), false},
		{"another forge is not", withAttempts(opened(7)), deliver, ev("gh", "acme/calc", 7), false},
		{"an item that delivered no pull request has none", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryPatched}), deliver,
			ev("tea", "acme/calc", 7), false},
		{"an item never delivered has none", &workitems.Item{ID: "i@1"}, deliver, ev("tea", "acme/calc", 7), false},
		{"a pull request found to hold the same change is another item's", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryUnchanged,
			Forge: "tea", Repo: "acme/calc", PR: pr(7), SameAs: &workitems.DeliveryRef{Item: "other@1", PR: pr(7)}}), deliver,
			ev("tea", "acme/calc", 7), false},
		{"an earlier attempt's pull request is still the item's", withAttempts(opened(7), &workitems.Delivery{Outcome: workitems.DeliveryFailed}),
			deliver, ev("tea", "acme/calc", 7), true},
		{"an old record is the template's forge and repository", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: pr(7)}),
			deliver, ev("tea", "acme/calc", 7), true},
		{"an old record is not another repository's", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: pr(7)}),
			deliver, ev("tea", "mallory/calc", 7), false},
		{"an old record without a template names nothing", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: pr(7)}),
			nil, ev("tea", "acme/calc", 7), false},
		{"a recorded forge and repository win over a changed template", withAttempts(opened(7)), &deliverTo{Forge: "tea", Repo: "acme/moved"},
			ev("tea", "acme/calc", 7), true},
		{"the wait's pull request is the item's", &workitems.Item{ID: "i@1", Wait: &workitems.Wait{Forge: "tea", Repo: "acme/calc", PR: 9}},
			nil, ev("tea", "acme/calc", 9), true},
		{"an event without a forge is nobody's", withAttempts(&workitems.Delivery{Outcome: workitems.DeliveryPROpened, PR: pr(7)}),
			&deliverTo{}, ev("", "", 7), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.it.DeliveredTo(c.event, c.deliver); got != c.want {
				t.Fatalf("DeliveredTo(%s) = %v, want %v (delivered %v)", c.event, got, c.want, c.it.DeliveredPRs(c.deliver))
			}
		})
	}
}

// The item's pull requests are listed newest first, once each, and the refusal's words name them.
func TestAnItemsPullRequestsAreListedNewestFirstOnce(t *testing.T) {
	t.Parallel()
	d := func(n int) *workitems.Delivery {
		return &workitems.Delivery{Outcome: workitems.DeliveryPRUpdated, Forge: "tea", Repo: "acme/calc", PR: &workitems.PullRequest{Number: n}}
	}
	it := &workitems.Item{ID: "i@1", Attempts: []workitems.Attempt{{N: 1, Delivery: d(3)}, {N: 2, Delivery: d(5)}, {N: 3, Delivery: d(5)}}, Delivery: d(5)}
	got := it.DeliveredPRs(nil)
	want := []workitems.ForgePR{{Forge: "tea", Repo: "acme/calc", Number: 5}, {Forge: "tea", Repo: "acme/calc", Number: 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("DeliveredPRs = %v, want %v", got, want)
	}
	msg := workitems.NotDeliveredReason(workitems.ForgePR{Forge: "tea", Repo: "mallory/calc", Number: 5}, it.ID, got)
	if !strings.Contains(msg, "tea:mallory/calc#5 is not a pull request of item i@1") || !strings.Contains(msg, "tea:acme/calc#5, tea:acme/calc#3") {
		t.Fatalf("reason %q", msg)
	}
	if msg := workitems.NotDeliveredReason(workitems.ForgePR{Forge: "tea", Repo: "acme/calc", Number: 5}, "j@1", nil); !strings.Contains(msg, "delivered none") {
		t.Fatalf("reason %q", msg)
	}
}

// deliverTo stands for a template's deliver: section (config.Deliver) in these tests.
type deliverTo struct{ Forge, Repo string }

func (d *deliverTo) ForgeRepo() (forge, repo string) {
	if d == nil {
		return "", ""
	}
	return d.Forge, d.Repo
}
