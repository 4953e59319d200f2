package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"outerloop/internal/app"
	"outerloop/lib/testwait"
	"outerloop/scheduler"
)

// An exec agent's home is kept per workspace for resume. The agent replaces it with a link to
// a host directory and is stopped (a worker's graceful shutdown); the resumed run's home must
// not be that directory.
func TestAHostileExecAgentsHomeLinkedToAHostDirectoryIsNotWrittenThrough(t *testing.T) {
	// Not parallel: it sets the worker's own environment (t.Setenv).
	r := &hostileRun{hostileCase: hostileCase{name: "home", tmpl: "exec-home", ends: inertOrRefused, hints: []string{"home"}}, elsewhere: newElsewhere(t)}
	// The first run plants the link, reports a step (a checkpoint, whose snapshot holds
	// .hostile-started: the resumed run finds its workspace as it was) and waits to be stopped;
	// the resumed run writes to its home.
	agent := `if [ ! -e .hostile-started ]; then ` +
		`mkdir -p .git/outerloop && rm -rf .git/outerloop/home && ln -s {HOST} .git/outerloop/home && echo started > .hostile-started; ` +
		`echo '{"tool_calls":1,"message":"planted the link"}' >&3; touch .git/hostile-ready; exec sleep 120; fi; ` +
		`echo pwned > "$HOME/pwned"; echo pwned > .git/outerloop/home/pwned; echo "work of exec-home" > NOTES.md`
	w := newHostileWorld(t, func(w *hostileWorld) []hostileTemplate {
		r.marker, r.secret = filepath.Join(w.markers, r.tmpl), canary("host-secret-"+r.tmpl)
		r.host = w.hostDir(t, r.tmpl, r.secret)
		return []hostileTemplate{{name: r.tmpl,
			loop: fmt.Sprintf(`{kind: exec, agent: command, command: /bin/sh, args: ["-c", %s]}`, strconv.Quote(r.expand(w, agent)))}}
	}, func(o *app.Options) { o.LeaseTTL = 3 * time.Second })
	r.before = snapshotHost(t, r.host)
	w1 := w.s.Worker(1, "home-1")
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	it, err := w.s.Queue.Submit(context.Background(), scheduler.Request{Template: r.tmpl})
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(w.s.Workspaces.Path(it.ID, 1), ".git", "hostile-ready"))
	awaitCheckpoint(t, w.s, it.ID, "planted the link")
	w1.Shutdown(context.Background())
	startAppWorker(t, w.s.App, 1, "home-2")
	got := awaitState(t, w.s.Store, it.ID, hostileEnds...)
	if got.Attempts[0].Resumes < 1 {
		t.Errorf("the attempt was not resumed (%d resumes): the home was never used twice", got.Attempts[0].Resumes)
	}
	w.check(t, r, got)
}

// awaitCheckpoint waits until the attempt's checkpoint history holds a step saying what.
func awaitCheckpoint(t *testing.T, s *sys, id, what string) {
	t.Helper()
	deadline := testwait.Deadline(t)
	for {
		_, hist, err := s.Store.LoadCheckpoint(context.Background(), id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(hist, func(h []byte) bool { return strings.Contains(string(h), what) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of %s says %q", id, what)
		}
		time.Sleep(20 * time.Millisecond) // a checkpoint written by the worker has no event to await
	}
}
