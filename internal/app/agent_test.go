package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/redistest"
	"outerloop/lib/testlog"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// TestAgentTemplateRunsThroughTheWorkerAndNoSecretLeaks runs a `loop: agent` template through
// the real worker, against a local Responses-API server that needs an API key, then searches
// every Redis value the run wrote, the logs and /metrics for the key.
func TestAgentTemplateRunsThroughTheWorkerAndNoSecretLeaks(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	// The repo's code is already right: the model only has to look and say so.
	if err := sample.Fix(repo); err != nil {
		t.Fatal(err)
	}
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(
		modeltest.ToolCalls(model.Item{Kind: model.KindFunctionCall, CallID: "c1", Name: "read_file", Arguments: `{"path":"calc.go"}`}),
		modeltest.Text("Add already adds; nothing to change."),
	)
	y := fmt.Sprintf(`
defaults:
  budget: {wall_time: 5m, verify_reserve: 1m, model_calls: 10}
providers:
  local:
    kind: openai-responses
    base_url: %s
    api_key_env: %s
    model: %s
    prices: {input_per_mtok: 1, output_per_mtok: 2}
templates:
  - name: look
    repo: %s
    goal: Check Add and fix it if needed.
    loop: {kind: agent, provider: local}
    done_check: {commands: ["go test -json ./..."]}
`, srv.URL, modeltest.KeyEnv, modeltest.Model, repo)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	env := redistest.New(t)
	loop := agentloop.New(agentloop.WithProviderFactory(func(pc config.ProviderConfig, name string) (model.Provider, error) {
		return model.New(pc, name, srv.Getenv, nil)
	}))
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue,
		Workdir: t.TempDir(), Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Loops: map[workitems.LoopKind]worker.InnerLoop{"agent": loop}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	startAppWorker(t, a, 1, "agent-worker")
	it := submitAndAwait(t, a, "look", workitems.StateClosed, workitems.StateEscalated)
	if it.State != workitems.StateClosed {
		t.Fatalf("agent item: %s %+v", it.State, it.Decisions)
	}
	if it.Spend.ModelCalls != 2 || it.Spend.ToolCalls != 1 || it.Spend.CostUSD <= 0 {
		t.Fatalf("agent spend must be charged to the item: %+v", it.Spend)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[0].Authorized {
		t.Fatalf("model requests: %d, authorized=%v", len(reqs), len(reqs) > 0 && reqs[0].Authorized)
	}

	// The key must be nowhere: not in any Redis value, not in the logs, not in /metrics.
	dump := dumpPrefix(t, env.Client, env.Prefix)
	if !strings.Contains(dump, "read_file") {
		t.Fatal("the dump should contain the run's history (sanity check of the search)")
	}
	rec := httptest.NewRecorder()
	a.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for where, text := range map[string]string{"redis": dump, "logs": logs.String(), "metrics": rec.Body.String()} {
		if strings.Contains(text, modeltest.Key) {
			t.Errorf("the API key appears in %s", where)
		}
	}
}

// dumpPrefix returns every value under prefix (strings, lists, hashes, streams) as text.
func dumpPrefix(t *testing.T, c *redis.Client, prefix string) string {
	t.Helper()
	ctx := context.Background()
	var out strings.Builder
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch c.Type(ctx, k).Val() {
		case "string":
			out.WriteString(c.Get(ctx, k).Val())
		case "list":
			out.WriteString(strings.Join(c.LRange(ctx, k, 0, -1).Val(), "\n"))
		case "hash":
			fmt.Fprint(&out, c.HGetAll(ctx, k).Val())
		case "set":
			fmt.Fprint(&out, c.SMembers(ctx, k).Val())
		case "stream":
			for _, m := range c.XRange(ctx, k, "-", "+").Val() {
				fmt.Fprint(&out, m.Values)
			}
		}
		out.WriteString("\n")
	}
	return out.String()
}
