// Package metrics owns outerloop's Prometheus metrics: the collectors on their own registry, the
// /metrics handler (OpenMetrics, so exemplars carry item ids), the scrape-time view of the store
// (items by state, escalations, today's cost, waiting items by kind and the poll lag), the wait
// poller's counts (Woken, Polled: waits.go) and the spend of the attempts this process runs.
// Names and labels here are the contract the dashboards and alert rules in dashboards/ are
// tested against.
//
// Labels are small fixed sets (template, loop, reason, outcome, actor_kind, rule, kind, scope,
// state, provider, model, class, forge, by, result). Item ids never become labels; they ride on exemplars as
// item_id. Provider and model labels come from the config (a provider's key and its configured
// model), never from what a model server answered.
//
// SetConfig (called at start and on every config reload) creates every series of a configured
// template at zero: increase() and rate() count from the first cent only when the series exists
// before its first increment. Which sets are created is listed on SetConfig.
//
// Every method is safe on a nil *Metrics and does nothing, so callers and tests may pass nil.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"outerloop/egress"
	"outerloop/workitems"
)

const namespace = "outerloop"

// Bucket layouts. Script attempts take seconds, agent attempts minutes to hours; checkpoints
// are Redis writes (milliseconds); model requests stream for seconds to minutes.
var (
	attemptDurationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}
	attemptStepsBuckets    = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	checkpointBuckets      = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	modelRequestBuckets    = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
)

// Scheduler skip reasons; anything else is counted as "other" to keep the label set fixed.
const (
	SkipMaxOpen  = "max_open"
	SkipDailyCap = "daily_cap"
	SkipPaused   = "paused" // the template is paused (scheduler.SkipPaused)
	skipOther    = "other"
)

// other is the label value for anything outside a fixed set (a provider or model the config does
// not name, a rule name that is not one).
const other = "other"

// exemplarMaxRunes is client_golang's limit on an exemplar's label names and values together.
const exemplarMaxRunes = prometheus.ExemplarMaxRunes

// Option configures New.
type Option func(*Metrics)

// WithClock sets the clock used for ages computed at scrape time and for schedule gaps
// (default the system clock).
func WithClock(c workitems.Clock) Option { return func(m *Metrics) { m.clock = c } }

// WithLogger sets the logger for scrape-time errors (default slog.Default()).
// WithoutSeriesAhead makes SetConfig skip creating every template's counter series at zero: for
// a one-shot CLI command that serves no /metrics, where 10k templates would cost a second of
// series nobody scrapes. Label views and cap gauges are still set.
func WithoutSeriesAhead() Option { return func(m *Metrics) { m.noSeriesAhead = true } }

func WithLogger(l *slog.Logger) Option { return func(m *Metrics) { m.log = l } }

// WithStatsTimeout bounds how long a scrape waits for the store's aggregate view (default 2s);
// past it the scrape serves the last values read (see WithStatsMaxAge).
func WithStatsTimeout(d time.Duration) Option { return func(m *Metrics) { m.statsTimeout = d } }

// WithStatsMaxAge sets how long the last values read from the store are served while the store
// does not answer (default 10m); older ones are left out of the scrape.
func WithStatsMaxAge(d time.Duration) Option { return func(m *Metrics) { m.statsMaxAge = d } }

