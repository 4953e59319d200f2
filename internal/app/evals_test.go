package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"outerloop/evals"
	"outerloop/internal/app"
	"outerloop/internal/sample"
	"outerloop/lib/giteatest"
	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/notify"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/model"
	"outerloop/worker/model/modeltest"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// evalConfig is a production config with one template, fix-calc, on the sample repo: its
// script fixes nothing, so a variant decides what a run does.
func evalConfig(t *testing.T, repo, extra string) *config.Config {
	t.Helper()
	cfg, err := parseConfig([]byte(evalYAML(repo, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// evalYAML is evalConfig's text.
func evalYAML(repo, extra string) string {
	return fmt.Sprintf(`
defaults:
  max_attempts: 1
  budget: {wall_time: 2m, verify_reserve: 1m, cost_usd: 0.5}
templates:
  - name: fix-calc
    schedule: "*/10 * * * *"
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: ["echo nothing to do"]}
    done_check: {commands: ["go test -json ./..."]}
%s`, repo, extra)
}

// fixesTasks is a variant whose script fixes the bug for the tasks whose input is one of
// task-1 … task-n and leaves the others as they are.
func fixesTasks(t *testing.T, name string, n int) evals.Variant {
	t.Helper()
	script := fmt.Sprintf(`k=${OUTERLOOP_INPUT#task-}; if [ "$k" -le %d ]; then %s; echo fixed; else echo "not this one"; fi`, n, sample.FixCommand)
	v, err := evals.ParseVariant(name, []byte(fmt.Sprintf("loop:\n  commands: [%q]\n", script)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tenTasks() *evals.Suite {
	s := &evals.Suite{Name: "calc-fixes"}
	for i := 1; i <= 10; i++ {
		s.Tasks = append(s.Tasks, evals.Task{ID: fmt.Sprintf("t%02d", i), Template: "fix-calc", Input: fmt.Sprintf("task-%d", i)})
	}
	return s
}

// runExperiment prepares, starts and drives an experiment of plan to its end (5 minutes at
// most) and returns it with its last progress.
func runExperiment(t *testing.T, s *sys, plan evals.Plan) (*evals.Experiment, evals.Progress) {
	t.Helper()
	r := s.EvalRunner()
	e, err := r.Prepare(plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	pr, err := r.Drive(ctx, e.ID, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, pr
}

// TestAnExperimentComparesTwoVariantsOnRealRunsApartFromProduction runs ten tasks under a
// variant that fixes eight and one that fixes five, as real items through a real worker and
// Redis, and checks the report's numbers against values computed by hand, the gate, and that
// production saw nothing: no item in its lists, no notification, no template series.
func TestAnExperimentComparesTwoVariantsOnRealRunsApartFromProduction(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	hooks := make(chan string, 100) // the production template's webhook sink: what it was sent
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hooks <- string(b)
	}))
	defer recv.Close()
	y := strings.Replace(evalYAML(repo, fmt.Sprintf("notify:\n  sinks:\n    hook: {kind: webhook, url: %q, secret_env: OL_TEST_EVAL_SECRET}\n", recv.URL)),
		"    loop: {kind: script", "    notify: {sinks: [hook]}\n    loop: {kind: script", 1)
	cfg, err := parseConfig([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	ap, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix,
		Queue: env.Queue, Workdir: t.TempDir(), Logger: testLogger(t), Getenv: func(string) string { return "secret" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ap.Close)
	s := &sys{App: ap, env: env}
	d, err := ap.Dispatcher("w1")
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	defer d.Shutdown()
	s.startWorker(t, "w1")
	r := s.EvalRunner()
	e, pr := runExperiment(t, s, evals.Plan{Suite: tenTasks(), Variants: []evals.Variant{fixesTasks(t, "A", 8), fixesTasks(t, "B", 5)}, BudgetUSD: 20})
	if pr.State != evals.StateFinished || pr.Done != 20 || pr.Closed["A"] != 8 || pr.Closed["B"] != 5 {
		t.Fatalf("progress %+v: want finished, 20 done, A closed 8, B closed 5", pr)
	}
	rep, _, err := r.Report(context.Background(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Variants map[string]struct {
			Runs, Closed  int
			CloseRate     float64    `json:"close_rate"`
			CloseRateCI95 [2]float64 `json:"close_rate_ci95"`
			PassAtK       map[string]float64
		}
		Pairs []struct {
			Baseline, Candidate string
			Both                int
			BaselineOnly        int `json:"baseline_only"`
			CandidateOnly       int `json:"candidate_only"`
			Neither             int
			McNemarP            float64 `json:"mcnemar_p"`
		}
		Tasks []map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// Wilson at 95% for 8 of 10, by hand: z² = 3.8415, centre (8 + 1.9207)/13.8415 = 0.71674,
	// margin 1.95996·√(0.8·0.2/10 + 3.8415/400)/1.38415 = 0.22658 → [0.4902, 0.9433]; for 5 of
	// 10: centre 0.5, margin 1.95996·√(0.025 + 0.0096)/1.38415 = 0.26340 → [0.2366, 0.7634].
	a, bb := got.Variants["A"], got.Variants["B"]
	near := func(x, want float64) bool { return math.Abs(x-want) < 5e-5 }
	if a.Runs != 10 || a.Closed != 8 || !near(a.CloseRateCI95[0], 0.4902) || !near(a.CloseRateCI95[1], 0.9433) {
		t.Errorf("variant A: %+v, want 8 of 10 closed, interval [0.4902, 0.9433]", a)
	}
	if bb.Runs != 10 || bb.Closed != 5 || !near(bb.CloseRateCI95[0], 0.2366) || !near(bb.CloseRateCI95[1], 0.7634) {
		t.Errorf("variant B: %+v, want 5 of 10 closed, interval [0.2366, 0.7634]", bb)
	}
	// Paired: both closed t01-t05, only A t06-t08, neither t09-t10; exact McNemar on 3
	// discordant pairs all one way: 2·(1/2)³ = 0.25.
	if len(got.Pairs) != 1 {
		t.Fatalf("pairs: %+v", got.Pairs)
	}
	p := got.Pairs[0]
	if p.Both != 5 || p.BaselineOnly != 3 || p.CandidateOnly != 0 || p.Neither != 2 || p.McNemarP != 0.25 {
		t.Errorf("pair: %+v, want 5/3/0/2 with p 0.25", p)
	}
	if id := got.Tasks[0]["id"]; id != "t06" { // the regressions come first
		t.Errorf("first task row %v, want the first regression t06", id)
	}
	failed, err := evals.Gate(rep, evals.GateOptions{Baseline: "A", Candidate: "B"})
	if err != nil || len(failed) == 0 || !strings.Contains(failed[0], "close rate") {
		t.Errorf("gate of B against A: %v %v, want a failed close-rate condition", failed, err)
	}
	if failed, err := evals.Gate(rep, evals.GateOptions{Baseline: "B", Candidate: "A"}); err != nil || len(failed) != 0 {
		t.Errorf("gate of A against B: %v %v, want a pass", failed, err)
	}
	// Apart from production: its store has no item, its outbox no notification.
	page, err := s.Store.List(context.Background(), itemstore.ListOptions{Limit: 10})
	if err != nil || len(page) != 0 {
		t.Errorf("production list: %d items %v, want none", len(page), err)
	}
	ev := s.Evals()
	it, err := ev.Store.Get(context.Background(), e.ItemID(evals.RunRef{Task: "t01", Variant: "A"}))
	if err != nil || it.State != workitems.StateClosed || it.Delivery == nil || it.Delivery.Mode != workitems.DeliverPatch {
		t.Errorf("run item t01/A: %+v %v, want closed with a patch delivery", it, err)
	}
	assertApartFromProduction(t, s, e, hooks)
}

// assertApartFromProduction checks what production saw of experiment e, whose runs of
// fix-calc (seven of twenty) were escalated: no escalation in its inbox, no notification in its
// outbox or at its template's webhook sink, no series of a production template (nor of a run
// template) counting a run, and its template's open and daily-cost counters untouched. Then,
// to show the sink and the counters do see production, one production item of fix-calc is
// escalated and reaches them.
func assertApartFromProduction(t *testing.T, s *sys, e *evals.Experiment, hooks chan string) {
	t.Helper()
	ctx := context.Background()
	if n, err := s.Evals().Store.EscalatedCount(ctx); err != nil || n != 7 {
		t.Fatalf("eval namespace escalations: %d %v, want the 7 runs that did not close", n, err)
	}
	if inbox, err := s.Store.Escalated(ctx, 0, 100); err != nil || len(inbox) != 0 {
		t.Errorf("production inbox: %d escalations %v, want none", len(inbox), err)
	}
	for _, st := range notify.AllStates() {
		if ds, err := s.Outbox.List(ctx, st, 100); err != nil || len(ds) != 0 {
			t.Errorf("production outbox (%s): %d notifications %v, want none", st, len(ds), err)
		}
	}
	select {
	case body := <-hooks:
		t.Errorf("the template's webhook sink was sent %s, want nothing", body)
	default:
	}
	// The config's own gauges (caps, schedules) name fix-calc; no counter may count a run,
	// under the production template's name or a run template's.
	if n := runCounts(t, s, "fix-calc", e.ID); n != 0 {
		t.Errorf("counters of fix-calc and of the experiment's run templates count %g, want 0", n)
	}
	now := time.Now()
	if open, err := s.Store.OpenCount(ctx, "fix-calc"); err != nil || open != 0 {
		t.Errorf("fix-calc's open count: %d %v, want 0", open, err)
	}
	if usd, err := s.Store.DailyCost(ctx, "fix-calc", now); err != nil || usd != 0 {
		t.Errorf("fix-calc's daily cost: %g %v, want 0", usd, err)
	}

	it, err := s.Queue.Submit(ctx, scheduler.Request{Template: "fix-calc", Input: "task-1", Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	if it = awaitState(t, s.Store, it.ID, workitems.StateEscalated, workitems.StateClosed); it.State != workitems.StateEscalated {
		t.Fatalf("production item %s, want escalated", it.State)
	}
	select {
	case body := <-hooks:
		if !strings.Contains(body, it.ID) {
			t.Errorf("the sink was sent %s, want the production item %s", body, it.ID)
		}
	case <-testwait.After(t):
		t.Error("the sink got nothing for a production escalation: the check above proves nothing")
	}
	if n, err := testutil.GatherAndCount(s.Metrics.Registry(), "outerloop_attempts_total"); err != nil || n < 1 || runCounts(t, s, "fix-calc", e.ID) == 0 {
		t.Errorf("attempt series after one production item: %d %v, and counters of fix-calc count nothing", n, err)
	}
}

// runCounts sums the counters and histogram samples of the app's registry labelled with
// template tmpl or a template whose name starts with prefix (an experiment's run templates).
func runCounts(t *testing.T, s *sys, tmpl, prefix string) float64 {
	t.Helper()
	mfs, err := s.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "template" && (l.GetValue() == tmpl || strings.HasPrefix(l.GetValue(), prefix)) {
					n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}

// TestRecordedModelsAsVariantsAreComparedOnTasksAtTheirRefs: the variants are the native agent
// loop with two recorded (replay) models, over tasks pinned to refs of one repository whose
// Add is broken three ways: minus on main (t01–t05), times on "mul" (t06–t08), divide on "div"
// (t09–t10). Model A's recording fixes minus and times, B's minus only: A closes 8 of 10, B 5,
// with the report's spend taken from the recordings' usage and the provider's prices.
func TestRecordedModelsAsVariantsAreComparedOnTasksAtTheirRefs(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	gitInit(t, repo)
	for _, b := range []struct{ branch, op string }{{"mul", "*"}, {"div", "/"}} {
		gitIn(t, repo, "checkout", "-q", "-b", b.branch, "main")
		cmd := exec.Command("sed", "-i", "s|a - b|a "+b.op+" b|", "calc.go")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sed: %v %s", err, out)
		}
		gitIn(t, repo, "commit", "-q", "-am", "break Add with "+b.op)
	}
	gitIn(t, repo, "checkout", "-q", "main")
	dir := t.TempDir()
	recording := func(name, sed string) string {
		call, _ := json.Marshal(map[string]string{"command": "sed -i '" + sed + "' calc.go"})
		lines := []map[string]any{
			{"response": map[string]any{"id": "r1", "items": []map[string]any{{"kind": "function_call", "call_id": "c1", "name": "shell", "arguments": string(call)}},
				"usage": map[string]int{"input_tokens": 1000, "output_tokens": 100}}},
			{"response": map[string]any{"id": "r2", "items": []map[string]any{{"kind": "function_call", "call_id": "c2", "name": "run_done_check", "arguments": "{}"}},
				"usage": map[string]int{"input_tokens": 1100, "output_tokens": 10}}},
			{"response": map[string]any{"id": "r3", "items": []map[string]any{{"kind": "message", "role": "assistant", "text": "Fixed Add."}},
				"usage": map[string]int{"input_tokens": 1200, "output_tokens": 20}}},
		}
		var b strings.Builder
		for _, l := range lines {
			j, _ := json.Marshal(l)
			b.Write(append(j, '\n'))
		}
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	extra := fmt.Sprintf(`providers:
  model-a: {kind: replay, file: %s, prices: {input_per_mtok: 100, output_per_mtok: 200}}
  model-b: {kind: replay, file: %s, prices: {input_per_mtok: 100, output_per_mtok: 200}}
`, recording("a", "s/a - b/a + b/; s/a \\* b/a + b/"), recording("b", "s/a - b/a + b/"))
	s := open(t, evalConfig(t, repo, extra), workitems.SystemClock{})
	s.startWorker(t, "w1")
	suite := &evals.Suite{Name: "three-bugs"}
	for i := 1; i <= 10; i++ {
		ref := map[bool]string{true: "", false: "mul"}[i <= 5]
		if i > 8 {
			ref = "div"
		}
		suite.Tasks = append(suite.Tasks, evals.Task{ID: fmt.Sprintf("t%02d", i), Template: "fix-calc", Ref: ref})
	}
	variant := func(name, provider string) evals.Variant {
		v, err := evals.ParseVariant(name, []byte("loop: {kind: agent, provider: "+provider+", commands: null}\nbudget: {model_calls: 4}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	r := s.EvalRunner()
	e, pr := runExperiment(t, s, evals.Plan{Suite: suite, Variants: []evals.Variant{variant("A", "model-a"), variant("B", "model-b")}, BudgetUSD: 20})
	ctx := context.Background()
	if pr.State != evals.StateFinished || pr.Closed["A"] != 8 || pr.Closed["B"] != 5 {
		it, _ := s.Evals().Store.Get(ctx, e.ItemID(evals.RunRef{Task: "t01", Variant: "A"}))
		t.Fatalf("progress %+v: want finished, A closed 8, B closed 5; t01/A exited %+v, decided %+v", pr, it.Attempts[0].Exit, it.Decisions)
	}
	rep, _, err := r.Report(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Each run: three model calls (the fix, the done check, the answer), 3300 input and 130
	// output tokens at 100 and 200 USD per million: 0.33 + 0.026 = 0.356 USD; ten runs 3.56
	// USD; per close 3.56/8 = 0.445 (A) and 3.56/5 = 0.712 (B).
	a, b := rep.Variants["A"], rep.Variants["B"]
	near := func(x, want float64) bool { return math.Abs(x-want) < 1e-6 }
	if a.ModelCalls != 30 || a.Tokens != 34300 || !near(a.CostUSD, 3.56) || a.CostPerCloseUSD == nil || !near(*a.CostPerCloseUSD, 0.445) {
		t.Errorf("variant A: %+v", a)
	}
	if b.ModelCalls != 30 || !near(b.CostUSD, 3.56) || b.CostPerCloseUSD == nil || !near(*b.CostPerCloseUSD, 0.712) {
		t.Errorf("variant B: %+v", b)
	}
	if p := rep.Pairs[0]; p.Both != 5 || p.BaselineOnly != 3 || p.CandidateOnly != 0 || p.Neither != 2 || p.McNemarP != 0.25 {
		t.Errorf("pair: %+v, want 5/3/0/2 with p 0.25", p)
	}
}

// TestAnEvalTaskRunsAtItsRef: the same template and variant (a loop that changes nothing)
// closes a task pinned to a branch where the bug is fixed, and a task pinned to a commit from
// before the fix, or left at the default branch (where the bug is), does not.
func TestAnEvalTaskRunsAtItsRef(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	gitInit(t, repo)
	buggy := gitIn(t, repo, "rev-parse", "HEAD")
	gitIn(t, repo, "checkout", "-q", "-b", "fixed")
	fix := exec.Command("sh", "-c", sample.FixCommand)
	fix.Dir = repo
	if out, err := fix.CombinedOutput(); err != nil {
		t.Fatalf("fix: %v %s", err, out)
	}
	gitIn(t, repo, "commit", "-q", "-am", "fix")
	fixed := gitIn(t, repo, "rev-parse", "HEAD")
	gitIn(t, repo, "checkout", "-q", "main")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "later, still buggy")

	s := open(t, evalConfig(t, repo, ""), workitems.SystemClock{})
	s.startWorker(t, "w1")
	suite := &evals.Suite{Name: "refs", Tasks: []evals.Task{
		{ID: "at-branch", Template: "fix-calc", Ref: "fixed"},
		{ID: "at-commit", Template: "fix-calc", Ref: buggy},
		{ID: "at-default", Template: "fix-calc"},
	}}
	e, _ := runExperiment(t, s, evals.Plan{Suite: suite, Variants: []evals.Variant{{Name: "A"}}})
	ctx := context.Background()
	ev := s.Evals()
	for task, want := range map[string]struct {
		closed bool
		base   string
	}{"at-branch": {true, fixed}, "at-commit": {false, buggy}, "at-default": {false, ""}} {
		it, err := ev.Store.Get(ctx, e.ItemID(evals.RunRef{Task: task, Variant: "A"}))
		if err != nil {
			t.Fatal(err)
		}
		a := it.Attempts[0]
		if (it.State == workitems.StateClosed) != want.closed || a.Base == nil || (want.base != "" && a.Base.Commit != want.base) {
			t.Errorf("%s: %s from base %+v, want closed=%v from %.12s", task, it.State, a.Base, want.closed, want.base)
		}
	}
}

// TestAnExperimentOnATemplateThatDeliversToGiteaPushesNothing runs an experiment whose
// template delivers pull requests to the real Gitea (automerge on): its runs close with a patch
// in their records, and the repository has no new branch and no pull request.
func TestAnExperimentOnATemplateThatDeliversToGiteaPushesNothing(t *testing.T) {
	t.Parallel()
	gs := giteatest.Shared(t)
	r := forgeRepo(t, gs, "eval", false)
	cfg := forgeConfig(t, gs, fmt.Sprintf(`  - name: fix
    repo: %s
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
    deliver: {forge: tea, repo: %s, labels: [outerloop], automerge: true, merge_method: merge}
`, r.CloneURL, sample.FixCommand, r.Slug))
	s := openForge(t, gs, cfg, nil)
	s.startWorker(t, "w1")
	runner := s.EvalRunner()
	empty, err := evals.ParseVariant("A", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := runner.Prepare(evals.Plan{Suite: &evals.Suite{Name: "one", Tasks: []evals.Task{{ID: "fix", Template: "fix"}}},
		Variants: []evals.Variant{empty}, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	pr, err := runner.Drive(ctx, e.ID, 200*time.Millisecond, nil)
	if err != nil || pr.Closed["A"] != 2 {
		t.Fatalf("experiment: %+v %v, want both runs closed", pr, err)
	}
	for _, run := range e.Runs() {
		it, err := s.Evals().Store.Get(context.Background(), e.ItemID(run))
		if err != nil || it.Delivery == nil || it.Delivery.Mode != workitems.DeliverPatch || it.Delivery.PR != nil {
			t.Fatalf("run %s: %+v %v, want a patch delivery and no pull request", e.ItemID(run), it.Delivery, err)
		}
	}
	if prs := pulls(t, gs, r); len(prs) != 0 {
		t.Fatalf("the repository has %d pull requests, want none", len(prs))
	}
	var branches []struct{ Name string }
	gs.API(t, http.MethodGet, "/repos/"+r.Slug+"/branches", nil, http.StatusOK, &branches)
	if len(branches) != 1 || branches[0].Name != "main" {
		t.Fatalf("branches %+v, want main alone", branches)
	}
}

// TestAVariantsModelAndPromptVariantReachTheProvider: a variant that sets loop.model and
// loop.prompt_variant over an agent template (the example of docs/evals.md) is accepted, its
// run's first attempt starts from them, and the provider's request carries that model and
// approach; the empty variant's run asks for the provider's own model and no approach.
func TestAVariantsModelAndPromptVariantReachTheProvider(t *testing.T) {
	t.Parallel()
	repo := sampleRepo(t)
	if err := sample.Fix(repo); err != nil { // nothing to fix: one answer closes a run
		t.Fatal(err)
	}
	srv := modeltest.NewResponsesServer(t)
	srv.Enqueue(modeltest.Text("Nothing to change."), modeltest.Text("Nothing to change."))
	cfg, err := parseConfig([]byte(fmt.Sprintf(`
defaults:
  max_attempts: 1
  budget: {wall_time: 2m, verify_reserve: 1m, model_calls: 4, cost_usd: 1}
providers:
  local: {kind: openai-responses, base_url: %s, api_key_env: %s, model: %s, prices: {input_per_mtok: 1, output_per_mtok: 2}}
templates:
  - name: look
    repo: %s
    goal: Check Add.
    loop: {kind: agent, provider: local}
    done_check: {commands: ["go test -json ./..."]}
`, srv.URL, modeltest.KeyEnv, modeltest.Model, repo)))
	if err != nil {
		t.Fatal(err)
	}
	env := redistest.New(t)
	loop := agentloop.New(agentloop.WithProviderFactory(func(pc config.ProviderConfig, name string) (model.Provider, error) {
		return model.New(pc, name, srv.Getenv, nil)
	}))
	a, err := app.Open(context.Background(), app.Options{Config: cfg, RedisURL: redistest.URL(), Prefix: env.Prefix, Queue: env.Queue,
		Workdir: t.TempDir(), Logger: testLogger(t), Loops: map[workitems.LoopKind]worker.InnerLoop{"agent": loop}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	startAppWorker(t, a, 1, "w1")
	empty, err := evals.ParseVariant("A", nil)
	if err != nil {
		t.Fatal(err)
	}
	mini, err := evals.ParseVariant("B", []byte("loop:\n  model: gpt-5-mini\n  prompt_variant: minimal-diff\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, pr := runExperiment(t, &sys{App: a, env: env}, evals.Plan{Suite: &evals.Suite{Name: "one", Tasks: []evals.Task{{ID: "t", Template: "look"}}},
		Variants: []evals.Variant{empty, mini}})
	if pr.State != evals.StateFinished || pr.Closed["A"] != 1 || pr.Closed["B"] != 1 {
		t.Fatalf("progress %+v: want both runs closed", pr)
	}
	it, err := a.Evals().Store.Get(context.Background(), e.ItemID(evals.RunRef{Task: "t", Variant: "B"}))
	if err != nil {
		t.Fatal(err)
	}
	if s := it.Attempts[0].Condition.Strategy; s.Model != "gpt-5-mini" || s.PromptVariant != "minimal-diff" {
		t.Errorf("run B's first attempt strategy %+v, want model gpt-5-mini, prompt variant minimal-diff", s)
	}
	models := map[string]bool{}
	for _, r := range srv.Requests() {
		models[r.Model] = true
		approach := strings.Contains(string(r.Body), "Approach: minimal-diff")
		if approach != (r.Model == "gpt-5-mini") {
			t.Errorf("request for model %s: approach asked %v, want it with gpt-5-mini alone", r.Model, approach)
		}
	}
	if len(models) != 2 || !models["gpt-5-mini"] || !models[modeltest.Model] {
		t.Errorf("models requested %v, want gpt-5-mini (B) and the provider's %s (A)", models, modeltest.Model)
	}
}

// TestAFleetTemplateIsEvaluatedOnTheTasksRepo: a task of a fleet template (repos:) runs as one
// real item on the task's repository and closes; production's fleet sees no item.
func TestAFleetTemplateIsEvaluatedOnTheTasksRepo(t *testing.T) {
	t.Parallel()
	repo, other := sampleRepo(t), sampleRepo(t)
	cfg := evalConfig(t, repo, fmt.Sprintf(`  - name: fleet-calc
    repos: [%s, %s]
    goal: make TestAdd pass
    loop: {kind: script, commands: [%q]}
    done_check: {commands: ["go test -json ./..."]}
    fleet: {concurrency: 1}
`, other, repo, sample.FixCommand))
	s := open(t, cfg, workitems.SystemClock{})
	s.startWorker(t, "w1")
	e, pr := runExperiment(t, s, evals.Plan{Suite: &evals.Suite{Name: "fleet", Tasks: []evals.Task{{ID: "t", Template: "fleet-calc", Repo: repo}}},
		Variants: []evals.Variant{{Name: "A"}}})
	if pr.State != evals.StateFinished || pr.Closed["A"] != 1 {
		t.Fatalf("progress %+v: want the run closed", pr)
	}
	it, err := s.Evals().Store.Get(context.Background(), e.ItemID(evals.RunRef{Task: "t", Variant: "A"}))
	if err != nil {
		t.Fatal(err)
	}
	if b := it.Attempts[0].Base; b == nil || b.Source != repo {
		t.Errorf("run's workspace base %+v, want the task's repo %s", b, repo)
	}
	if page, err := s.Store.List(context.Background(), itemstore.ListOptions{Limit: 10}); err != nil || len(page) != 0 {
		t.Errorf("production list: %d items %v, want none", len(page), err)
	}
}
