package metrics

import (
	"context"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/workitems"
)

// statsCollector reads the store's aggregate view on every scrape, so the gauges are never
// staler than the scrape and no background goroutine keeps them up to date.
type statsCollector struct {
	m         *Metrics
	source    guarded[func(ctx context.Context) (workitems.Stats, error)]
	templates guarded[[]string]
	errors    prometheus.Counter

	items           *prometheus.Desc
	escalationsOpen *prometheus.Desc
	oldestAge       *prometheus.Desc
	dailyCost       *prometheus.Desc
	lastClosed      *prometheus.Desc
}

func newStatsCollector(m *Metrics) *statsCollector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &statsCollector{
		m: m,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "stats_errors_total",
			Help: "Scrapes whose read of the store's aggregate view failed (its gauges were left out).",
		}),
		items: prometheus.NewDesc(name("items"),
			"Work items by template and state.", []string{"template", "state"}, nil),
		escalationsOpen: prometheus.NewDesc(name("escalations_open"),
			"Items waiting for a person.", nil, nil),
		oldestAge: prometheus.NewDesc(name("escalation_oldest_age_seconds"),
			"Age of the oldest open escalation (0 when none is open).", nil, nil),
		dailyCost: prometheus.NewDesc(name("template_daily_cost_usd"),
			"Cost spent today (UTC) per template in USD.", []string{"template"}, nil),
		lastClosed: prometheus.NewDesc(name("template_last_closed_timestamp_seconds"),
			"Unix time of the last closed item per template (absent: never closed).", []string{"template"}, nil),
	}
}

func (c *statsCollector) setSource(f func(ctx context.Context) (workitems.Stats, error)) {
	c.source.set(f)
}

func (c *statsCollector) setTemplates(names []string) { c.templates.set(slices.Clone(names)) }

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	c.errors.Describe(ch)
	for _, d := range []*prometheus.Desc{c.items, c.escalationsOpen, c.oldestAge, c.dailyCost, c.lastClosed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Without a source nothing but the error counter is
// emitted; when the source fails, the stats gauges are left out of this scrape (absent, not
// zero, so no alert sees a bogus "no escalations") and the error is counted and logged.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.errors.Collect(ch)
	src := c.source.get()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.m.statsTimeout)
	defer cancel()
	s, err := src(ctx)
	if err != nil {
		c.errors.Inc()
		c.m.log.Error("metrics: reading store stats", "err", err)
		return
	}

	// Configured templates appear with zeros even before their first item, so dashboards and
	// "absent" checks see them.
	templates := map[string]bool{}
	for _, t := range c.templates.get() {
		templates[t] = true
	}
	for _, t := range s.SortedTemplates() {
		templates[t] = true
	}
	for t := range templates {
		for _, st := range workitems.AllStates() {
			ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(s.Items[t][st]), t, string(st))
		}
		ch <- prometheus.MustNewConstMetric(c.dailyCost, prometheus.GaugeValue, s.DailyCostUSD[t], t)
	}
	for t, at := range s.LastClosedAt {
		if !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lastClosed, prometheus.GaugeValue, float64(at.UnixNano())/1e9, t)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.escalationsOpen, prometheus.GaugeValue, float64(s.OpenEscalations))
	age := 0.0
	if s.OpenEscalations > 0 && !s.OldestEscalationAt.IsZero() {
		age = max(c.m.now().Sub(s.OldestEscalationAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age)
}
