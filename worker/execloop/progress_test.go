package execloop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/worker/execloop"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// await returns a channel that receives the first event emitted from now on that matches.
func (e *events) await(match func(workitems.Event) bool) <-chan workitems.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := make(chan workitems.Event, 1)
	e.waiters = append(e.waiters, waiter{match: match, ch: ch})
	return ch
}

// A running exec agent's elapsed time and output tail reach the events while it runs, with
// its secrets redacted.
func TestARunningAgentReportsItsElapsedTimeAndOutputTail(t *testing.T) {
	t.Parallel()
	a := newAttempt(t, "command", workitems.Budget{})
	a.Template.Loop.Command = "sh"
	a.Template.Loop.Args = []string{"-c", `echo "working on it" >&2; echo "key $PROVIDER_KEY" >&2; while [ ! -f GO ]; do sleep 0.05; done`}
	a.env["PROVIDER_KEY"] = "sk-provider-secret-value"
	a.Config.Providers["p"] = config.ProviderConfig{Kind: "openai-responses", APIKeyEnv: "PROVIDER_KEY"}
	a.Template.Loop.Provider = "p"
	loop := execloop.New(execloop.WithLookupEnv(a.lookup), execloop.WithProgressEvery(50*time.Millisecond))
	got := a.ev.await(func(e workitems.Event) bool {
		return workitems.EventKind(e.Data["kind"]) == workitems.KindCommandProgress && strings.Contains(e.Data["tail"], "key ")
	})
	done := make(chan workitems.Exit, 1)
	go func() { done <- loop.Run(context.Background(), a.Attempt) }()
	e := within(t, got, "a progress event with the agent's output")
	if !strings.Contains(e.Data["tail"], "working on it") || e.Data["elapsed"] == "" || !strings.HasPrefix(e.Message, "command running for ") {
		t.Errorf("progress event %+v", e)
	}
	if strings.Contains(e.Data["tail"]+e.Message, "sk-provider-secret-value") {
		t.Errorf("the provider key reached a progress event: %+v", e)
	}
	if err := os.WriteFile(filepath.Join(a.Workspace, "GO"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-done
}
