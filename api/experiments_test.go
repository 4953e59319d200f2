package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"outerloop/api"
	"outerloop/evals"
	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// expFixture is the API with experiments wired to an evals.Runner over a real eval namespace
// (experiment store, item store and queue) on the shared Redis.
type expFixture struct {
	*fixture
	runner *evals.Runner
}

func newExperimentsFixture(t *testing.T) *expFixture {
	t.Helper()
	return newExperimentsFixtureAuth(t, api.NewAuth(token))
}

func newExperimentsFixtureAuth(t *testing.T, auth *api.Auth) *expFixture {
	t.Helper()
	cfg, err := config.ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	client := asynq.NewClient(redistest.AsynqOpt(t))
	t.Cleanup(func() { _ = client.Close() })
	store := itemstore.NewStore(env.Client, env.Prefix)
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue})
	evStore := itemstore.NewStore(env.Client, evals.ItemPrefix(env.Prefix))
	evQueue := scheduler.NewQueue(evStore, client, nil, cfg, scheduler.QueueOptions{Queue: env.Queue + "-eval"})
	r := &evals.Runner{Exps: evals.NewStore(env.Client, env.Prefix), Queue: evQueue,
		Config: func() *config.Config { return cfg }, Clock: workitems.SystemClock{}}
	s := api.New(api.Options{Queue: q, Auth: auth, Experiments: r})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &expFixture{fixture: &fixture{srv: srv, server: s, store: store, queue: q}, runner: r}
}

// experiment stores an experiment of tasks t1…tN of template t1 under variants A and B, once
// each, created at created, and records runs; it returns the experiment.
func (f *expFixture) experiment(t *testing.T, id string, tasks int, created time.Time, runs []evals.Run) *evals.Experiment {
	t.Helper()
	e := &evals.Experiment{ID: id, Suite: evals.Suite{Name: "calc-fixes"}, Repeat: 1, BudgetUSD: 20,
		Variants:      []evals.VariantSpec{{Name: "A", Source: "a.yaml"}, {Name: "B", Overlay: "goal: hunter2 goal\n", Source: "b.yaml"}},
		ConfigVersion: "v1", State: evals.StateRunning, CreatedAt: created,
		Versions: evals.Versions{Config: "v1", Templates: map[string]string{"t1": "p1"},
			Variants: map[string]map[string]string{"A": {"t1": "a1"}, "B": {"t1": "b1"}}}}
	for i := 1; i <= tasks; i++ {
		e.Suite.Tasks = append(e.Suite.Tasks, evals.Task{ID: fmt.Sprintf("t%d", i), Template: "t1"})
	}
	ctx := context.Background()
	if err := f.runner.Exps.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if err := f.runner.Exps.RecordRun(ctx, id, r); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// fourTasks are runs of t1…t4: A closes t1, t2, t3; B closes t1, t2 (t3 is a regression).
func fourTasks() []evals.Run {
	var runs []evals.Run
	for i := 1; i <= 4; i++ {
		task := fmt.Sprintf("t%d", i)
		runs = append(runs,
			evals.Run{Task: task, Variant: "A", Closed: i <= 3, Exit: "completed", CostUSD: 0.20, WallTime: 40 * time.Second, ModelCalls: 6, Tokens: 9000},
			evals.Run{Task: task, Variant: "B", Closed: i <= 2, Exit: "completed", CostUSD: 0.05, WallTime: 30 * time.Second, ModelCalls: 8, Tokens: 12000})
	}
	return runs
}

func (f *expFixture) getJSON(t *testing.T, path string, v any) int {
	t.Helper()
	res, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return res.StatusCode
}

// TestExperimentReportIsTheCLIReportPlusProgress checks that GET /api/experiments/{id} carries
// the report exactly as `eval report --json` prints it (the same BuildReport over the same
// runs), the experiment without its overlays, and the progress.
func TestExperimentReportIsTheCLIReportPlusProgress(t *testing.T) {
	t.Parallel()
	f := newExperimentsFixture(t)
	runs := fourTasks()
	f.experiment(t, "x1", 4, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), runs[:6]) // t4 still running

	var got map[string]any
	if code := f.getJSON(t, "/api/experiments/x1", &got); code != http.StatusOK {
		t.Fatalf("GET x1: %d %v", code, got)
	}
	// The CLI's JSON: what `outerloop eval report x1 --json` encodes.
	rep, _, err := f.runner.Report(context.Background(), "x1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	var want any
	_ = json.Unmarshal(b, &want)
	if !reflect.DeepEqual(got["report"], want) {
		t.Errorf("report\n got %v\nwant %v", got["report"], want)
	}
	r := got["report"].(map[string]any)
	a := r["variants"].(map[string]any)["A"].(map[string]any)
	if a["close_rate"] != 1.0 || a["runs"] != 3.0 || r["pairs"].([]any)[0].(map[string]any)["baseline_only"] != 1.0 {
		t.Errorf("report numbers: A %v, pairs %v", a, r["pairs"])
	}

	pr, ok := got["progress"].(map[string]any)
	if !ok {
		t.Fatalf("no progress: %v", got["progress_error"])
	}
	closed := pr["closed"].(map[string]any)
	if pr["done"] != 6.0 || pr["total"] != 8.0 || pr["state"] != "running" || closed["A"] != 3.0 || closed["B"] != 2.0 ||
		pr["spent_usd"].(float64) < 0.749 || pr["spent_usd"].(float64) > 0.751 {
		t.Errorf("progress %v, want 6 of 8 done, A closed 3, B 2, 0.75 USD spent", pr)
	}
	e := got["experiment"].(map[string]any)
	if e["id"] != "x1" || e["suite"] != "calc-fixes" || e["done"] != 6.0 || e["total"] != 8.0 || e["repeat"] != 1.0 || e["tasks"] != 4.0 {
		t.Errorf("experiment %v", e)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), "hunter2") {
		t.Errorf("a variant's overlay reached the API: %s", b)
	}
	if vs := e["variants"].([]any); len(vs) != 2 || vs[1].(map[string]any)["name"] != "B" || vs[1].(map[string]any)["source"] != "b.yaml" {
		t.Errorf("variants %v", vs)
	}
	// The versions it ran under, in the experiment and in the report alike.
	wantVersions := map[string]any{"config": "v1", "templates": map[string]any{"t1": "p1"},
		"variants": map[string]any{"A": map[string]any{"t1": "a1"}, "B": map[string]any{"t1": "b1"}}}
	if !reflect.DeepEqual(e["versions"], wantVersions) || !reflect.DeepEqual(r["versions"], wantVersions) {
		t.Errorf("versions: experiment %v, report %v, want %v", e["versions"], r["versions"], wantVersions)
	}
}