// Metrics holds every outerloop collector on one registry.
type Metrics struct {
	reg          *prometheus.Registry
	clock        workitems.Clock
	log          *slog.Logger
	statsTimeout time.Duration
	statsMaxAge  time.Duration
	// noSeriesAhead: see WithoutSeriesAhead.
	noSeriesAhead bool

	cfg          atomic.Pointer[configView]
	cfgMu        sync.Mutex // serialises SetConfig
	running      *runningCollector
	fleet        *fleetCollector
	fleetSkipped *prometheus.CounterVec

	attemptsStarted *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	attemptSteps    *prometheus.HistogramVec

	spendTokens     *prometheus.CounterVec
	spendModelCalls *prometheus.CounterVec
	spendToolCalls  *prometheus.CounterVec
	spendCost       *prometheus.CounterVec
	spendWall       *prometheus.CounterVec
	modelCost       *prometheus.CounterVec
	modelTokens     *prometheus.CounterVec

	decisions     *prometheus.CounterVec
	decisionRules *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	prActions     *prometheus.CounterVec
	// sandboxRefused counts the egress proxy's refused connections (SandboxNetworkRefused).
	sandboxRefused *prometheus.CounterVec

	checkpointWrite prometheus.Histogram

	schedulerTicks    *prometheus.CounterVec
	schedulerSkips    *prometheus.CounterVec
	schedulerMisfires *prometheus.CounterVec

	modelRequest *prometheus.HistogramVec
	modelErrors  *prometheus.CounterVec

	budgetCap        *prometheus.GaugeVec
	dailyCostCap     *prometheus.GaugeVec
	scheduleInterval *prometheus.GaugeVec

	stats *statsCollector

	waits    waitMetrics
	webhooks *prometheus.CounterVec // NewWebhooks counts on it
	triggers *prometheus.CounterVec // TriggerFiring
}

// New returns metrics on their own registry, with the Go and process collectors.
func New(opts ...Option) *Metrics {
	m := &Metrics{
		reg:          prometheus.NewRegistry(),
		clock:        workitems.SystemClock{},
		log:          slog.Default(),
		statsTimeout: 2 * time.Second,
		statsMaxAge:  10 * time.Minute,
	}
	for _, o := range opts {
		o(m)
	}
	m.cfg.Store(&configView{})
	tl := []string{"template", "loop"}
	m.attemptsStarted = counterVec("attempts_started_total", "Attempts started, by template and inner loop.", tl...)
	m.attempts = counterVec("attempts_total", "Attempts finished, by template, inner loop and exit reason.", "template", "loop", "reason")
	m.attemptDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "attempt_duration_seconds",
		Help:    "Wall time of finished attempts.",
		Buckets: attemptDurationBuckets,
	}, tl)
	m.attemptSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "attempt_steps",
		Help:    "Inner-loop steps taken by finished attempts.",
		Buckets: attemptStepsBuckets,
	}, tl)
	m.spendTokens = counterVec("spend_tokens_total", "Model tokens spent, by direction (input, cached_input, output); charged at every checkpoint.", "template", "loop", "direction")
	m.spendModelCalls = counterVec("spend_model_calls_total", "Model calls spent; charged at every checkpoint.", tl...)
	m.spendToolCalls = counterVec("spend_tool_calls_total", "Tool calls spent; charged at every checkpoint.", tl...)
	m.spendCost = counterVec("spend_cost_usd_total", "Cost spent in USD, from the providers' price tables; charged at every checkpoint.", tl...)
	m.spendWall = counterVec("spend_wall_seconds_total", "Attempt wall time spent in seconds; charged at every checkpoint.", tl...)
	m.modelCost = counterVec("model_cost_usd_total", "Cost spent in USD by template, model provider (its config key) and model (from the config).", "template", "provider", "model")
	m.modelTokens = counterVec("model_tokens_total", "Model tokens spent by template, model provider, model and direction.", "template", "provider", "model", "direction")
	m.decisions = counterVec("decisions_total", "Decisions on items by outcome and who decided (actor_kind: verifier, person).", "template", "outcome", "actor_kind")
	m.decisionRules = counterVec("decision_rules_total", "Decisions on items by outcome and the policy rule that fired (person for a person's).", "template", "outcome", "rule")
	m.deliveries = counterVec("deliveries_total", "What became of closed items' changes, by outcome (pr_opened, pr_updated, merged, declined, unchanged, patch, pushed, failed).", "template", "outcome")
	m.prActions = counterVec("pull_request_actions_total", "What outerloop did to a pull request or branch because people share it, by action (held, built_on, handed_back, obsolete, branch_deleted, branch_kept, ready_for_review).", "template", "action")
	m.sandboxRefused = counterVec("sandbox_network_refused_total", "Connections the sandbox's registries proxy refused to a command, by template and reason (not_allowed, private_address, resolve_failed, origin_form, bad_target).", "template", "reason")
	m.checkpointWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "checkpoint_write_duration_seconds",
		Help:    "Latency of checkpoint writes to the store.",
		Buckets: checkpointBuckets,
	})
	m.schedulerTicks = counterVec("scheduler_ticks_total", "Cron ticks that created an item.", "template")
	m.schedulerSkips = counterVec("scheduler_skips_total", "Cron ticks that created no item, by reason (max_open, daily_cap, paused).", "template", "reason")
	m.schedulerMisfires = counterVec("scheduler_misfires_total", "Cron ticks that did not run at their time because no scheduler ran (dropped or caught up).", "template")
	m.modelRequest = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "model_request_duration_seconds",
		Help:    "Latency of model requests, successful or not.",
		Buckets: modelRequestBuckets,
	}, []string{"provider"})
	m.modelErrors = counterVec("model_errors_total", "Failed model requests, by provider and error class.", "provider", "class")
	m.budgetCap = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "budget_cap",
		Help: "Configured budget caps by template, scope (attempt, item) and kind; wall_time in seconds, cost in USD.",
	}, []string{"template", "scope", "kind"})
	m.dailyCostCap = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "template_daily_cost_cap_usd",
		Help: "Configured daily cost cap per template in USD (absent: no cap).",
	}, []string{"template"})
	m.scheduleInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "template_schedule_max_interval_seconds",
		Help: "Longest gap between two cron ticks of a scheduled template, in its wall-clock time (absent: no schedule).",
	}, []string{"template"})
	m.stats = newStatsCollector(m)
	m.running = newRunningCollector(m)
	m.fleet = newFleetCollector()
	m.fleetSkipped = counterVec("fleet_repos_skipped_total", "Repositories a fleet template's ticks skipped, by reason (archived, empty, unreadable, excluded).",
		"template", "reason")
	m.waits = newWaitMetrics()
	m.webhooks = newWebhookCounter()
	m.triggers = newTriggerCounter()

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.attemptsStarted, m.attempts, m.attemptDuration, m.attemptSteps,
		m.spendTokens, m.spendModelCalls, m.spendToolCalls, m.spendCost, m.spendWall,
		m.modelCost, m.modelTokens,
		m.decisions, m.decisionRules, m.deliveries, m.prActions, m.checkpointWrite, m.sandboxRefused,
		m.schedulerTicks, m.schedulerSkips, m.schedulerMisfires,
		m.modelRequest, m.modelErrors,
		m.budgetCap, m.dailyCostCap, m.scheduleInterval,
		m.stats, m.running, m.fleet, m.fleetSkipped,
		m.waits.duration, m.waits.polls, m.webhooks, m.triggers,
	)
	return m
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

