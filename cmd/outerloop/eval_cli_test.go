package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"outerloop/evals"
	"outerloop/workitems"
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
	items := workitems.NewStore(c.rdb, evals.ItemPrefix(c.prefix))
	e := awaitExperiment(t, exps, id)
	// Kill both once some runs ended and some run.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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

// writeEvalFiles writes a suite of the given tasks of template tmpl and an empty variant file.
func writeEvalFiles(t *testing.T, tmpl string, tasks ...string) (suite, empty string) {
	t.Helper()
	dir := t.TempDir()
	suite, empty = filepath.Join(dir, "suite.yaml"), filepath.Join(dir, "a.yaml")
	body := "name: s\ntasks:\n"
	for _, id := range tasks {
		body += "  - {id: " + id + ", template: " + tmpl + ", input: task-" + id + "}\n"
	}
	if err := os.WriteFile(suite, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return suite, empty
}

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
	body, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := workitems.ParseConfig(body)
	if err != nil {
		t.Fatal(err)
	}
	r := &evals.Runner{Config: func() *workitems.Config { return conf }, Clock: workitems.SystemClock{}}
	e, err := r.Prepare(evals.Plan{Suite: &evals.Suite{Name: "s", Tasks: []evals.Task{{ID: "a", Template: "spend"}, {ID: "b", Template: "spend"}}},
		Variants: []evals.Variant{{Name: "A"}}, Repeat: 2, BudgetUSD: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	exps := evals.NewStore(c.env.Client, c.env.Prefix)
	if err := exps.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	id := e.ID
	items := workitems.NewStore(c.env.Client, evals.ItemPrefix(c.env.Prefix))

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