// TestExperimentsArePagedNewestFirst lists three experiments a page at a time, each with its
// recorded runs counted, and refuses bad input naming it.
func TestExperimentsArePagedNewestFirst(t *testing.T) {
	t.Parallel()
	f := newExperimentsFixture(t)
	day := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.experiment(t, "old", 1, day, fourTasks()[:2])
	f.experiment(t, "mid", 2, day.Add(time.Hour), nil)
	f.experiment(t, "new", 4, day.Add(2*time.Hour), fourTasks()[:5])

	type page struct {
		Experiments []api.ExperimentView `json:"experiments"`
		Total       int                  `json:"total"`
		Offset      int                  `json:"offset"`
		Limit       int                  `json:"limit"`
	}
	var p page
	if code := f.getJSON(t, "/api/experiments?limit=2", &p); code != http.StatusOK || p.Total != 3 || p.Limit != 2 || len(p.Experiments) != 2 ||
		p.Experiments[0].ID != "new" || p.Experiments[1].ID != "mid" {
		t.Fatalf("first page: %d %+v", code, p)
	}
	if n := p.Experiments[0]; n.Done != 5 || n.Total != 8 || n.State != evals.StateRunning || n.Suite != "calc-fixes" ||
		len(n.Variants) != 2 || !n.CreatedAt.Equal(day.Add(2*time.Hour)) {
		t.Errorf("newest %+v, want 5 of 8 done", n)
	}
	p = page{}
	if code := f.getJSON(t, "/api/experiments?offset=2&limit=2", &p); code != http.StatusOK || p.Total != 3 || len(p.Experiments) != 1 ||
		p.Experiments[0].ID != "old" || p.Experiments[0].Done != 2 || p.Experiments[0].Total != 2 {
		t.Fatalf("second page: %d %+v", code, p)
	}
	p = page{}
	if code := f.getJSON(t, "/api/experiments?offset=9", &p); code != http.StatusOK || p.Total != 3 || p.Experiments == nil || len(p.Experiments) != 0 {
		t.Fatalf("past the end: %d %+v, want an empty list", code, p)
	}
	// An experiment that ended says so in the list.
	if _, err := f.runner.Exps.End(context.Background(), "mid", evals.StateStopped, "budget", day.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	p = page{}
	f.getJSON(t, "/api/experiments?offset=1&limit=1", &p)
	if len(p.Experiments) != 1 || p.Experiments[0].State != evals.StateStopped || p.Experiments[0].Reason != "budget" ||
		!p.Experiments[0].EndedAt.Equal(day.Add(3*time.Hour)) {
		t.Errorf("stopped experiment: %+v", p.Experiments)
	}

	for _, tc := range []struct{ path, says string }{
		{"/api/experiments?limit=0", "limit"},
		{"/api/experiments?limit=x", "limit"},
		{"/api/experiments?offset=-1", "offset"},
		{"/api/experiments?offset=y", "offset"},
	} {
		var m map[string]string
		if code := f.getJSON(t, tc.path, &m); code != http.StatusBadRequest || !strings.Contains(m["error"], tc.says) {
			t.Errorf("GET %s: %d %v, want 400 naming %s", tc.path, code, m, tc.says)
		}
	}
	var m map[string]string
	if code := f.getJSON(t, "/api/experiments/nope", &m); code != http.StatusNotFound || !strings.Contains(m["error"], `experiment "nope"`) {
		t.Errorf("unknown experiment: %d %v, want 404 naming it", code, m)
	}
}

// TestExperimentsAreAbsentWhenEvalsAreNotWired: without Options.Experiments the routes are not
// there.
func TestExperimentsAreAbsentWhenEvalsAreNotWired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, token)
	for _, p := range []string{"/api/experiments", "/api/experiments/x1"} {
		if code, _ := f.do(t, "GET", p, "", ""); code != http.StatusNotFound {
			t.Errorf("GET %s without evals: %d, want 404", p, code)
		}
	}
}

