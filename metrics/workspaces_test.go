package metrics_test

import (
	"testing"

	"outerloop/metrics"
)

func TestWorkspaceDiskIsAGaugeByKind(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	d := metrics.NewWorkspaceDisk(m)
	d.WorkspaceDisk(3<<20, 90<<20)
	metrics.NewWorkspaceDisk(m).WorkspaceDisk(2<<20, 90<<20) // a second sweeper shares the gauge
	got := scrape(t, m)
	if got[`outerloop_workspace_disk_bytes{kind="workspaces"}`] != 2<<20 || got[`outerloop_workspace_disk_bytes{kind="mirrors"}`] != 90<<20 {
		t.Fatalf("gauge: %v", got)
	}
	var none *metrics.WorkspaceDisk = metrics.NewWorkspaceDisk(nil)
	none.WorkspaceDisk(1, 1) // nil-safe, as every method here
}
