package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/workitems"
)

// The results of one poll of a waiting item (outerloop_wait_polls_total's result label).
const (
	PollDecided     = "decided"      // the evidence changed and a decision was recorded
	PollPending     = "pending"      // nothing new: the item waits on, polled again later
	PollRateLimited = "rate_limited" // the forge refused for its rate limit (or Retry-After)
	PollError       = "error"        // the forge or the store failed; the item is polled again later
	PollDeadline    = "deadline"     // the wait's deadline passed: the policy decided on what was there
)

// PollResults lists every poll result; anything else is counted as "other".
func PollResults() []string {
	return []string{PollDecided, PollPending, PollRateLimited, PollError, PollDeadline}
}

// Wait durations run from a webhook's seconds (CI on a small change) to a review's days.
var waitDurationBuckets = []float64{10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 172800, 345600, 604800}

// waitMetrics are the poller's and the wakes' collectors (the waiting counts and the poll lag
// are read from the store on scrape: statsCollector).
type waitMetrics struct {
	duration *prometheus.HistogramVec
	polls    *prometheus.CounterVec
}

func newWaitMetrics() waitMetrics {
	w := waitMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "wait_duration_seconds",
			Help:    "How long waiting items waited, by what they waited for (kind: ci, review) and what woke them (by: webhook, poll, deadline, command).",
			Buckets: waitDurationBuckets,
		}, []string{"kind", "by"}),
		polls: counterVec("wait_polls_total",
			"Polls of waiting items by forge (a key of forges:) and result (decided, pending, rate_limited, error, deadline).", "forge", "result"),
	}
	// The label sets are fixed and small: every series exists from the start.
	for _, k := range workitems.AllWaitKinds() {
		for _, by := range workitems.AllWakeReasons() {
			w.duration.WithLabelValues(string(k), string(by))
		}
	}
	w.createPolls(other)
	return w
}

func (w waitMetrics) createPolls(forge string) {
	for _, r := range PollResults() {
		w.polls.WithLabelValues(forge, r)
	}
}

// Woken observes how long a wait lasted when it ended: kind is what it waited for and by what
// woke it. Values outside workitems.AllWaitKinds and AllWakeReasons count as "other".
func (m *Metrics) Woken(kind workitems.WaitKind, by workitems.WakeReason, waited time.Duration) {
	if m == nil {
		return
	}
	k, b := string(kind), string(by)
	if !slices.Contains(workitems.AllWaitKinds(), kind) {
		k = other
	}
	if !slices.Contains(workitems.AllWakeReasons(), by) {
		b = other
	}
	m.waits.duration.WithLabelValues(k, b).Observe(max(waited.Seconds(), 0))
}

// Polled counts one poll of a waiting item on forge (a key of forges:; any other name counts
// as "other") with result, one of PollResults (anything else counts as "other").
func (m *Metrics) Polled(forge string, result string) {
	if m == nil {
		return
	}
	if !slices.Contains(m.cfg.Load().forges, forge) {
		forge = other
	}
	if !slices.Contains(PollResults(), result) {
		result = other
	}
	m.waits.polls.WithLabelValues(forge, result).Inc()
}
