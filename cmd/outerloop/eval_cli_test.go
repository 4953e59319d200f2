package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/evals"
	"outerloop/lib/fakeclock"
	"outerloop/lib/testwait"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// TestAKilledEvalProcessAndWorkerLoseNothingAndResumeRerunsNothing drives an experiment with
// the real binary: `eval run` prints the experiment id alone on its first line, then the eval
// process and the worker running its runs are SIGKILLed in the middle; `eval run --resume`
// with a new worker finishes it. Every run is one item with one attempt, nothing that finished
// before the kill changed, no checkpointed step ran twice, and the report counts every run.
func TestAKilledEvalProcessAndWorkerLoseNothingAndResumeRerunsNothing(t *testing.T) {
	t.Parallel()
	c := newChaos(t, 3, "0.3", 3*time.Second)
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite.yaml")
	body := "name: chaos-suite\ntasks:\n"
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		body += "  - {id: " + id + ", template: chaos, input: task-" + id + "}\n"
	}
	if err := os.WriteFile(suite, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	empty, fewer := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fewer, []byte("max_attempts: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := c.startWorker()
	run := exec.Command(c.bin, c.args("eval", "run", suite, "--variant", "A="+empty, "--variant", "B="+fewer)...)
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run.Stderr = os.Stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("eval run printed nothing: %v", lines.Err())
	}
	id := strings.TrimSpace(lines.Text())
	if strings.ContainsAny(id, " :") || id == "" {
		t.Fatalf("first line %q: want the experiment id alone", id)
	}
	go func() {
		for lines.Scan() { // progress lines: drained so the process never blocks on its pipe
		}
	}()
	exps := evals.NewStore(c.rdb, c.prefix)
	items := itemstore.NewStore(c.rdb, evals.ItemPrefix(c.prefix))
	e := awaitExperiment(t, exps, id)
	// Kill both once some runs ended and some run.
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	var before map[string]*workitems.Item
	for {
		all, err := items.GetMany(ctx, runIDs(e))
		if err != nil {
			t.Fatal(err)
		}
		ended, running := 0, 0
		for _, it := range all {
			switch {
			case it.State.Terminal():
				ended++
			case it.State == workitems.StateRunning:
				running++
			}
		}
		if ended >= 2 && running >= 1 {
			before = all
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("runs never were both ended and running: %d ended, %d running", ended, running)
		case <-time.After(50 * time.Millisecond): // sampling the store, as a person watching would
		}
	}
	_ = run.Process.Signal(syscall.SIGKILL)
	_ = run.Wait()
	c.kill(w)
	c.startWorker()
	out, err := exec.Command(c.bin, c.args("eval", "run", "--resume", id)...).CombinedOutput()
	if err != nil {
		t.Fatalf("eval run --resume: %v\n%s", err, out)
	}
	if first := strings.SplitN(string(out), "\n", 2)[0]; first != id {
		t.Fatalf("resume's first line %q, want %s", first, id)
	}
	after, err := items.GetMany(context.Background(), runIDs(e))
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != e.Total() {
		t.Fatalf("%d run items, want %d", len(after), e.Total())
	}
	for rid, it := range after {
		if it.State != workitems.StateClosed || len(it.Attempts) != 1 {
			t.Errorf("run %s: %s after %d attempts, want closed in one", rid, it.State, len(it.Attempts))
		}
		if b := before[rid]; b != nil && b.State.Terminal() && b.Version != it.Version {
			t.Errorf("run %s ended before the kill and changed after it (version %d → %d)", rid, b.Version, it.Version)
		}
	}
	l := readStepLog(t, c.workDirs())
	for rid, it := range after {
		reruns := 0
		for _, n := range l.starts[rid] {
			reruns += n - 1
		}
		if takeovers := int(it.Current().Epoch) - 1; reruns > takeovers {
			t.Errorf("run %s: %d step re-runs for %d takeovers: a checkpointed step ran again", rid, reruns, takeovers)
		}
	}
	rep, err := exec.Command(c.bin, c.args("eval", "report", id, "--json")...).Output()
	if err != nil {
		t.Fatalf("eval report: %v", err)
	}
	var r struct {
		Variants map[string]struct{ Runs, Closed int }
	}
	if err := json.Unmarshal(rep, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, rep)
	}
	if r.Variants["A"].Runs != 6 || r.Variants["A"].Closed != 6 || r.Variants["B"].Runs != 6 || r.Variants["B"].Closed != 6 {
		t.Fatalf("report variants %+v, want 6 of 6 closed each", r.Variants)
	}
}

