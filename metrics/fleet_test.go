package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/metrics"
)

func TestFleetGaugesCarryTheTemplateNeverTheRepository(t *testing.T) {
	m := metrics.New()
	m.SetFleetSource(func(context.Context) (map[string]metrics.FleetUsage, error) {
		return map[string]metrics.FleetUsage{"deps": {Held: 5, Running: 2, OpenPRs: 3, OpenedLastHour: 1, Streak: 2}}, nil
	})
	m.FleetReposSkipped("deps", map[string]int{"archived": 1, "empty": 2, "unreadable": 0})
	want := `
# HELP outerloop_fleet_items_held Items of a fleet template waiting their turn in line (holding no worker).
# TYPE outerloop_fleet_items_held gauge
outerloop_fleet_items_held{template="deps"} 5
# HELP outerloop_fleet_open_prs Open pull requests of a fleet template (max_open_prs counts them).
# TYPE outerloop_fleet_open_prs gauge
outerloop_fleet_open_prs{template="deps"} 3
# HELP outerloop_fleet_failure_streak Items of a fleet template that ended failed or escalated in a row (pause_after_failures trips on it).
# TYPE outerloop_fleet_failure_streak gauge
outerloop_fleet_failure_streak{template="deps"} 2
# HELP outerloop_fleet_repos_skipped_total Repositories a fleet template's ticks skipped, by reason (archived, empty, unreadable, excluded).
# TYPE outerloop_fleet_repos_skipped_total counter
outerloop_fleet_repos_skipped_total{reason="archived",template="deps"} 1
outerloop_fleet_repos_skipped_total{reason="empty",template="deps"} 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "outerloop_fleet_items_held", "outerloop_fleet_open_prs",
		"outerloop_fleet_failure_streak", "outerloop_fleet_repos_skipped_total"); err != nil {
		t.Fatal(err)
	}
	// A source that fails exports nothing stale.
	m.SetFleetSource(func(context.Context) (map[string]metrics.FleetUsage, error) {
		return nil, errors.New("redis: connection refused")
	})
	if n, err := testutil.GatherAndCount(m.Registry(), "outerloop_fleet_items_held"); err != nil || n != 0 {
		t.Fatalf("%d series from a failing source (%v)", n, err)
	}
}