// Registry returns the registry, for callers that register more collectors (asynq's exporter).
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Handler serves the registry with OpenMetrics negotiation enabled, so exemplars are exposed.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		EnableOpenMetrics: true,
		Registry:          m.reg, // counts promhttp's own errors
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelError),
	})
}

// AttemptStarted counts an attempt that began running.
func (m *Metrics) AttemptStarted(template, loop string) {
	if m == nil {
		return
	}
	m.attemptsStarted.WithLabelValues(template, loop).Inc()
}

// AttemptFinished counts an attempt's exit and observes its duration and steps.
func (m *Metrics) AttemptFinished(template, loop string, reason workitems.ExitReason, d time.Duration, steps int64, itemID string) {
	if m == nil {
		return
	}
	r := string(reason)
	if !slices.Contains(workitems.AllExitReasons(), reason) {
		r = "unknown"
	}
	ex := exemplar(itemID)
	addCounter(m.attempts.WithLabelValues(template, loop, r), 1, ex)
	observe(m.attemptDuration.WithLabelValues(template, loop), max(d.Seconds(), 0), ex)
	observe(m.attemptSteps.WithLabelValues(template, loop), float64(max(steps, 0)), ex)
}

// AddSpend adds a spend delta (what one checkpoint or an exit charged) to the per-kind
// counters. Zero and negative parts are ignored (counters only go up; a negative delta is a
// caller's bookkeeping bug, not spend). Steps are not spend here: AttemptFinished observes them.
func (m *Metrics) AddSpend(template, loop string, delta workitems.Spend, itemID string) {
	if m == nil {
		return
	}
	ex := exemplar(itemID)
	add := func(c *prometheus.CounterVec, v float64, extra ...string) {
		if v > 0 {
			addCounter(c.WithLabelValues(append([]string{template, loop}, extra...)...), v, ex)
		}
	}
	add(m.spendTokens, float64(delta.InputTokens), "input")
	add(m.spendTokens, float64(delta.CachedInputTokens), "cached_input")
	add(m.spendTokens, float64(delta.OutputTokens), "output")
	add(m.spendModelCalls, float64(delta.ModelCalls))
	add(m.spendToolCalls, float64(delta.ToolCalls))
	add(m.spendCost, delta.CostUSD)
	add(m.spendWall, delta.WallTime.D().Seconds())
}

