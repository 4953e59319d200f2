package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// runningCollector exports the attempts this process runs and what their checkpoints have
// charged so far. It is kept in memory (no store read), so it is there while Redis is not;
// when the process dies its attempts stop running here and its series go with it.
type runningCollector struct {
	m        *Metrics
	mu       sync.Mutex
	attempts map[string]runningAttempt // item id → attempt

	cost  *prometheus.Desc
	count *prometheus.Desc
}

type runningAttempt struct {
	template, loop string
	usd            float64
}

func newRunningCollector(m *Metrics) *runningCollector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	return &runningCollector{
		m:        m,
		attempts: map[string]runningAttempt{},
		cost: prometheus.NewDesc(name("running_attempts_cost_usd"),
			"Cost charged so far by the attempts running in this process (sum over processes: spend of attempts still running).",
			[]string{"template", "loop"}, nil),
		count: prometheus.NewDesc(name("running_attempts"),
			"Attempts running in this process.", []string{"template", "loop"}, nil),
	}
}

func (c *runningCollector) set(item, template, loop string, usd float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts[item] = runningAttempt{template: template, loop: loop, usd: max(usd, 0)}
}

func (c *runningCollector) clear(item string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.attempts, item)
}

// Describe implements prometheus.Collector.
func (c *runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cost
	ch <- c.count
}

// Collect implements prometheus.Collector: every configured template with its loop at zero, plus
// the sums of the attempts running now.
func (c *runningCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ template, loop string }
	type sum struct {
		usd float64
		n   int
	}
	sums := map[key]sum{}
	for _, t := range c.m.cfg.Load().templates {
		sums[key{t.name, t.loop}] = sum{}
	}
	c.mu.Lock()
	for _, a := range c.attempts {
		k := key{a.template, a.loop}
		s := sums[k]
		s.usd += a.usd
		s.n++
		sums[k] = s
	}
	c.mu.Unlock()
	for k, s := range sums {
		ch <- prometheus.MustNewConstMetric(c.cost, prometheus.GaugeValue, s.usd, k.template, k.loop)
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(s.n), k.template, k.loop)
	}
}
