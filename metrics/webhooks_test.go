package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/hooks"
	"outerloop/metrics"
)

func TestWebhookDeliveriesAreCountedWithinFixedLabelSets(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	w := metrics.NewWebhooks(m, []string{"tea", "gh"})
	w.Delivery("tea", hooks.KindCheck, hooks.ResultAccepted)
	w.Delivery("tea", hooks.KindCheck, hooks.ResultAccepted)
	w.Delivery("gh", hooks.KindComment, hooks.ResultDuplicate)
	w.Delivery("", "", hooks.ResultUnknownForge)
	w.Delivery("not-configured-anywhere", hooks.Kind("push"), hooks.Result("weird"))

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series, nonZero := 0, map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "outerloop_webhook_deliveries_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			series++
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if v := mt.GetCounter().GetValue(); v != 0 {
				nonZero[strings.Join(ls, ",")] = v
			}
		}
	}
	// Every reachable series exists from the start: 2 forges × (6 kinds × 4 + 4) + unknown_forge;
	// plus the "other" result counted above.
	if want := 2*(len(hooks.AllKinds())*4+4) + 1 + 1; series != want {
		t.Fatalf("%d series, want %d", series, want)
	}
	want := map[string]float64{
		"event=check,forge=tea,result=accepted":        2,
		"event=comment,forge=gh,result=duplicate":      1,
		"event=other,forge=other,result=unknown_forge": 1,
		"event=other,forge=other,result=other":         1,
	}
	if fmt.Sprint(nonZero) != fmt.Sprint(want) {
		t.Fatalf("counted\n got %v\nwant %v", nonZero, want)
	}
	if problems, err := testutil.GatherAndLint(m.Registry(), "outerloop_webhook_deliveries_total"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

func TestNilWebhooksDoNothing(t *testing.T) {
	t.Parallel()
	w := metrics.NewWebhooks(nil, []string{"tea"})
	w.Delivery("tea", hooks.KindCheck, hooks.ResultAccepted) // no panic
	var _ hooks.Observer = w
}
