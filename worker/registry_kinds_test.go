package worker_test

import (
	"context"
	"testing"

	"outerloop/worker"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

type steerableLoop struct{}

func (steerableLoop) Run(context.Context, *worker.Attempt) workitems.Exit { return workitems.Exit{} }
func (steerableLoop) Traits() config.LoopTraits                           { return config.LoopTraits{Steerable: true} }

// TestTheRegistryAnswersEachKindsTraits: a loop that declares traits has them; one registered
// under a built-in kind without declaring any keeps the built-in traits (a test's stand-in for
// the script loop is still charged and steered as a script); a kind of its own without them
// has none; a kind nobody registered is unknown.
func TestTheRegistryAnswersEachKindsTraits(t *testing.T) {
	t.Parallel()
	plain := worker.InnerLoopFunc(func(context.Context, *worker.Attempt) workitems.Exit { return workitems.Exit{} })
	reg := worker.NewRegistry()
	reg.Register("plan", steerableLoop{})
	reg.Register(workitems.LoopScript, plain)
	reg.Register(workitems.LoopAgent, plain)
	reg.Register("tally", plain)
	builtin := config.BuiltinLoopKinds()
	for _, tc := range []struct {
		kind             workitems.LoopKind
		known            bool
		steerable, model bool
		programs         bool
	}{
		{kind: "plan", known: true, steerable: true},
		{kind: workitems.LoopScript, known: true, programs: true},
		{kind: workitems.LoopAgent, known: true, steerable: true, model: true},
		{kind: "tally", known: true},
		{kind: workitems.LoopExec}, // built in, but this registry has no exec loop
	} {
		tr, ok := reg.LoopTraits(tc.kind)
		if ok != tc.known || tr.Steerable != tc.steerable || tr.CallsModel != tc.model || (tr.Programs != nil) != tc.programs {
			t.Errorf("%s: %+v known %v; want known %v steerable %v model %v programs %v", tc.kind, tr, ok, tc.known, tc.steerable, tc.model, tc.programs)
		}
		if want, isBuiltin := builtin.LoopTraits(tc.kind); isBuiltin && ok && (want.Steerable != tr.Steerable || want.CallsModel != tr.CallsModel) {
			t.Errorf("%s: registered without traits, it lost the built-in ones", tc.kind)
		}
	}
}
