package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/lib/redistest"
	"outerloop/scheduler"
	"outerloop/verify"
	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
	"outerloop/workitems/itemstore"
)

// printEvents is an EventSink that prints what the loop reports (the worker's writes to the
// item's log, fenced by the attempt's lease).
type printEvents struct{}

func (printEvents) Emit(_ context.Context, e workitems.Event) { fmt.Println("event:", e.Message) }

// notesLoop is an inner loop written from scratch: each step appends one line of the goal to
// NOTES.md in the workspace, charging a step to the meter, until the goal is written out or a cap
// stops it. It ends with an explicit exit; the verifier, not the loop, decides what happens next.
type notesLoop struct{ lines []string }

func (l notesLoop) Run(ctx context.Context, a *worker.Attempt) workitems.Exit {
	for _, line := range l.lines {
		if err := a.Meter.Allow(); err != nil { // a cap already reached: stop before spending
			var be *worker.BudgetError
			errors.As(err, &be)
			return workitems.Exit{Reason: workitems.ExitBudgetExhausted, Budget: be.Kind, Message: err.Error()}
		}
		f, err := os.OpenFile(filepath.Join(a.Workspace, "NOTES.md"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, line)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassUnknown, Message: err.Error()}
		}
		_ = a.Meter.Add(workitems.Spend{Steps: 1}) // the step happened; Allow stops the next one
		a.Events.Emit(ctx, workitems.Event{Type: workitems.EventStep, Message: "wrote " + line})
	}
	return workitems.Exit{Reason: workitems.ExitCompleted, Message: "notes written"}
}

// Writing an inner loop: implement Run (or use InnerLoopFunc) and register it under a kind; the
// handler gives it the attempt — workspace, meter, checkpointer, events — and acts on its exit.
func Example_innerLoop() {
	reg := worker.NewRegistry()
	reg.Register("notes", notesLoop{lines: []string{"# Plan", "- fix Add", "- run the tests"}})

	dir, _ := os.MkdirTemp("", "notes-example")
	defer os.RemoveAll(dir)
	loop, err := reg.Lookup("notes")
	if err != nil {
		panic(err)
	}
	budget := workitems.Budget{Steps: 2, WallTime: workitems.Duration(time.Minute)}
	a := &worker.Attempt{N: 1, Workspace: dir, Events: printEvents{},
		Meter: worker.NewMeter(budget, workitems.Spend{}, workitems.SystemClock{})}
	exit := loop.Run(context.Background(), a)
	fmt.Println("exit:", exit.Reason, exit.Budget, "| steps:", a.Meter.Spent().Steps)
	b, _ := os.ReadFile(filepath.Join(dir, "NOTES.md"))
	fmt.Print(string(b))
	// Output:
	// event: wrote # Plan
	// event: wrote - fix Add
	// exit: budget_exhausted steps | steps: 2
	// # Plan
	// - fix Add
}

// planLoop is a new loop kind, "plan": it writes loop.instructions (the plan's heading) to
// PLAN.md, then every line a person steered it with. It declares its kind's traits (it reads
// steer input; it calls no model) and checks its settings, so the config, the scheduler's steer
// and `outerloop validate` know it from its registration alone.
type planLoop struct{}

func (planLoop) Traits() config.LoopTraits {
	return config.LoopTraits{Steerable: true} // no model: nothing charged to a provider; no program to look for
}

func (planLoop) ValidateLoop(_ *config.Config, t *config.Template) error {
	if !strings.HasPrefix(t.Loop.Instructions, "# ") {
		return &config.ConfigError{Field: "loop.instructions", Err: fmt.Errorf("%q: want the plan's heading, \"# …\"", t.Loop.Instructions)}
	}
	return nil
}

func (planLoop) Run(ctx context.Context, a *worker.Attempt) workitems.Exit {
	fail := func(err error) workitems.Exit {
		return workitems.Exit{Reason: workitems.ExitFailed, Class: workitems.ClassOf(err), Message: err.Error()}
	}
	steered, err := a.Steer.Drain(ctx)
	if err != nil {
		return fail(err)
	}
	plan := strings.Join(append([]string{a.Template.Loop.Instructions}, steered...), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(a.Workspace, "PLAN.md"), []byte(plan), 0o644); err != nil {
		return fail(err)
	}
	// The checkpoint holds the drained input: it takes it off the steer queue in the same write.
	state, _ := json.Marshal(map[string][]string{"steered": steered})
	if err := a.Checkpoints.Save(ctx, state); err != nil {
		return fail(err)
	}
	_ = a.Meter.Add(workitems.Spend{Steps: 1})
	return workitems.Exit{Reason: workitems.ExitCompleted, Message: "plan written"}
}

// planVerifier closes an item whose PLAN.md has a plan (a deployment's verifier is package
// verify, wired by internal/app; it runs the template's done check).
type planVerifier struct{}

func (planVerifier) Verify(_ context.Context, req verify.Request) (verify.Result, error) {
	b, err := os.ReadFile(filepath.Join(req.Workspace, "PLAN.md"))
	if err != nil {
		return verify.Result{Decision: workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "no_plan", Reasons: []string{err.Error()}, Actor: "verifier"}}, nil
	}
	return verify.Result{Decision: workitems.Decision{Outcome: workitems.OutcomeClose, Rule: "plan_written",
		Reasons: strings.Split(strings.TrimSpace(string(b)), "\n"), Actor: "verifier"}}, nil
}

