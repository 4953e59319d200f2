package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/hooks"
)

// Webhooks counts forge webhook deliveries (POST /hooks/{forge}) by forge, event and result:
// outerloop_webhook_deliveries_total{forge, event, result}. forge is a key of forges: ("other"
// for a {forge} that is not one: the path is the caller's, the label set stays fixed); event is
// the normalised hooks.Kind, "other" for a delivery that gave none (refused, ping, ignored);
// result is a hooks.Result. It is the handler's hooks.Observer.
type Webhooks struct {
	c      *prometheus.CounterVec
	forges []string
}

// NewWebhooks counts on m's deliveries counter (nil-safe: a nil m gives a nil counter) and
// creates at zero the series each configured forge can reach: every kind with accepted,
// duplicate, sink_error and store_error; "other" with ignored, bad_signature, not_configured
// and too_large. Forge "other" with unknown_forge exists from New.
func NewWebhooks(m *Metrics, forges []string) *Webhooks {
	if m == nil {
		return nil
	}
	c := m.webhooks
	w := &Webhooks{c: c, forges: slices.Clone(forges)}
	for _, f := range forges {
		for _, k := range hooks.AllKinds() {
			for _, r := range []hooks.Result{hooks.ResultAccepted, hooks.ResultDuplicate, hooks.ResultSinkError, hooks.ResultStoreError} {
				c.WithLabelValues(f, string(k), string(r))
			}
		}
		for _, r := range []hooks.Result{hooks.ResultIgnored, hooks.ResultBadSignature, hooks.ResultNotConfigured, hooks.ResultTooLarge} {
			c.WithLabelValues(f, other, string(r))
		}
	}
	return w
}

// newWebhookCounter is the deliveries counter, registered by New in every process (at zero
// where no hook handler runs), so that the rules over it have a series to read everywhere.
func newWebhookCounter() *prometheus.CounterVec {
	c := counterVec("webhook_deliveries_total",
		"Forge webhook deliveries by forge, normalised event and result (accepted, duplicate, ignored, bad_signature, unknown_forge, not_configured, too_large, sink_error, store_error).",
		"forge", "event", "result")
	c.WithLabelValues(other, other, string(hooks.ResultUnknownForge))
	return c
}

// Delivery counts one delivery; values outside the fixed sets count as "other".
func (w *Webhooks) Delivery(forge string, kind hooks.Kind, r hooks.Result) {
	if w == nil {
		return
	}
	if !slices.Contains(w.forges, forge) {
		forge = other
	}
	event := other
	if slices.Contains(hooks.AllKinds(), kind) {
		event = string(kind)
	}
	if !slices.Contains(hooks.AllResults(), r) {
		r = other
	}
	w.c.WithLabelValues(forge, event, string(r)).Inc()
}
