package metrics_test

import (
	"testing"

	"github.com/hibiken/asynq"

	"outerloop/lib/redistest"
	"outerloop/metrics"
)

func TestRegisterQueuesServesAsynqsQueueMetrics(t *testing.T) {
	t.Parallel()
	env := redistest.New(t)
	opt := redistest.AsynqOpt(t)
	client := asynq.NewClient(opt)
	defer client.Close()
	for range 2 {
		if _, err := client.Enqueue(asynq.NewTask("outerloop:attempt", nil), asynq.Queue(env.Queue)); err != nil {
			t.Fatal(err)
		}
	}
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()

	m := metrics.New()
	if err := m.RegisterQueues(inspector); err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterQueues(inspector); err == nil {
		t.Error("registering asynq's exporter twice succeeded; it would duplicate every queue series")
	}

	want := map[string]float64{
		`asynq_queue_size{queue="` + env.Queue + `"}`:                           2,
		`asynq_tasks_enqueued_total{queue="` + env.Queue + `",state="pending"}`: 2,
		`asynq_queue_latency_seconds{queue="` + env.Queue + `"}`:                -1, // present; value depends on timing
		`asynq_tasks_processed_total{queue="` + env.Queue + `"}`:                0,
		`asynq_tasks_failed_total{queue="` + env.Queue + `"}`:                   0,
	}
	// asynq's exporter drops a whole scrape when a queue listed a moment earlier is gone
	// (other tests delete theirs concurrently on the shared server), so take the first of a
	// few scrapes that has this test's queue in it.
	var samples map[string]float64
	for range 10 {
		samples = scrapeQueues(t, m)
		if _, ok := samples[`asynq_queue_size{queue="`+env.Queue+`"}`]; ok {
			break
		}
	}
	for k, v := range want {
		got, ok := samples[k]
		switch {
		case !ok:
			t.Errorf("%s is not exported", k)
		case v >= 0 && got != v:
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
}

// scrapeQueues is scrape with asynq's label order (queue, state).
func scrapeQueues(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			key := mf.GetName() + "{"
			for i, lp := range mm.GetLabel() { // Gather sorts by name: queue before state
				if i > 0 {
					key += ","
				}
				key += lp.GetName() + `="` + lp.GetValue() + `"`
			}
			key += "}"
			switch {
			case mm.GetGauge() != nil:
				out[key] = mm.GetGauge().GetValue()
			case mm.GetCounter() != nil:
				out[key] = mm.GetCounter().GetValue()
			}
		}
	}
	return out
}