func awaitExperiment(t *testing.T, exps *evals.Store, id string) *evals.Experiment {
	t.Helper()
	e, err := exps.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("experiment %s: %v (the id is printed after it is stored)", id, err)
	}
	return e
}

func runIDs(e *evals.Experiment) []string {
	var out []string
	for _, r := range e.Runs() {
		out = append(out, e.ItemID(r))
	}
	return out
}

// TestGCDeletesExperimentsPastTheirRetention: `outerloop gc` applies retention.experiments
// from the config: an experiment that ended before it goes (a dry run only names it), one that
// ended after it stays.
func TestGCDeletesExperimentsPastTheirRetention(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, "  - name: fix\n    repo: REPO\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n")
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(body, "retention: {experiments: 1h}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, cfg)
	exps := evals.NewStore(c.env.Client, c.env.Prefix)
	ctx := context.Background()
	now := time.Now()
	for id, ended := range map[string]time.Time{"xold": now.Add(-2 * time.Hour), "xnew": now.Add(-30 * time.Minute)} {
		e := &evals.Experiment{ID: id, Repeat: 1, State: evals.StateRunning, CreatedAt: ended.Add(-time.Minute),
			Suite: evals.Suite{Name: "s", Tasks: []evals.Task{{ID: "t", Template: "fix"}}}, Variants: []evals.VariantSpec{{Name: "A"}}}
		if err := exps.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err := exps.End(ctx, id, evals.StateFinished, "", ended); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := c.run("gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "would delete experiment xold\n") || strings.Contains(out, "xnew") {
		t.Fatalf("gc --dry-run (exit %d): %s%s", code, out, errOut)
	}
	if _, err := exps.Get(ctx, "xold"); err != nil {
		t.Fatalf("the dry run deleted xold: %v", err)
	}
	out, errOut, code = c.run("gc")
	if code != 0 || !strings.Contains(out, "deleted experiment xold\ndeleted 1 experiments\n") {
		t.Fatalf("gc (exit %d): %s%s", code, out, errOut)
	}
	if _, err := exps.Get(ctx, "xold"); !errors.Is(err, evals.ErrNotFound) {
		t.Errorf("xold after gc: %v, want deleted", err)
	}
	if _, err := exps.Get(ctx, "xnew"); err != nil {
		t.Errorf("xnew after gc: %v, want kept", err)
	}
}

// TestEvalRunRefusesBadInputNamingItBeforeAnythingIsEnqueued: with the real binary, each of an
// unknown template, a variant field templates do not have, a suite with a duplicate task id, a
// ref git would refuse and a budget that cannot cover one run makes `eval run` exit non-zero
// naming it; no experiment, no run item and no task on the eval queue is left behind.
func TestEvalRunRefusesBadInputNamingItBeforeAnythingIsEnqueued(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, "  - name: fix\n    repo: REPO\n    goal: g\n    budget: {cost_usd: 0.5}\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n")
	c := newCLI(t, cfg)
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", "name: s\ntasks:\n  - {id: a, template: fix}\n")
	empty := file("empty.yaml", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown template", []string{file("t.yaml", "name: s\ntasks:\n  - {id: a, template: nope}\n"), "--variant", "A=" + empty}, `"nope"`},
		{"unknown variant field", []string{good, "--variant", "A=" + file("v.yaml", "loop:\n  modle: x\n")}, `field "loop.modle" is not a template field`},
		{"duplicate task id", []string{file("d.yaml", "name: s\ntasks:\n  - {id: a, template: fix}\n  - {id: a, template: fix}\n"), "--variant", "A=" + empty}, `id "a": duplicate of task #1`},
		{"bad ref", []string{file("r.yaml", "name: s\ntasks:\n  - {id: a, template: fix, ref: \"-x\"}\n"), "--variant", "A=" + empty}, `ref: "-x" starts with '-'`},
		{"budget below one run", []string{good, "--variant", "A=" + empty, "--budget", "cost_usd=0.1"}, "budget cost_usd=0.1 cannot cover one run of task a under variant A (its cap is 1 USD)"},
	} {
		out, errOut, code := c.run(append([]string{"eval", "run"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want it to name %s", tc.name, code, errOut, tc.want)
		}
		if strings.TrimSpace(out) != "" {
			t.Errorf("%s: printed %q, want no experiment id", tc.name, out)
		}
	}
	ctx := context.Background()
	if page, total, err := evals.NewStore(c.env.Client, c.env.Prefix).List(ctx, 0, 10); err != nil || total != 0 || len(page) != 0 {
		t.Errorf("experiments after refusals: %d %v", total, err)
	}
	if keys, err := c.env.Client.Keys(ctx, evals.ItemPrefix(c.env.Prefix)+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("eval namespace keys after refusals: %v %v", keys, err)
	}
	if n, err := c.env.Client.Exists(ctx, "asynq:{"+c.env.Queue+"-eval}:pending").Result(); err != nil || n != 0 {
		t.Errorf("eval queue after refusals: %d %v", n, err)
	}
}

// spendTemplate is a template whose every run reports 0.4 USD of model spend (an exec agent
// `command` writing its usage) against a cap of 0.5, and closes.
const spendTemplate = `  - name: spend
    repo: REPO
    goal: g
    max_attempts: 1
    budget: {cost_usd: 0.5}
    loop: {kind: exec, agent: command, command: sh, args: ["-c", "echo '{\"cost_usd\": 0.4}' >&3; echo spent"]}
    done_check: {commands: ["true"]}
`

// TestAnExperimentStopsAtItsBudgetAndResumesWithARaisedOne: runs spend 0.4 USD of their 0.5
// cap. On the experiment left running with a budget of 0.5,
// `eval run --resume ID --budget cost_usd=1` applies the new budget to the running experiment
// (not ignored), two runs fit, and after they spent 0.80 the third does not: the experiment
// ends stopped naming the budget, with no further run made. `--resume` with a raised budget
// then runs the rest to the end.
func TestAnExperimentStopsAtItsBudgetAndResumesWithARaisedOne(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, spendTemplate)
	c := newCLI(t, cfg)
	// Made and stored as `eval run` makes it, and left running with nothing enqueued (a driver
	// killed at once): what a resume finds.
	e := createExperiment(t, c, evals.Plan{Suite: &evals.Suite{Name: "s", Tasks: []evals.Task{{ID: "a", Template: "spend"}, {ID: "b", Template: "spend"}}},
		Variants: []evals.Variant{{Name: "A"}}, Repeat: 2, BudgetUSD: 0.5}, time.Now())
	exps := evals.NewStore(c.env.Client, c.env.Prefix)
	id := e.ID
	items := itemstore.NewStore(c.env.Client, evals.ItemPrefix(c.env.Prefix))

	c.start("worker", "--concurrency", "2", "--id", "w1")
	out, errOut, code := c.run("eval", "run", "--resume", id, "--budget", "cost_usd=1")
	if code != 0 || !strings.Contains(errOut, "budget set to 1.00 USD") ||
		!strings.Contains(out, "stopped: budget: 0.80 of 1.00 USD spent; 2 of 4 runs not started\n") {
		t.Fatalf("eval run --resume --budget 1 (exit %d): %s%s", code, out, errOut)
	}
	made, err := items.GetMany(context.Background(), runIDs(e))
	if err != nil || len(made) != 2 {
		t.Fatalf("%d runs made (%v), want the two that fit", len(made), err)
	}
	if e, err = exps.Get(context.Background(), id); err != nil || e.State != evals.StateStopped || e.BudgetUSD != 1 {
		t.Fatalf("experiment %+v %v, want stopped with a budget of 1", e, err)
	}
	out, errOut, code = c.run("eval", "status", id)
	if code != 0 || out != "stopped: 2/4 done, 2 started, A closed 2, spent 0.80 USD of 1.00\nreason: budget: 0.80 of 1.00 USD spent; 2 of 4 runs not started\n" {
		t.Fatalf("eval status (exit %d): %q %s", code, out, errOut)
	}
	out, errOut, code = c.run("eval", "run", "--resume", id)
	if code == 0 || !strings.Contains(errOut, "give --budget to raise its budget and go on") {
		t.Fatalf("eval run --resume of a stopped experiment without --budget (exit %d): %s%s", code, out, errOut)
	}

	out, errOut, code = c.run("eval", "run", "--resume", id, "--budget", "cost_usd=2")
	if code != 0 || !strings.Contains(out, "finished: 4/4 done, 4 started, A closed 4, spent 1.60 USD of 2.00\n") {
		t.Fatalf("eval run --resume --budget 2 (exit %d): %s%s", code, out, errOut)
	}
	if made, err := items.GetMany(context.Background(), runIDs(e)); err != nil || len(made) != 4 {
		t.Fatalf("%d runs made (%v), want 4", len(made), err)
	}
}

// createExperiment prepares plan over c's config file as `eval run` does and stores it,
// running and with nothing enqueued, created at created.
func createExperiment(t *testing.T, c *cli, plan evals.Plan, created time.Time) *evals.Experiment {
	t.Helper()
	body, err := os.ReadFile(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := config.ParseConfig(body)
	if err != nil {
		t.Fatal(err)
	}
	r := &evals.Runner{Config: func() *config.Config { return conf }, Clock: workitems.SystemClock{}}
	e, err := r.Prepare(plan)
	if err != nil {
		t.Fatal(err)
	}
	e.CreatedAt = created
	if err := evals.NewStore(c.env.Client, c.env.Prefix).Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

const trueTemplate = "  - name: fix\n    repo: REPO\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n" +
	"  - name: other\n    repo: REPO\n    goal: g\n    loop: {kind: script, commands: [\"true\"]}\n    done_check: {commands: [\"true\"]}\n"

// TestEvalGateStatusListAndReportPrintWhatTheRecordsSay: over an experiment whose runs are
// recorded (ten tasks; A closes eight at 0.10 USD a run, B five) and one still running with
// none, `eval gate` exits 0 for a candidate that passes and 1 naming every failed condition,
// and `eval status`, `eval list` and `eval report` print the numbers of the records.
func TestEvalGateStatusListAndReportPrintWhatTheRecordsSay(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, trueTemplate)
	c := newCLI(t, cfg)
	ctx := context.Background()
	suite := &evals.Suite{Name: "ten"}
	for i := 1; i <= 10; i++ {
		suite.Tasks = append(suite.Tasks, evals.Task{ID: fmt.Sprintf("t%02d", i), Template: "fix"})
	}
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	done := createExperiment(t, c, evals.Plan{ID: "xdone", Suite: suite, Variants: []evals.Variant{{Name: "A"}, {Name: "B"}}}, created)
	exps := evals.NewStore(c.env.Client, c.env.Prefix)
	for i, task := range suite.Tasks {
		for v, closes := range map[string]int{"A": 8, "B": 5} {
			run := evals.Run{Task: task.ID, Variant: v, Closed: i < closes, CostUSD: 0.1, ModelCalls: 2, Tokens: 100, WallTime: time.Second, Exit: "completed"}
			if err := exps.RecordRun(ctx, done.ID, run); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := exps.End(ctx, done.ID, evals.StateFinished, "", created.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	createExperiment(t, c, evals.Plan{ID: "xrunning", Suite: &evals.Suite{Name: "one", Tasks: suite.Tasks[:1]}, Variants: []evals.Variant{{Name: "A"}, {Name: "B"}}},
		created.Add(2*time.Hour))

	out, errOut, code := c.run("eval", "gate", "xdone", "--baseline", "B", "--candidate", "A")
	if code != 0 || out != "pass: A against B\n" {
		t.Errorf("gate of A against B (exit %d): %q %s, want a pass", code, out, errOut)
	}
	out, errOut, code = c.run("eval", "gate", "xdone", "--baseline", "A", "--candidate", "B", "--min-runs", "20")
	if code != 1 || !strings.HasPrefix(out, "fail: B against A\n") {
		t.Errorf("gate of B against A (exit %d): %q %s, want exit 1", code, out, errOut)
	}
	for _, want := range []string{"baseline A has 10 runs, fewer than the 20 required", "candidate B has 10 runs, fewer than the 20 required",
		"close rate dropped 0.30 (0.80 → 0.50)", "cost per close rose 60%"} {
		if !strings.Contains(out, "  - "+want) {
			t.Errorf("gate of B against A: %q does not name %q", out, want)
		}
	}
	out, _, code = c.run("eval", "gate", "xrunning", "--baseline", "A", "--candidate", "B")
	if code != 1 || !strings.Contains(out, "experiment xrunning is still running (0 of 2 runs done)") || !strings.Contains(out, "baseline A has no runs") {
		t.Errorf("gate of a running experiment (exit %d): %q, want it failed as running with no runs", code, out)
	}

	out, errOut, code = c.run("eval", "status", "xdone")
	if code != 0 || out != "finished: 20/20 done, 20 started, A closed 8, B closed 5, spent 2.00 USD\n" {
		t.Errorf("eval status (exit %d): %q %s", code, out, errOut)
	}
	out, errOut, code = c.run("eval", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID SUITE VARIANTS RUNS STATE CONFIG CREATED" {
		t.Fatalf("eval list (exit %d): %q %s", code, out, errOut)
	}
	for i, want := range []string{"xrunning one A,B 2 running " + done.ConfigVersion + " 2026-12-01T12:00:00Z",
		"xdone ten A,B 20 finished " + done.ConfigVersion + " 2026-12-01T10:00:00Z"} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("eval list row %d: %q, want %q (newest first)", i+1, got, want)
		}
	}

	out, errOut, code = c.run("eval", "report", "xdone")
	if code != 0 {
		t.Fatalf("eval report (exit %d): %s", code, errOut)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && rows[f[0]] == "" { // the first row of each key
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	v := done.Versions
	for key, want := range map[string]string{
		"experiment": "experiment xdone (suite ten, finished, config " + v.Config + ")",
		"A":          "A 10 8 0.80 [0.49, 0.94] 1:0.80 1:0.80 1.00 0.12 1.0 1.0 20 1000 completed 10",
		"B":          "B 10 5 0.50 [0.24, 0.76] 1:0.50 1:0.50 1.00 0.20 1.0 1.0 20 1000 completed 10",
		"VERSIONS":   "VERSIONS config " + v.Config,
		"fix":        "fix " + v.Templates["fix"] + " " + v.Variants["A"]["fix"] + " " + v.Variants["B"]["fix"],
		"t06":        "t06 1/1 closed, 0.10 USD 0/1 closed, 0.10 USD regression",
		"t01":        "t01 1/1 closed, 0.10 USD 1/1 closed, 0.10 USD",
	} {
		if rows[key] != want {
			t.Errorf("report row %s: %q, want %q\n%s", key, rows[key], want, out)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "A B 5 3 0 2 0.25") {
		t.Errorf("report: no pair row A B 5 3 0 2 0.25\n%s", out)
	}
	if i, j := strings.Index(out, "t06"), strings.Index(out, "t01"); i < 0 || j < 0 || i > j {
		t.Errorf("report: the regressions do not come first\n%s", out)
	}
}

// TestEvalRunFromItemsSelectsByTemplateStateDatesAndIds: `eval run --from-items` with each
// filter makes an experiment whose tasks are exactly the items it selects (each at its recorded
// base commit), and names the selected items it skips for want of a recorded base.
func TestEvalRunFromItemsSelectsByTemplateStateDatesAndIds(t *testing.T) {
	t.Parallel()
	cfg, _ := setup(t, trueTemplate)
	c := newCLI(t, cfg)
	ctx := context.Background()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := itemstore.NewStore(c.env.Client, c.env.Prefix, itemstore.WithClock(clock))
	for _, sp := range []struct {
		id, tmpl string
		state    workitems.State
		base     bool
	}{
		{"i1", "fix", workitems.StateClosed, true},      // created 2026-01-02
		{"i2", "fix", workitems.StateEscalated, true},   // 2026-01-03
		{"i3", "other", workitems.StateClosed, true},    // 2026-01-04
		{"i4", "fix", workitems.StateClosed, false},     // 2026-01-05
		{"i5", "other", workitems.StateEscalated, true}, // 2026-01-06
	} {
		clock.Advance(24 * time.Hour)
		first := workitems.Attempt{N: 1, State: workitems.AttemptQueued, Condition: workitems.Condition{Input: "input of " + sp.id}}
		if sp.base {
			first.Base = &workitems.WorkspaceBase{Kind: workitems.BaseGit, Commit: "c0ffee-" + sp.id, Tree: "t", Source: "https://example.com/r.git", At: clock.Now()}
		}
		it := &workitems.Item{ID: sp.id, Template: sp.tmpl, Goal: "goal of " + sp.id, Origin: workitems.Origin{Kind: workitems.OriginManual, Actor: "test"},
			Budget: workitems.Budget{WallTime: workitems.Duration(time.Minute)}, MaxAttempts: 1, Attempts: []workitems.Attempt{first}}
		if err := st.Create(ctx, it, itemstore.CreateLimits{}); err != nil {
			t.Fatal(err)
		}
		// By the ways an item gets there: it ran, was verified, then closed or escalated.
		if _, err := st.Update(ctx, it.ID, nil, func(it *workitems.Item) ([]workitems.Event, error) {
			for _, to := range []workitems.State{workitems.StateRunning, workitems.StateVerifying, sp.state} {
				if err := it.SetState(to); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	exps := evals.NewStore(c.env.Client, c.env.Prefix)
	for _, tc := range []struct {
		name    string
		filters []string
		want    string // the selected items, by the refs of their tasks
		skipped string
	}{
		{"template", []string{"--template", "fix"}, "i1,i2", "i4"},
		{"template and state", []string{"--template", "fix", "--state", "closed"}, "i1", "i4"},
		{"states", []string{"--state", "escalated", "--state", "closed", "--template", "other"}, "i3,i5", ""},
		{"since and until", []string{"--since", "2026-01-03", "--until", "2026-01-06T00:00:00Z"}, "i2,i3", "i4"},
		{"ids", []string{"--ids", "i5,i1"}, "i1,i5", ""},
	} {
		// No worker runs them: the experiment is stored before its id is printed, so the
		// process is killed once it printed the id.
		run := c.command(append([]string{"eval", "run", "--from-items", "--variant", "A=" + empty}, tc.filters...)...)
		stdout, err := run.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		run.Stderr = &stderr
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() {
			_ = run.Wait()
			t.Fatalf("%s: eval run printed nothing: %s", tc.name, stderr.String())
		}
		id := strings.TrimSpace(lines.Text())
		_ = run.Process.Signal(syscall.SIGKILL)
		_ = run.Wait()
		e := awaitExperiment(t, exps, id)
		var refs []string
		for _, task := range e.Suite.Tasks {
			refs = append(refs, strings.TrimPrefix(task.Ref, "c0ffee-"))
			if want := "input of " + strings.TrimPrefix(task.Ref, "c0ffee-"); task.Input != want || task.Template == "" {
				t.Errorf("%s: task %+v, want its item's input and template", tc.name, task)
			}
		}
		slices.Sort(refs)
		if got := strings.Join(refs, ","); got != tc.want {
			t.Errorf("%s: tasks of items %s, want %s", tc.name, got, tc.want)
		}
		if tc.skipped != "" && !strings.Contains(stderr.String(), "without a recorded base commit: "+tc.skipped) {
			t.Errorf("%s: stderr %q does not name the skipped %s", tc.name, stderr.String(), tc.skipped)
		}
		if tc.skipped == "" && strings.Contains(stderr.String(), "skipped") {
			t.Errorf("%s: stderr %q names skipped items, want none", tc.name, stderr.String())
		}
	}
}
