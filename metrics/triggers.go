package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"outerloop/workitems"
)

// newTriggerCounter is outerloop_trigger_firings_total{template, source, result}: each firing
// of a template's trigger by what became of it. template is a configured template's name, or
// "other" for a request that named none or one that is not configured (refused before a
// template is known).
func newTriggerCounter() *prometheus.CounterVec {
	c := counterVec("trigger_firings_total",
		"Firings of templates' triggers by template, source (forge, alertmanager, api) and result (made, deduplicated, capped, paused, refused).",
		"template", "source", "result")
	// A request refused before it names a configured template, from New on.
	for _, s := range workitems.AllTriggerSources() {
		c.WithLabelValues(other, string(s), string(workitems.TriggerRefused))
	}
	return c
}

// TriggerFiring counts one firing; a source or result outside the vocabularies counts as
// "other", as does a template the config does not name.
func (m *Metrics) TriggerFiring(template string, source workitems.TriggerSource, result workitems.TriggerResult) {
	if m == nil {
		return
	}
	if !m.configured(template) {
		template = other
	}
	s, r := string(source), string(result)
	if !slices.Contains(workitems.AllTriggerSources(), source) {
		s = other
	}
	if !slices.Contains(workitems.AllTriggerResults(), result) {
		r = other
	}
	m.triggers.WithLabelValues(template, s, r).Inc()
}
