package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/workitems"
)

// statsCollector reads the store's aggregate view on every scrape (items by state, escalations,
// today's cost, last closes, waiting items by kind and the poll lag), so the gauges are never
// staler than the scrape and no background goroutine keeps them up to date.
//
// A store that does not answer must not blank the budget gauges (a firing alert would resolve and
// restart its `for` timer) nor hold the scrape up (Prometheus would mark the whole target down).
// So a scrape waits at most statsTimeout for the read, and when it fails or is still running it
// serves the last values read — for at most statsMaxAge, and today's cost only on the UTC day it
// was read — with outerloop_stats_age_seconds saying how old they are. At most one read runs at
// a time; a read the scrape stopped waiting for finishes on its own (go-redis's read timeout
// bounds it) and its result serves the next scrape.
type statsCollector struct {
	m         *Metrics
	source    guarded[func(ctx context.Context) (workitems.Stats, error)]
	templates guarded[[]string]
	errors    prometheus.Counter

	mu       sync.Mutex
	inflight chan struct{}   // closed when the running read ends; nil when none runs
	last     workitems.Stats // the last successful read
	lastAt   time.Time       // when it was read (zero: never)
	lastErr  error           // the error of the last read, nil when it succeeded

	items           *prometheus.Desc
	escalationsOpen *prometheus.Desc
	oldestAge       *prometheus.Desc
	dailyCost       *prometheus.Desc
	lastClosed      *prometheus.Desc
	age             *prometheus.Desc
	itemsWaiting    *prometheus.Desc
	pollLag         *prometheus.Desc
}

func newStatsCollector(m *Metrics) *statsCollector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &statsCollector{
		m: m,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "stats_errors_total",
			Help: "Scrapes whose read of the store's aggregate view failed or timed out (they served the last values read, if recent).",
		}),
		items: prometheus.NewDesc(name("items"),
			"Work items by template and state.", []string{"template", "state"}, nil),
		escalationsOpen: prometheus.NewDesc(name("escalations_open"),
			"Items waiting for a person.", nil, nil),
		oldestAge: prometheus.NewDesc(name("escalation_oldest_age_seconds"),
			"Age of the oldest open escalation (0 when none is open).", nil, nil),
		dailyCost: prometheus.NewDesc(name("template_daily_cost_usd"),
			"Cost spent today (UTC) per template in USD; what the scheduler's daily cap compares with.", []string{"template"}, nil),
		lastClosed: prometheus.NewDesc(name("template_last_closed_timestamp_seconds"),
			"Unix time of the last closed item per template (absent: never closed).", []string{"template"}, nil),
		itemsWaiting: prometheus.NewDesc(name("items_waiting"),
			"Waiting items (their change pushed, no worker held) by what they wait for (kind: ci, review).", []string{"kind"}, nil),
		pollLag: prometheus.NewDesc(name("wait_poll_lag_seconds"),
			"How far the earliest due poll of a waiting item is behind (0: none due); it grows while no poller runs or keeps up.", nil, nil),
		age: prometheus.NewDesc(name("stats_age_seconds"),
			"Age of the store stats in this scrape: 0 when read now, else the time since the last successful read (the values are last-known).", nil, nil),
	}
}

func (c *statsCollector) setSource(f func(ctx context.Context) (workitems.Stats, error)) {
	c.source.set(f)
}

func (c *statsCollector) setTemplates(names []string) { c.templates.set(slices.Clone(names)) }

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	c.errors.Describe(ch)
	for _, d := range []*prometheus.Desc{c.items, c.escalationsOpen, c.oldestAge, c.dailyCost, c.lastClosed, c.age,
		c.itemsWaiting, c.pollLag} {
		ch <- d
	}
}

// read returns the freshest stats it can within the timeout: those of a read that ended now
// (fresh), or else the last successful one (at is zero when there is none) with the error.
func (c *statsCollector) read(src func(ctx context.Context) (workitems.Stats, error)) (s workitems.Stats, at time.Time, fresh bool, err error) {
	c.mu.Lock()
	if c.inflight == nil {
		done := make(chan struct{})
		c.inflight = done
		go c.fetch(src, done)
	}
	done := c.inflight
	c.mu.Unlock()

	timer := time.NewTimer(c.m.statsTimeout) // an I/O bound, so real time, not the injected clock
	defer timer.Stop()
	timedOut := false
	select {
	case <-done:
	case <-timer.C:
		timedOut = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case timedOut:
		err = context.DeadlineExceeded
	case c.lastErr != nil:
		err = c.lastErr
	}
	return c.last, c.lastAt, err == nil, err
}

func (c *statsCollector) fetch(src func(ctx context.Context) (workitems.Stats, error), done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.statsTimeout)
	s, err := src(ctx)
	cancel()
	c.mu.Lock()
	if err == nil {
		c.last, c.lastAt = s, c.m.clock.Now()
	}
	c.lastErr = err
	c.inflight = nil
	c.mu.Unlock()
	close(done)
}

// Collect implements prometheus.Collector. Without a source nothing but the error counter is
// emitted. When the read fails the error is counted and logged, and the last values read are
// served if they are recent (see statsCollector); else the stats gauges are left out (absent,
// not zero, so no alert sees a bogus "no escalations").
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.errors.Collect(ch)
	src := c.source.get()
	if src == nil {
		return
	}
	s, at, fresh, err := c.read(src)
	now := c.m.clock.Now()
	if !fresh {
		c.errors.Inc()
		c.m.log.Error("metrics: reading store stats", "err", err, "last_read", at)
		if at.IsZero() || now.Sub(at) > c.m.statsMaxAge {
			return
		}
	}
	staleness := 0.0
	if !fresh {
		staleness = max(now.Sub(at).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, staleness)
	// Today's cost of another day is not today's: left out rather than shown as today's.
	costToday := fresh || at.UTC().Format(time.DateOnly) == now.UTC().Format(time.DateOnly)

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
		if costToday {
			ch <- prometheus.MustNewConstMetric(c.dailyCost, prometheus.GaugeValue, s.DailyCostUSD[t], t)
		}
	}
	for t, at := range s.LastClosedAt {
		if !at.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lastClosed, prometheus.GaugeValue, float64(at.UnixNano())/1e9, t)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.escalationsOpen, prometheus.GaugeValue, float64(s.OpenEscalations))
	age := 0.0
	if s.OpenEscalations > 0 && !s.OldestEscalationAt.IsZero() {
		age = max(now.Sub(s.OldestEscalationAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age)
	// Waiting counts (itemstore.Store.WaitingByKind) and the poll lag (Store.PollLag, computed
	// here at the scrape's time from the earliest next poll, like the escalation's age).
	for _, k := range workitems.AllWaitKinds() {
		ch <- prometheus.MustNewConstMetric(c.itemsWaiting, prometheus.GaugeValue, float64(s.Waiting[k]), string(k))
	}
	lag := 0.0
	if !s.FirstPollAt.IsZero() {
		lag = max(now.Sub(s.FirstPollAt).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.pollLag, prometheus.GaugeValue, lag)
}
