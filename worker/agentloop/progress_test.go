package agentloop

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/worker/model"
	"outerloop/workitems"
)

// A running shell tool call reports its elapsed time and the tail of its output while it runs.
func TestARunningShellCallReportsItsOutputTail(t *testing.T) {
	t.Parallel()
	tb, dir := newTestToolbox(t)
	seen := make(chan string, 1)
	tb.progressEvery = 20 * time.Millisecond
	tb.progress = func(elapsed time.Duration, out string) {
		if strings.Contains(out, "halfway") && elapsed > 0 {
			select {
			case seen <- out:
			default:
			}
		}
	}
	done := make(chan toolResult, 1)
	go func() {
		done <- tb.shell(t.Context(), `{"command":"echo halfway; while [ ! -f GO ]; do sleep 0.05; done; echo end"}`)
	}()
	select {
	case <-seen:
	case <-testwait.After(t): // a bound on a broken build, not a synchronisation
		t.Fatal("no progress with the call's output by the test's deadline")
	}
	if err := os.WriteFile(filepath.Join(dir, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.failed || !strings.Contains(res.out, "end") {
		t.Fatalf("shell result %+v", res)
	}
}

// Through the whole loop: a shell call still running reports progress events of kind
// command_progress — one of AllEventKinds (the test sink refuses any other) — and the call then
// ends as usual. Only a call that outlasts the progress period emits one, so a fast machine
// never met the kind; a loaded one did, and the sink panicked.
func TestALongShellCallsProgressIsAnEventKindOfTheLoop(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var once sync.Once
	h.ev.on = func(ev workitems.Event) {
		if workitems.EventKind(ev.Data["kind"]) == workitems.KindCommandProgress && strings.Contains(ev.Data["tail"], "halfway") {
			once.Do(func() { _ = os.WriteFile(filepath.Join(h.dir, "GO"), nil, 0o644) })
		}
	}
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "shell", `{"command":"echo halfway; while [ ! -f GO ]; do sleep 0.05; done; echo end"}`))),
		model.Reply(model.TextResponse("waited")))
	ex := h.run(t.Context(), p, WithProgressEvery(20*time.Millisecond))
	if ex.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", ex)
	}
	if out, ok := outputOf(p.Requests()[1], "c1"); !ok || !strings.Contains(out, "end") {
		t.Fatalf("the shell call's output %q", out)
	}
	if !slices.Contains(h.ev.kinds(), string(workitems.KindCommandProgress)) {
		t.Fatalf("no progress event among %v", h.ev.kinds())
	}
}
