package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/metrics"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestTriggerFiringsAreCountedOnFixedLabels: a configured template's firings count under it, at
// zero from SetConfig; an unknown template, source or result counts as other.
func TestTriggerFiringsAreCountedOnFixedLabels(t *testing.T) {
	m := metrics.New()
	m.SetConfig(&config.Config{Templates: []config.Template{{Name: "fix-ci", Loop: config.Loop{Kind: workitems.LoopScript},
		Triggers: []config.Trigger{{Forge: "gitea", Event: workitems.TriggerLabeled, Label: "fix"}}}}})
	c := m.Triggers()
	if n := testutil.CollectAndCount(c); n != len(workitems.AllTriggerResults())+len(workitems.AllTriggerSources()) {
		t.Fatalf("%d series after SetConfig, want every result of fix-ci's forge source and other's refusals", n)
	}
	m.TriggerFiring("fix-ci", workitems.TriggerSourceForge, workitems.TriggerMade)
	m.TriggerFiring("nosuch", workitems.TriggerSourceAPI, workitems.TriggerRefused)
	m.TriggerFiring("fix-ci", "carrier-pigeon", "lost")
	for _, c2 := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"fix-ci", "forge", "made"}, 1},
		{[]string{"fix-ci", "forge", "deduplicated"}, 0},
		{[]string{"other", "api", "refused"}, 1},
		{[]string{"fix-ci", "other", "other"}, 1},
	} {
		if got := testutil.ToFloat64(c.WithLabelValues(c2.labels...)); got != c2.want {
			t.Errorf("%v = %v, want %v", c2.labels, got, c2.want)
		}
	}
}

// TestAnAlertTriggersFiringsStartAtZero: a template subscribed to alerts has its alertmanager
// series from SetConfig, and a refused notification counts under other.
func TestAnAlertTriggersFiringsStartAtZero(t *testing.T) {
	m := metrics.New()
	m.SetConfig(&config.Config{Templates: []config.Template{{Name: "payments-errors", Loop: config.Loop{Kind: workitems.LoopScript},
		Triggers: []config.Trigger{{Alertmanager: &config.AlertmanagerTrigger{Receiver: "outerloop"}}}}}})
	c := m.Triggers()
	if n := testutil.CollectAndCount(c); n != len(workitems.AllTriggerResults())+len(workitems.AllTriggerSources()) {
		t.Errorf("%d series, want the alertmanager source's results and other's refusals", n)
	}
	for _, r := range workitems.AllTriggerResults() {
		if got := testutil.ToFloat64(c.WithLabelValues("payments-errors", "alertmanager", string(r))); got != 0 {
			t.Errorf("%s = %v, want 0", r, got)
		}
	}
	m.TriggerFiring("", workitems.TriggerSourceAlertmanager, workitems.TriggerRefused)
	if got := testutil.ToFloat64(c.WithLabelValues("other", "alertmanager", "refused")); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
}
