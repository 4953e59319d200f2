// Package metrics owns outerloop's Prometheus metrics: the collectors on their own registry, the
// /metrics handler (OpenMetrics, so exemplars carry item ids), and the scrape-time view of the
// store (items by state, escalations, today's cost). Names and labels here are the contract the
// dashboards and alert rules in dashboards/ are tested against.
//
// Labels are small fixed sets (template, loop, reason, outcome, rule, kind, scope, state,
// provider, class). Item ids never become labels; they ride on exemplars as item_id.
//
// Every method is safe on a nil *Metrics and does nothing, so callers and tests may pass nil.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/robfig/cron/v3"

	"outerloop/workitems"
)

const namespace = "outerloop"

// Bucket layouts. Attempts run minutes to hours; checkpoints are Redis writes (milliseconds);
// model requests stream for seconds to minutes.
var (
	attemptDurationBuckets = []float64{10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800}
	attemptStepsBuckets    = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}
	checkpointBuckets      = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
	modelRequestBuckets    = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}
)

// Scheduler skip reasons; anything else is counted as "other" to keep the label set fixed.
const (
	SkipMaxOpen  = "max_open"
	SkipDailyCap = "daily_cap"
	skipOther    = "other"
)

// exemplarMaxRunes is client_golang's limit on an exemplar's label names and values together.
const exemplarMaxRunes = prometheus.ExemplarMaxRunes

// Option configures New.
type Option func(*Metrics)

// WithClock sets the clock used for ages computed at scrape time and for schedule gaps
// (default time.Now).
func WithClock(now func() time.Time) Option { return func(m *Metrics) { m.now = now } }

// WithLogger sets the logger for scrape-time errors (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(m *Metrics) { m.log = l } }

// WithStatsTimeout bounds one call of the stats source during a scrape (default 5s).
func WithStatsTimeout(d time.Duration) Option { return func(m *Metrics) { m.statsTimeout = d } }

// Metrics holds every outerloop collector on one registry.
type Metrics struct {
	reg          *prometheus.Registry
	now          func() time.Time
	log          *slog.Logger
	statsTimeout time.Duration

	attemptsStarted *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	attemptSteps    *prometheus.HistogramVec

	spendTokens     *prometheus.CounterVec
	spendModelCalls *prometheus.CounterVec
	spendToolCalls  *prometheus.CounterVec
	spendCost       *prometheus.CounterVec
	spendWall       *prometheus.CounterVec

	decisions *prometheus.CounterVec

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
}

// New returns metrics on their own registry, with the Go and process collectors.
func New(opts ...Option) *Metrics {
	m := &Metrics{
		reg:          prometheus.NewRegistry(),
		now:          time.Now,
		log:          slog.Default(),
		statsTimeout: 5 * time.Second,
	}
	for _, o := range opts {
		o(m)
	}
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
	m.spendTokens = counterVec("spend_tokens_total", "Model tokens spent, by direction (input, cached_input, output).", "template", "loop", "direction")
	m.spendModelCalls = counterVec("spend_model_calls_total", "Model calls spent.", tl...)
	m.spendToolCalls = counterVec("spend_tool_calls_total", "Tool calls spent.", tl...)
	m.spendCost = counterVec("spend_cost_usd_total", "Cost spent in USD, from the providers' price tables.", tl...)
	m.spendWall = counterVec("spend_wall_seconds_total", "Attempt wall time spent in seconds.", tl...)
	m.decisions = counterVec("decisions_total", "Verifier (or human) decisions, by outcome and the policy rule that fired.", "template", "outcome", "rule")
	m.checkpointWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "checkpoint_write_duration_seconds",
		Help:    "Latency of checkpoint writes to the store.",
		Buckets: checkpointBuckets,
	})
	m.schedulerTicks = counterVec("scheduler_ticks_total", "Cron ticks handled by the scheduler.", "template")
	m.schedulerSkips = counterVec("scheduler_skips_total", "Cron ticks that created no item, by reason (max_open, daily_cap).", "template", "reason")
	m.schedulerMisfires = counterVec("scheduler_misfires_total", "Cron ticks missed while no scheduler ran.", "template")
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
		Help: "Longest gap between two cron ticks of a scheduled template over the next week (absent: no schedule).",
	}, []string{"template"})
	m.stats = newStatsCollector(m)

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.attemptsStarted, m.attempts, m.attemptDuration, m.attemptSteps,
		m.spendTokens, m.spendModelCalls, m.spendToolCalls, m.spendCost, m.spendWall,
		m.decisions, m.checkpointWrite,
		m.schedulerTicks, m.schedulerSkips, m.schedulerMisfires,
		m.modelRequest, m.modelErrors,
		m.budgetCap, m.dailyCostCap, m.scheduleInterval,
		m.stats,
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