// TestAnExperimentThatNoLongerBuildsStillHasItsReport: an experiment whose template left the
// config cannot say what its open runs do, but its recorded runs still make a report.
func TestAnExperimentThatNoLongerBuildsStillHasItsReport(t *testing.T) {
	t.Parallel()
	f := newExperimentsFixture(t)
	e := &evals.Experiment{ID: "gone1", Suite: evals.Suite{Name: "s", Tasks: []evals.Task{{ID: "t1", Template: "removed"}}},
		Variants: []evals.VariantSpec{{Name: "A"}}, Repeat: 1, State: evals.StateFinished, CreatedAt: time.Now().UTC()}
	ctx := context.Background()
	if err := f.runner.Exps.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := f.runner.Exps.RecordRun(ctx, e.ID, evals.Run{Task: "t1", Variant: "A", Closed: true, CostUSD: 0.3}); err != nil {
		t.Fatal(err)
	}
	var got api.ExperimentDetail
	if code := f.getJSON(t, "/api/experiments/gone1", &got); code != http.StatusOK || got.Progress != nil ||
		!strings.Contains(got.ProgressError, `template "removed"`) || got.Report.Variants["A"].Closed != 1 || got.Experiment.Done != 1 {
		t.Fatalf("GET gone1: %d %+v", code, got)
	}
}

// TestExperimentsAreViewerReads: with OUTERLOOP_READ_LOGIN on, reading experiments needs a
// login like every GET /api/*, and a viewer's token is enough.
func TestExperimentsAreViewerReads(t *testing.T) {
	t.Parallel()
	const viewer = "viewer-token-0123456789abcdef"
	auth, err := api.NewAuthWith(api.AuthOptions{ReadLogin: true, Credentials: []api.Credential{{Name: "vic", Role: api.RoleViewer, Token: viewer}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newExperimentsFixtureAuth(t, auth)
	f.experiment(t, "x1", 1, time.Now().UTC(), nil)
	for _, p := range []string{"/api/experiments", "/api/experiments/x1"} {
		if code, _ := f.do(t, "GET", p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a login: %d, want 401", p, code)
		}
		if code, m := f.do(t, "GET", p, "", viewer); code != http.StatusOK {
			t.Errorf("GET %s as a viewer: %d %v, want 200", p, code, m)
		}
	}
}
