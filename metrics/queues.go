package metrics

import (
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterQueues adds asynq's own queue exporter (github.com/hibiken/asynq/x/metrics) to the
// registry, so the asynq_* series (queue size, latency, tasks by state, processed and failed
// totals) are served on the same /metrics. outerloop defines no queue gauges of its own. Call it
// in one process per deployment (outerloop serve); the inspector is read on every scrape, within
// the stats timeout: a Redis that does not answer leaves the queue series out of that scrape
// instead of holding it up (and every other series with it) until Prometheus gives up.
func (m *Metrics) RegisterQueues(inspector *asynq.Inspector) error {
	if m == nil {
		return nil
	}
	c := &boundedCollector{c: asynqmetrics.NewQueueMetricsCollector(inspector), timeout: m.statsTimeout, m: m}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("metrics: registering asynq's queue exporter: %w", err)
	}
	return nil
}

// boundedCollector serves what a collector that reads a store collects within a timeout, or
// nothing. A collection it stops waiting for ends on its own (the store client's timeouts bound
// it); its result is dropped.
type boundedCollector struct {
	c       prometheus.Collector
	timeout time.Duration
	m       *Metrics
}

func (b *boundedCollector) Describe(ch chan<- *prometheus.Desc) { b.c.Describe(ch) }

func (b *boundedCollector) Collect(ch chan<- prometheus.Metric) {
	done := make(chan []prometheus.Metric, 1)
	go func() {
		mc := make(chan prometheus.Metric)
		go func() { b.c.Collect(mc); close(mc) }()
		var ms []prometheus.Metric
		for x := range mc {
			ms = append(ms, x)
		}
		done <- ms
	}()
	timer := time.NewTimer(b.timeout) // an I/O bound, so real time
	defer timer.Stop()
	select {
	case ms := <-done:
		for _, x := range ms {
			ch <- x
		}
	case <-timer.C:
		b.m.log.Error("metrics: asynq's queue exporter did not answer in time; queue series left out of this scrape", "timeout", b.timeout)
	}
}
