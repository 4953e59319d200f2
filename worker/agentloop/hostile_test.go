package agentloop

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/worker/model"
	"outerloop/workitems"
)

// Not parallel: the worker's HOME is set to a home holding ~/.ssh.

func TestHostileShellToolCallFindsNothing(t *testing.T) {
	hs := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	t.Setenv("HOME", hs.Home)
	h := newHarness(t)
	h.runner = proctest.Runner(t, proc.ModeBwrap)
	hs.Prepare(h.runner)
	args, _ := json.Marshal(map[string]string{"command": hs.InWorkspace()})
	p := model.NewScripted("scripted",
		model.Reply(model.CallResponse(model.Call("c1", "shell", string(args)))),
		model.Reply(model.TextResponse("done")))
	if ex := h.run(t.Context(), p); ex.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", ex)
	}
	hs.CheckWorkspace(t, h.dir)
}

func TestHostileStopHookFindsNothing(t *testing.T) {
	hs := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	t.Setenv("HOME", hs.Home)
	h := newHarness(t)
	h.runner = proctest.Runner(t, proc.ModeBwrap)
	hs.Prepare(h.runner)
	hook := filepath.Join(h.dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\n"+hs.InWorkspace()+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.tmpl.Loop.StopHooks = []string{hook}
	p := model.NewScripted("scripted", model.Reply(model.TextResponse("done")))
	if ex := h.run(t.Context(), p); ex.Reason != workitems.ExitCompleted {
		t.Fatalf("exit %+v", ex)
	}
	hs.CheckWorkspace(t, h.dir)
}
