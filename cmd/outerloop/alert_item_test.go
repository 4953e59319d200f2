package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"outerloop/api"
	"outerloop/workitems"
)

func TestPrintItemSaysWhichAlertStartedIt(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	it := &workitems.Item{ID: "payments-errors@alert-0123456789ab", Template: "payments-errors", State: workitems.StateCancelled,
		Attempt: 1, MaxAttempts: 3, Goal: "Find and fix the cause of payments 5xx above 2%",
		Origin: workitems.Origin{Kind: workitems.OriginAlert, Actor: "alertmanager:outerloop", Alert: &workitems.AlertOrigin{
			Receiver: "outerloop", GroupKey: "g", Status: "firing", ResolvedAt: since.Add(10 * time.Minute),
			Alerts: []workitems.AlertFacts{{Labels: map[string]string{"alertname": "PaymentsErrorRate", "severity": "page", "service": "payments"},
				Annotations: map[string]string{"summary": "payments 5xx above 2%"}, StartsAt: since,
				GeneratorURL: "http://prometheus.example.com/graph?g0.expr=x"}}}}}
	var b bytes.Buffer
	printItem(&b, api.ItemView{Item: it})
	out := b.String()
	for _, want := range []string{"started by: Alertmanager receiver outerloop, 1 alert(s)",
		"alert PaymentsErrorRate {service=payments, severity=page} since 2026-12-07T10:00:00Z",
		"summary: payments 5xx above 2%", "source: http://prometheus.example.com/graph?g0.expr=x", "resolved at 2026-12-07T10:10:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