// AddModelSpend adds the cost and tokens of a spend delta to the per-provider and per-model
// counters. provider is the config key of the provider the attempt used and model the model it
// asked for; a provider the config does not name, or a model other than the one configured for
// it, is counted as "other".
func (m *Metrics) AddModelSpend(template, provider, model string, delta workitems.Spend, itemID string) {
	if m == nil {
		return
	}
	provider, model = m.cfg.Load().modelLabels(provider, model)
	ex := exemplar(itemID)
	add := func(c *prometheus.CounterVec, v float64, extra ...string) {
		if v > 0 {
			addCounter(c.WithLabelValues(append([]string{template, provider, model}, extra...)...), v, ex)
		}
	}
	add(m.modelCost, delta.CostUSD)
	add(m.modelTokens, float64(delta.InputTokens), "input")
	add(m.modelTokens, float64(delta.CachedInputTokens), "cached_input")
	add(m.modelTokens, float64(delta.OutputTokens), "output")
}

// Decision counts a decision on an item: by the verifier (rule is the policy rule that fired)
// or by a person (rule is ignored; counted as workitems.RulePerson). A composite such as
// "max_attempts (after tests_failed)" is counted under the rule that decided (RuleName.Base),
// and anything outside workitems.AllRuleNames as "other", so the label set stays the policy's.
func (m *Metrics) Decision(template string, actor workitems.ActorKind, outcome workitems.Outcome, rule workitems.RuleName, itemID string) {
	if m == nil {
		return
	}
	if !slices.Contains(workitems.AllActorKinds(), actor) {
		actor = workitems.ActorPerson // only the verifier names itself
	}
	o := string(outcome)
	if !slices.Contains(actor.Outcomes(), outcome) {
		o = other
	}
	if actor == workitems.ActorPerson {
		rule = workitems.RulePerson
	}
	ex := exemplar(itemID)
	addCounter(m.decisions.WithLabelValues(template, o, string(actor)), 1, ex)
	addCounter(m.decisionRules.WithLabelValues(template, o, ruleLabel(rule)), 1, ex)
}

// Delivery counts what became of a closed item's change (workitems.AllDeliveryOutcomes): a pull
// request opened or updated, merged, declined, nothing to deliver (unchanged), a patch kept, a
// branch pushed, or a failed delivery. Anything else is counted as "other".
func (m *Metrics) Delivery(template string, outcome workitems.DeliveryOutcome, itemID string) {
	if m == nil {
		return
	}
	o := string(outcome)
	if !slices.Contains(workitems.AllDeliveryOutcomes(), outcome) {
		o = other
	}
	addCounter(m.deliveries.WithLabelValues(template, o), 1, exemplar(itemID))
}

// PullRequestAction counts one thing outerloop did to a pull request or branch people share
// (workitems.AllPullRequestActions; publish.Observer).
func (m *Metrics) PullRequestAction(template string, action workitems.DeliveryStep) {
	if m == nil {
		return
	}
	a := string(action)
	if !slices.Contains(workitems.AllPullRequestActions(), action) {
		a = other
	}
	m.prActions.WithLabelValues(template, a).Inc()
}

func ruleLabel(rule workitems.RuleName) string {
	if r := rule.Base(); slices.Contains(workitems.AllRuleNames(), r) {
		return string(r)
	}
	return other
}

// NetworkRefused counts n connections the registries proxy refused to one of the template's
// commands; a reason outside egress.Reasons is folded into other.
func (m *Metrics) NetworkRefused(template, reason string, n int) {
	if m == nil || n <= 0 {
		return
	}
	if !slices.Contains(egress.Reasons(), egress.Reason(reason)) {
		reason = other
	}
	m.sandboxRefused.WithLabelValues(template, reason).Add(float64(n))
}

