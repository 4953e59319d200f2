package demo_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/worker"
	"outerloop/worker/agentloop"
	"outerloop/worker/agentloop/demo"
	"outerloop/worker/workertest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestRecordedModelFixesThePaymentModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "payment")
	if err := demo.WriteModule(ws); err != nil {
		t.Fatal(err)
	}
	check := demo.GoTestCheck{Dir: ws}
	before, err := check.Check(t.Context())
	if err != nil || before.Passed || !strings.Contains(before.Summary, "TestRefundExpiredOrder") {
		t.Fatalf("the sample should start red on TestRefundExpiredOrder: %+v, %v", before, err)
	}
	rec := filepath.Join(dir, "payment.jsonl")
	if err := demo.WriteRecording(rec); err != nil {
		t.Fatal(err)
	}
	tmpl := demo.Template()
	cfg := &config.Config{Providers: map[string]config.ProviderConfig{demo.ProviderName: demo.ProviderConfig(rec)}}
	ev := &workertest.Events{}
	a := &worker.Attempt{
		Item: &workitems.Item{ID: tmpl.Name + "@demo", Template: tmpl.Name, Goal: tmpl.Goal}, N: 1,
		Template: &tmpl, Config: cfg, Workspace: ws,
		Meter:       worker.NewMeter(tmpl.Budget, workitems.Spend{}, nil),
		Checkpoints: &workertest.Checkpoints{}, Events: ev, DoneCheck: check,
	}
	ex := agentloop.New().Run(t.Context(), a)
	if ex.Reason != workitems.ExitCompleted || !strings.Contains(ex.LastMessage, "Fixed payment.Refund") {
		t.Fatalf("exit %+v", ex)
	}
	after, err := check.Check(t.Context())
	if err != nil || !after.Passed {
		t.Fatalf("the done check still fails after the recorded fix: %+v, %v", after, err)
	}
	src, _ := os.ReadFile(filepath.Join(ws, "payment.go"))
	if !strings.Contains(string(src), "o.ExpiresAt.Add(RefundWindow)") || !strings.Contains(string(src), "ErrOverRefund") {
		t.Fatalf("payment.go lacks the two fixes:\n%s", src)
	}
	var checks, fails int
	for _, e := range ev.All() {
		if e.Data["kind"] == "tool_output" && e.Data["name"] == "run_done_check" {
			checks++
			if e.Data["failed"] == "true" {
				fails++
			}
		}
	}
	if checks != 3 || fails != 2 {
		t.Fatalf("done checks %d (%d failed), want 3 with the first two red", checks, fails)
	}
	if s := a.Meter.Spent(); s.ModelCalls != 7 || s.ToolCalls != 6 {
		t.Fatalf("spend %+v", s)
	}
}
