package app_test

import (
	"context"
	"testing"

	"outerloop/internal/app"
	"outerloop/scheduler"
	"outerloop/worker"
	"outerloop/workitems"
)

// startAppWorker starts a worker of a with concurrency n, shut down at cleanup.
func startAppWorker(t *testing.T, a *app.App, n int, id string) *worker.Server {
	t.Helper()
	w := a.Worker(n, id)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })
	return w
}

// submitAndAwait submits one item of template and waits until it reaches one of states.
func submitAndAwait(t *testing.T, a *app.App, template string, states ...workitems.State) *workitems.Item {
	t.Helper()
	it, err := a.Queue.Submit(context.Background(), scheduler.Request{Template: template})
	if err != nil {
		t.Fatal(err)
	}
	return awaitState(t, a.Store, it.ID, states...)
}
