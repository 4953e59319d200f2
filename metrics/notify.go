package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/notify"
	"outerloop/workitems/config"
)

// Notifications counts notification delivery attempts by sink and result:
// outerloop_notifications_total{sink, result} (result: delivered, retry, dead). Sink labels
// are the names in notify.sinks; every configured pair starts at zero.
type Notifications struct{ c *prometheus.CounterVec }

// NewNotifications registers the counter on m (nil-safe: a nil m gives a nil counter).
func NewNotifications(m *Metrics, cfg *config.Config) *Notifications {
	if m == nil {
		return nil
	}
	c := counterVec("notifications_total", "Notification delivery attempts by sink and result (delivered, retry, dead).", "sink", "result")
	if err := m.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err) // a programming error: another collector took the name
		}
		c = are.ExistingCollector.(*prometheus.CounterVec)
	}
	if cfg != nil {
		for _, s := range cfg.Notify.SinkNames() {
			for _, r := range notify.AllResults() {
				c.WithLabelValues(s, string(r))
			}
		}
	}
	return &Notifications{c: c}
}

// Notification counts one attempt.
func (n *Notifications) Notification(sink string, r notify.Result) {
	if n == nil {
		return
	}
	n.c.WithLabelValues(sink, string(r)).Inc()
}
