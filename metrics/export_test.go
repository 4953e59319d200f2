package metrics

import "github.com/prometheus/client_golang/prometheus"

// ScheduleMaxGap exposes scheduleMaxGap to the external tests.
var ScheduleMaxGap = scheduleMaxGap

// Triggers exposes the trigger firings counter to the external tests.
func (m *Metrics) Triggers() *prometheus.CounterVec { return m.triggers }
