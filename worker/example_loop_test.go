package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"outerloop/worker"
	"outerloop/workitems"
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