// CheckpointWrite observes the latency of one checkpoint write.
func (m *Metrics) CheckpointWrite(d time.Duration) {
	if m == nil {
		return
	}
	m.checkpointWrite.Observe(max(d.Seconds(), 0))
}

// SchedulerTick counts a cron tick that created an item.
func (m *Metrics) SchedulerTick(template string) {
	if m == nil {
		return
	}
	m.schedulerTicks.WithLabelValues(template).Inc()
}

// SchedulerSkip counts a tick that created no item; reason is SkipMaxOpen, SkipDailyCap or
// SkipPaused (anything else is counted as "other").
func (m *Metrics) SchedulerSkip(template, reason string) {
	if m == nil {
		return
	}
	if reason != SkipMaxOpen && reason != SkipDailyCap && reason != SkipPaused {
		reason = skipOther
	}
	m.schedulerSkips.WithLabelValues(template, reason).Inc()
}

// SchedulerMisfire counts n ticks that did not run at their time because no scheduler ran.
func (m *Metrics) SchedulerMisfire(template string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.schedulerMisfires.WithLabelValues(template).Add(float64(n))
}

// ModelRequest observes one model request; errClass is "" on success, else a
// workitems.ErrorClass (unknown values are counted as "unknown"). A provider the config does not
// name is counted as "other".
func (m *Metrics) ModelRequest(provider string, d time.Duration, errClass string) {
	if m == nil {
		return
	}
	provider, _ = m.cfg.Load().modelLabels(provider, "")
	m.modelRequest.WithLabelValues(provider).Observe(max(d.Seconds(), 0))
	if errClass == "" {
		return
	}
	if !slices.Contains(workitems.AllErrorClasses(), workitems.ErrorClass(errClass)) {
		errClass = string(workitems.ClassUnknown)
	}
	m.modelErrors.WithLabelValues(provider, errClass).Inc()
}

// SetRunningCost records the cost an attempt running in this process has been charged so far
// (its checkpoints); the process exports the sum per template and loop, so the spend of attempts
// still running is visible before they exit. ClearRunningCost removes it when the attempt stops
// running here (exit, yield, lost lease, cancel).
func (m *Metrics) SetRunningCost(template, loop, itemID string, usd float64) {
	if m == nil {
		return
	}
	m.running.set(itemID, template, loop, usd)
}

// ClearRunningCost forgets an attempt's running cost (see SetRunningCost).
func (m *Metrics) ClearRunningCost(itemID string) {
	if m == nil {
		return
	}
	m.running.clear(itemID)
}

// SetStatsSource sets the function read on every scrape for the store's aggregate view.
func (m *Metrics) SetStatsSource(f func(ctx context.Context) (workitems.Stats, error)) {
	if m == nil {
		return
	}
	m.stats.setSource(f)
}

// exemplar returns the item_id exemplar labels, or nil when there is no id or it would break
// client_golang's exemplar limits (which panic).
func exemplar(itemID string) prometheus.Labels {
	if itemID == "" || !utf8.ValidString(itemID) || utf8.RuneCountInString("item_id")+utf8.RuneCountInString(itemID) > exemplarMaxRunes {
		return nil
	}
	return prometheus.Labels{"item_id": itemID}
}

func addCounter(c prometheus.Counter, v float64, ex prometheus.Labels) {
	if ea, ok := c.(prometheus.ExemplarAdder); ok && ex != nil {
		ea.AddWithExemplar(v, ex)
		return
	}
	c.Add(v)
}

func observe(o prometheus.Observer, v float64, ex prometheus.Labels) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && ex != nil {
		eo.ObserveWithExemplar(v, ex)
		return
	}
	o.Observe(v)
}

// guarded is a value read by Collect while setters may run.
type guarded[T any] struct {
	mu sync.Mutex
	v  T
}

func (g *guarded[T]) set(v T) { g.mu.Lock(); g.v = v; g.mu.Unlock() }

func (g *guarded[T]) get() T { g.mu.Lock(); defer g.mu.Unlock(); return g.v }