func (planVerifier) Check(context.Context, *config.Template, string) (bool, string, error) {
	return false, "", nil
}

func (planVerifier) Judge(_ context.Context, j verify.Judgement) workitems.Decision {
	return workitems.Decision{Outcome: workitems.OutcomeEscalate, Rule: "precondition", Actor: "verifier"}
}

// Adding a loop kind: register the loop under a new kind; its traits (LoopTraitsDeclarer) and
// settings check (LoopSettingsValidator) come with it. Here a config naming the kind validates
// against the registry, a bad setting is refused naming its field, the scheduler takes steer
// input for the kind that reads it and refuses it for one that declares no traits, and an item
// runs through the worker's handler to the verifier's decision.
func Example_loopKind() {
	ctx := context.Background()
	reg := worker.NewRegistry()
	reg.Register("plan", planLoop{})
	// A kind without traits: it reads no steer input, calls no model, starts no program.
	reg.Register("tally", worker.InnerLoopFunc(func(context.Context, *worker.Attempt) workitems.Exit {
		return workitems.Exit{Reason: workitems.ExitCompleted}
	}))
	fmt.Println("kinds:", reg.LoopKinds())

	repo, cleanup, err := exampleRepo()
	if err != nil {
		panic(err)
	}
	defer cleanup()
	conf := func(heading string) string {
		return fmt.Sprintf(`
defaults: {budget: {wall_time: 5m}}
templates:
  - {name: plan, repo: %s, goal: plan the fix, loop: {kind: plan, instructions: %q}, done_check: {commands: ["test -s PLAN.md"]}}
  - {name: tally, repo: %s, goal: count, loop: {kind: tally}, done_check: {commands: ["true"]}}
`, repo, heading, repo)
	}
	_, err = config.ParseConfigWith([]byte(conf("Plan")), config.Kinds{Loops: reg})
	var ce *config.ConfigError
	if errors.As(err, &ce) {
		fmt.Println("refused:", ce.Template, ce.Field)
	}
	_, err = config.ParseConfig([]byte(conf("# Plan"))) // the built-in kinds only
	if errors.As(err, &ce) {
		fmt.Println("refused without the registry:", ce.Template, ce.Field)
	}
	cfg, err := config.ParseConfigWith([]byte(conf("# Plan")), config.Kinds{Loops: reg})
	if err != nil {
		panic(err)
	}

	// One deployment's slice of Redis: a prefix of its own, removed at the end.
	opt, err := redis.ParseURL(redistest.URL())
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	prefix := fmt.Sprintf("oltest:example-%d:", os.Getpid())
	queue := strings.TrimSuffix(prefix, ":")
	client := asynq.NewClientFromRedisClient(rdb)
	defer func() {
		redistest.DeleteMatching(ctx, rdb, prefix+"*")
		redistest.DeleteMatching(ctx, rdb, "asynq:{"+queue+"}*")
		rdb.SRem(ctx, "asynq:queues", queue)
	}()
	store := itemstore.NewStore(rdb, prefix)
	q := scheduler.NewQueue(store, client, nil, cfg, scheduler.QueueOptions{Queue: queue, Loops: reg,
		Logger: slog.New(slog.DiscardHandler)})

	it, err := q.Submit(ctx, scheduler.Request{Template: "plan"})
	if err != nil {
		panic(err)
	}
	other, err := q.Submit(ctx, scheduler.Request{Template: "tally"})
	if err != nil {
		panic(err)
	}
	fmt.Println("steer plan:", q.Steer(ctx, it.ID, "- fix Add first", "ana"))
	err = q.Steer(ctx, other.ID, "- and count", "ana")
	fmt.Println("steer tally refused:", errors.Is(err, itemstore.ErrNotSteerable))

	work, err := os.MkdirTemp("", "plan-example-work")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(work)
	h := worker.NewHandler(worker.HandlerOptions{Store: store, Config: cfg, Loops: reg, Verifier: planVerifier{},
		Workspaces: &worker.Workspaces{Root: work, Deployment: "example"}, Logger: slog.New(slog.DiscardHandler)})
	if err := h.Process(ctx, it.ID, 1); err != nil {
		panic(err)
	}
	done, err := store.Get(ctx, it.ID)
	if err != nil {
		panic(err)
	}
	d := done.Decisions[len(done.Decisions)-1]
	fmt.Println("item:", done.State, "| decision:", d.Outcome, d.Rule, d.Reasons)
	// Output:
	// kinds: [plan tally]
	// refused: plan loop.instructions
	// refused without the registry: plan loop.kind
	// steer plan: <nil>
	// steer tally refused: true
	// item: closed | decision: close plan_written [# Plan - fix Add first]
}

// exampleRepo makes a git repository of one commit for the example's items to start from.
func exampleRepo() (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "plan-example-repo")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("calc\n"), 0o644); err != nil {
		cleanup()
		return "", nil, err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=example", "-c", "user.email=example@localhost", "commit", "-q", "-m", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("git %v: %w: %s", args, err, out)
		}
	}
	return dir, cleanup, nil
}
