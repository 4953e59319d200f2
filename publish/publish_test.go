package publish

import (
	"strings"
	"testing"

	"outerloop/delivery"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestTheMarkerRoundTripsAndRefusesLookalikes(t *testing.T) {
	tree := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		body, item, tree string
	}{
		{body: "text\n\n" + marker("fix@20261201T030000Z", tree), item: "fix@20261201T030000Z", tree: tree},
		{body: "no marker at all"},
		{body: "<!-- outerloop: item=x tree=short -->"},
		{body: "<!-- outerloop: item=x tree=" + strings.ToUpper(tree) + " -->"}, // git prints lower-case hex
	} {
		item, got := MarkedTree(tc.body)
		if item != tc.item || got != tc.tree {
			t.Errorf("MarkedTree(%q) = %q, %q; want %q, %q", tc.body, item, got, tc.item, tc.tree)
		}
	}
}

func TestThePullRequestBodyNamesTheConnectionsTheSandboxRefused(t *testing.T) {
	pub := delivery.Publication{Item: &workitems.Item{ID: "bump@1"}, Template: &config.Template{Name: "bump"}, Attempt: 1,
		Delivery: workitems.Delivery{FileCount: 2, Tree: strings.Repeat("ab", 20)}}
	if body := prBody(pub, "abc"); strings.Contains(body, "refused") {
		t.Fatalf("body without refusals mentions them:\n%s", body)
	}
	pub.NetworkRefused = []string{"github.com:443 (not_allowed)", "internal.example:443 (private_address)"}
	body := prBody(pub, "abc")
	if !strings.Contains(body, "The sandbox refused 2 connection(s) of this attempt's commands: github.com:443 (not_allowed), internal.example:443 (private_address).") {
		t.Fatalf("body:\n%s", body)
	}
	if item, tree := MarkedTree(body); item != "bump@1" || tree != pub.Delivery.Tree {
		t.Fatalf("the marker no longer closes the body: %q %q", item, tree)
	}
}
