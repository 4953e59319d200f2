package metrics

import (
	"fmt"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
)

// RegisterQueues adds asynq's own queue exporter (github.com/hibiken/asynq/x/metrics) to the
// registry, so the asynq_* series (queue size, latency, tasks by state, processed and failed
// totals) are served on the same /metrics. outerloop defines no queue gauges of its own. Call it
// in one process per deployment (outerloop serve); the inspector is read on every scrape.
func (m *Metrics) RegisterQueues(inspector *asynq.Inspector) error {
	if m == nil {
		return nil
	}
	if err := m.reg.Register(asynqmetrics.NewQueueMetricsCollector(inspector)); err != nil {
		return fmt.Errorf("metrics: registering asynq's queue exporter: %w", err)
	}
	return nil
}