// AddSpend adds a spend delta to the per-kind counters. Zero and negative parts are ignored
// (counters only go up; a negative delta is a caller's bookkeeping bug, not spend). Steps are
// not spend here: AttemptFinished observes them.
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

// Decision counts a decision on an item. rule is the policy rule that fired (a fixed set).
func (m *Metrics) Decision(template string, outcome workitems.Outcome, rule string, itemID string) {
	if m == nil {
		return
	}
	addCounter(m.decisions.WithLabelValues(template, string(outcome), rule), 1, exemplar(itemID))
}

// CheckpointWrite observes the latency of one checkpoint write.
func (m *Metrics) CheckpointWrite(d time.Duration) {
	if m == nil {
		return
	}
	m.checkpointWrite.Observe(max(d.Seconds(), 0))
}

// SchedulerTick counts a cron tick handled for a template.
func (m *Metrics) SchedulerTick(template string) {
	if m == nil {
		return
	}
	m.schedulerTicks.WithLabelValues(template).Inc()
}

// SchedulerSkip counts a tick that created no item; reason is SkipMaxOpen or SkipDailyCap
// (anything else is counted as "other").
func (m *Metrics) SchedulerSkip(template, reason string) {
	if m == nil {
		return
	}
	if reason != SkipMaxOpen && reason != SkipDailyCap {
		reason = skipOther
	}
	m.schedulerSkips.WithLabelValues(template, reason).Inc()
}

// SchedulerMisfire counts a tick missed while no scheduler ran.
func (m *Metrics) SchedulerMisfire(template string) {
	if m == nil {
		return
	}
	m.schedulerMisfires.WithLabelValues(template).Inc()
}

// ModelRequest observes one model request; errClass is "" on success, else a
// workitems.ErrorClass (unknown values are counted as "unknown").
func (m *Metrics) ModelRequest(provider string, d time.Duration, errClass string) {
	if m == nil {
		return
	}
	m.modelRequest.WithLabelValues(provider).Observe(max(d.Seconds(), 0))
	if errClass == "" {
		return
	}
	if !slices.Contains(workitems.AllErrorClasses(), workitems.ErrorClass(errClass)) {
		errClass = string(workitems.ClassUnknown)
	}
	m.modelErrors.WithLabelValues(provider, errClass).Inc()
}

// SetTemplates replaces the cap gauges with the templates' configured caps: per attempt
// (scope "attempt"), per item (scope "item"), and the daily cost cap. Kinds without a cap are
// absent, so a dashboard draws no line at zero. Scheduled templates also export the longest
// gap between their ticks (alerts use it to tell nightly templates from weekly ones), and
// every template gets zero-valued item counts.
func (m *Metrics) SetTemplates(ts []workitems.Template) {
	if m == nil {
		return
	}
	m.budgetCap.Reset()
	m.dailyCostCap.Reset()
	m.scheduleInterval.Reset()
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		names = append(names, t.Name)
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
		if gap, ok := maxScheduleInterval(t.Schedule, m.now()); ok {
			m.scheduleInterval.WithLabelValues(t.Name).Set(gap.Seconds())
		}
	}
	m.stats.setTemplates(names)
}

// SetStatsSource sets the function read on every scrape for the store's aggregate view.
func (m *Metrics) SetStatsSource(f func(ctx context.Context) (workitems.Stats, error)) {
	if m == nil {
		return
	}
	m.stats.setSource(f)
}

// maxScheduleInterval returns the longest gap between consecutive ticks of a cron spec over
// the week after from (a weekday-only nightly schedule has a 72h gap over the weekend). At most
// a bounded number of ticks is walked, so an every-minute schedule costs little.
func maxScheduleInterval(spec string, from time.Time) (time.Duration, bool) {
	if spec == "" {
		return 0, false
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return 0, false // config validation reports it; metrics only skip it
	}
	const maxTicks = 2000
	end := from.Add(7 * 24 * time.Hour)
	prev := sched.Next(from)
	if prev.IsZero() {
		return 0, false
	}
	var gap time.Duration
	for range maxTicks {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		gap = max(gap, next.Sub(prev))
		if next.After(end) {
			break
		}
		prev = next
	}
	return gap, gap > 0
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
