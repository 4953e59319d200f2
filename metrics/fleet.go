package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FleetUsage is what holds one fleet template's limits now (fleet.Usage, by template).
type FleetUsage struct {
	Held, Running, OpenPRs, OpenedLastHour, Streak int64
}

// fleetCollector exports the fleet templates' gates, read at scrape time through a source
// (O(fleet templates): one pipeline each). The repository is never a label here: a fleet of
// 400 repositories is one series per template.
type fleetCollector struct {
	mu     sync.Mutex
	source func(ctx context.Context) (map[string]FleetUsage, error)

	held, running, openPRs, openedHour, streak *prometheus.Desc
}

func newFleetCollector() *fleetCollector {
	d := func(n, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "fleet", n), help, []string{"template"}, nil)
	}
	return &fleetCollector{
		held:       d("items_held", "Items of a fleet template waiting their turn in line (holding no worker)."),
		running:    d("items_running", "Items of a fleet template holding one of its concurrency slots."),
		openPRs:    d("open_prs", "Open pull requests of a fleet template (max_open_prs counts them)."),
		openedHour: d("prs_opened_last_hour", "Pull requests a fleet template opened in the last hour (prs_per_hour counts them)."),
		streak:     d("failure_streak", "Items of a fleet template that ended failed or escalated in a row (pause_after_failures trips on it)."),
	}
}

// SetFleetSource sets the function read on every scrape for the fleet templates' usage.
func (m *Metrics) SetFleetSource(f func(ctx context.Context) (map[string]FleetUsage, error)) {
	if m == nil {
		return
	}
	m.fleet.mu.Lock()
	m.fleet.source = f
	m.fleet.mu.Unlock()
}

// FleetReposSkipped counts the repositories a fleet template's tick skipped, by reason
// (archived, empty, unreadable, excluded).
func (m *Metrics) FleetReposSkipped(template string, skipped map[string]int) {
	if m == nil {
		return
	}
	for reason, n := range skipped {
		if n > 0 {
			m.fleetSkipped.WithLabelValues(template, reason).Add(float64(n))
		}
	}
}

// Describe implements prometheus.Collector.
func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.held, c.running, c.openPRs, c.openedHour, c.streak} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.source
	c.mu.Unlock()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	usage, err := src(ctx)
	if err != nil {
		return // the store's own gauges say Redis is away; nothing stale is exported
	}
	for t, u := range usage {
		for _, v := range []struct {
			d *prometheus.Desc
			n int64
		}{{c.held, u.Held}, {c.running, u.Running}, {c.openPRs, u.OpenPRs}, {c.openedHour, u.OpenedLastHour}, {c.streak, u.Streak}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, float64(v.n), t)
		}
	}
}
