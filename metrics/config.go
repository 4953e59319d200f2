package metrics

import (
	"outerloop/egress"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// configView is what the recording methods need from the config: the label values it allows.
// SetConfig swaps it whole, so a reload never shows a half-built view.
type configView struct {
	providers map[string]string // provider key → the model label of its configured model
	templates []templateLabels
	known     map[string]bool // the templates' names
	forges    []string        // the keys of forges: (the forge label of the wait polls)
}

type templateLabels struct {
	name, loop string
}

// modelLabels folds a provider and model into the label sets of the config: a provider the
// config does not name becomes "other", and so does a model other than the one configured for
// the provider ("" asks for the configured one).
func (v *configView) modelLabels(provider, model string) (string, string) {
	configured, ok := v.providers[provider]
	if !ok {
		return other, other
	}
	if model == "" || model == configured {
		return provider, configured
	}
	return provider, other
}

// defaultModel is the model label of a provider whose config names no model (the server picks).
const defaultModel = "default"

// SetConfig applies a deployment config; call it at start and after every reload. It replaces
// the cap gauges with the templates' configured caps — per attempt (scope "attempt"), per item
// (scope "item") and the daily cost cap; kinds without a cap are absent, so a dashboard draws no
// line at zero — and the longest gap between the ticks of each scheduled template (alerts tell
// nightly templates from weekly ones with it). The work is O(templates): the gap comes from the
// schedule's fields, not from walking its ticks.
//
// It also creates, at zero, every counter series a configured template will use, so the first
// increment of each is counted by increase() and rate():
//   - attempts started, and attempts by each exit reason (workitems.AllExitReasons), under the
//     template's inner loop;
//   - spend of every kind (tokens by direction, model calls, tool calls, cost, wall time) under
//     the template's loop, and cost and tokens under its provider and model when it has one;
//   - decisions by each outcome an actor can decide (verifier: close, retry, escalate; person:
//     close, retry, cancel);
//   - deliveries by outcome (workitems.AllDeliveryOutcomes), and the pull request actions
//     (workitems.AllPullRequestActions);
//   - the sandbox's refused connections by reason (egress.Reasons);
//   - for a scheduled template, ticks, misfires and skips by reason (max_open, daily_cap);
//   - the attempt duration and steps histograms under the template's loop, and the model
//     request latency histogram and model errors by error class for every configured provider
//     (an empty histogram's quantile is NaN: the dashboards draw quantiles only where the count
//     grew);
//   - the running-attempt cost gauges, and the store's item counts by state;
//   - the firings of the template's triggers by result, for each source its triggers listen to;
//   - the polls of waiting items by result for every configured forge (the wait durations by
//     kind and wake reason, and the polls of forge "other", exist from New).
//
// Not created ahead: decisions by policy rule (there are dozens of rules; the rule breakdown
// is a detail view, the counts come from decisions_total), series of a loop a retry's strategy
// switches to.
// Series of templates a reload removed stay (their counts are still true).
func (m *Metrics) SetConfig(cfg *config.Config) {
	if m == nil || cfg == nil {
		return
	}
	m.cfgMu.Lock()
	defer m.cfgMu.Unlock()
	view := &configView{providers: map[string]string{}, known: map[string]bool{}}
	for name, p := range cfg.Providers {
		model := p.Model
		if model == "" {
			model = defaultModel
		}
		view.providers[name] = model
	}
	m.budgetCap.Reset()
	m.dailyCostCap.Reset()
	m.scheduleInterval.Reset()
	now := m.clock.Now()
	names := make([]string, 0, len(cfg.Templates))
	for i := range cfg.Templates {
		t := &cfg.Templates[i]
		names = append(names, t.Name)
		view.known[t.Name] = true
		view.templates = append(view.templates, templateLabels{name: t.Name, loop: string(t.Loop.Kind)})
		for _, k := range workitems.AllBudgetKinds() {
			if c := t.Budget.Cap(k); c > 0 {
				m.budgetCap.WithLabelValues(t.Name, "attempt", string(k)).Set(c)
			}
			if c := t.ItemBudget.Cap(k); c > 0 {
				m.budgetCap.WithLabelValues(t.Name, "item", string(k)).Set(c)
			}
		}
		if t.DailyCostCapUSD > 0 {
			m.dailyCostCap.WithLabelValues(t.Name).Set(t.DailyCostCapUSD)
		}
		if gap, ok := scheduleMaxGap(t.Schedule, now); ok {
			m.scheduleInterval.WithLabelValues(t.Name).Set(gap.Seconds())
		}
		if !m.noSeriesAhead {
			m.createTemplateSeries(t, view)
		}
	}
	for name := range cfg.Forges {
		view.forges = append(view.forges, name)
		m.waits.createPolls(name)
	}
	for name := range view.providers {
		m.modelRequest.WithLabelValues(name)
		for _, c := range workitems.AllErrorClasses() {
			m.modelErrors.WithLabelValues(name, string(c))
		}
	}
	m.cfg.Store(view)
	m.stats.setTemplates(names)
}

// SetTemplates is SetConfig for a config of only these templates (no providers).
func (m *Metrics) SetTemplates(ts []config.Template) {
	m.SetConfig(&config.Config{Templates: ts})
}

// createTemplateSeries creates a template's counter series at zero (see SetConfig).
func (m *Metrics) createTemplateSeries(t *config.Template, view *configView) {
	name, loop := t.Name, string(t.Loop.Kind)
	m.attemptsStarted.WithLabelValues(name, loop)
	m.attemptDuration.WithLabelValues(name, loop)
	m.attemptSteps.WithLabelValues(name, loop)
	for _, r := range workitems.AllExitReasons() {
		m.attempts.WithLabelValues(name, loop, string(r))
	}
	for _, d := range []string{"input", "cached_input", "output"} {
		m.spendTokens.WithLabelValues(name, loop, d)
	}
	m.spendModelCalls.WithLabelValues(name, loop)
	m.spendToolCalls.WithLabelValues(name, loop)
	m.spendCost.WithLabelValues(name, loop)
	m.spendWall.WithLabelValues(name, loop)
	if t.Loop.Provider != "" {
		if model, ok := view.providers[t.Loop.Provider]; ok {
			m.modelCost.WithLabelValues(name, t.Loop.Provider, model)
			for _, d := range []string{"input", "cached_input", "output"} {
				m.modelTokens.WithLabelValues(name, t.Loop.Provider, model, d)
			}
		}
	}
	for _, a := range workitems.AllActorKinds() {
		for _, o := range a.Outcomes() {
			m.decisions.WithLabelValues(name, string(o), string(a))
		}
	}
	for _, o := range workitems.AllDeliveryOutcomes() {
		m.deliveries.WithLabelValues(name, string(o))
	}
	for _, a := range workitems.AllPullRequestActions() {
		m.prActions.WithLabelValues(name, string(a))
	}
	for _, tr := range t.Triggers {
		for _, r := range workitems.AllTriggerResults() {
			m.triggers.WithLabelValues(name, string(tr.Source()), string(r))
		}
	}
	for _, r := range egress.Reasons() {
		m.sandboxRefused.WithLabelValues(name, string(r))
	}
	if t.Schedule != "" {
		m.schedulerTicks.WithLabelValues(name)
		m.schedulerMisfires.WithLabelValues(name)
		m.schedulerSkips.WithLabelValues(name, SkipMaxOpen)
		m.schedulerSkips.WithLabelValues(name, SkipDailyCap)
		m.schedulerSkips.WithLabelValues(name, SkipPaused)
	}
}

// configured reports whether the config in force names the template.
func (m *Metrics) configured(template string) bool {
	return m.cfg.Load().known[template]
}
