package execloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"outerloop/worker"
	"outerloop/worker/execloop"
	"outerloop/worker/execloop/agenttest"
	"outerloop/workitems"
)

// resumeScript makes the agent start a long command until the request carries the resume
// prompt, then finishes.
func resumeScript(call func(string) agenttest.Call, marker string) agenttest.Script {
	return func(req agenttest.Request) agenttest.Reply {
		if req.Contains("was interrupted") {
			return agenttest.Reply{Text: "Resumed and done."}
		}
		return agenttest.Reply{Calls: []agenttest.Call{call("echo started > ready.fifo; exec sleep " + marker)}}
	}
}

// interruptThenResume runs the attempt until its command starts, cancels it (as a worker
// shutdown would), then runs it again as a resumed attempt.
func interruptThenResume(t *testing.T, a *attempt, loop *execloop.Loop) workitems.Exit {
	t.Helper()
	ready := readFIFO(mkfifo(t, a.Workspace, "ready.fifo"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan workitems.Exit, 1)
	go func() { done <- loop.Run(ctx, a.Attempt) }()
	within(t, ready, "the agent's command to start")
	cancel()
	if exit := within(t, done, "Run to return"); exit.Reason != workitems.ExitAborted {
		t.Fatalf("first run: exit = %+v, want aborted", exit)
	}
	a.Resumed = true
	a.Meter = worker.NewMeter(a.Meter.Budget(), a.Meter.Spent(), nil)
	return loop.Run(context.Background(), a.Attempt)
}

func TestResume(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s agenttest.Script) (*attempt, *agenttest.Server, *execloop.Loop)
		call  func(string) agenttest.Call
	}{
		{"codex", func(t *testing.T, s agenttest.Script) (*attempt, *agenttest.Server, *execloop.Loop) {
			return codexSetup(t, s, workitems.Budget{})
		}, execCommand},
		{"claude", func(t *testing.T, s agenttest.Script) (*attempt, *agenttest.Server, *execloop.Loop) {
			return claudeSetup(t, s, workitems.Budget{})
		}, bash},
	} {
		t.Run("an interrupted "+tc.name+" attempt continues its recorded session", func(t *testing.T) {
			t.Parallel()
			a, srv, loop := tc.setup(t, resumeScript(tc.call, sleepMarker(t)))
			exit := interruptThenResume(t, a, loop)
			if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "Resumed and done." {
				t.Fatalf("resumed run: exit = %+v, want completed", exit)
			}
			var st execloop.State
			if err := json.Unmarshal(a.cp.State(), &st); err != nil || st.Runs != 2 || st.Restarted {
				t.Fatalf("checkpoint = %s, want two runs of one session", a.cp.State())
			}
			reqs := srv.Requests()
			last := reqs[len(reqs)-1]
			// The resumed session's request carries the first run's history: its goal.
			if !last.Contains("Make the tests in this module pass.") || !last.Contains("was interrupted") {
				t.Fatalf("the resumed request lacks the first run's history")
			}
			if !strings.Contains(strings.Join(a.ev.kinds(), " "), "resumed") || a.Condition.Restarted {
				t.Fatalf("events %v, restarted %v: want a resumed session", a.ev.kinds(), a.Condition.Restarted)
			}
		})
	}

	t.Run("an interrupted agent without a session starts afresh and records the restart", func(t *testing.T) {
		t.Parallel()
		a := newAttempt(t, "command", workitems.Budget{})
		a.Template.Loop.Command = "sh"
		a.Template.Loop.Args = []string{"-c", "echo restarted fine"}
		state, _ := json.Marshal(execloop.State{Agent: "command", Runs: 1, Offset: 3})
		_ = a.cp.Save(context.Background(), state) // the checkpoint a resumed attempt finds
		a.Resumed = true
		exit := execloop.New(execloop.WithLookupEnv(a.lookup)).Run(context.Background(), a.Attempt)
		if exit.Reason != workitems.ExitCompleted || exit.LastMessage != "restarted fine" {
			t.Fatalf("exit = %+v, want completed", exit)
		}
		if !a.Condition.Restarted || !strings.Contains(strings.Join(a.ev.kinds(), " "), "restarted") {
			t.Fatalf("condition restarted = %v, events %v: want the restart recorded", a.Condition.Restarted, a.ev.kinds())
		}
	})
}
