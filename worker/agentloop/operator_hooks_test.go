package agentloop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"outerloop/worker/model"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

// An operator's stop hook kept next to the config (outside the workspace, in a directory the
// sandbox hides) runs under the real bubblewrap sandbox when the template's operator files are
// bound; unbound or missing, it cannot run, and that ends the attempt after one model call as
// a configuration error instead of reading `sh: cannot open …` (exit 2) as a block.
func TestOperatorStopHookOutsideTheWorkspace(t *testing.T) {
	t.Parallel()
	cfgDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfgDir, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "secret.yaml"), []byte("token: hunter2-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(cfgDir, "hooks", "check.sh")
	script := "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *'\"stop_hook_active\":true'*) exit 0;; esac\n" +
		"echo \"run the checks first; config: $(cat " + filepath.Join(cfgDir, "secret.yaml") + " 2>&1)\" >&2\nexit 2\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(cfgDir, "hooks", "gone.sh")
	for _, tc := range []struct {
		name, command string
		bind          bool
		requests      int
		want          workitems.ExitReason
	}{
		{"bound: the hook runs and blocks once", "sh " + hook, true, 2, workitems.ExitCompleted},
		{"not bound: sh cannot open it", "sh " + hook, false, 1, workitems.ExitFailed},
		{"missing, through sh", "sh " + gone, true, 1, workitems.ExitFailed},
		{"missing, run directly (127)", gone, true, 1, workitems.ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.tmpl.Loop.StopHooks = []string{tc.command}
			if tc.bind {
				h.tmpl.OperatorFiles = config.OperatorFiles(h.tmpl, cfgDir)
			}
			h.attempt() // makes the sandboxed runner
			h.runner.Hide = append(h.runner.Hide, cfgDir)
			p := model.NewScripted("scripted", model.Reply(model.TextResponse("a")), model.Reply(model.TextResponse("b")),
				model.Reply(model.TextResponse("c")))
			ex := h.run(t.Context(), p)
			if ex.Reason != tc.want || len(p.Requests()) != tc.requests {
				t.Fatalf("exit %+v after %d requests, want %s after %d", ex, len(p.Requests()), tc.want, tc.requests)
			}
			switch tc.want {
			case workitems.ExitCompleted:
				u := userTexts(p.Requests()[1])
				got := u[len(u)-1]
				if !strings.HasPrefix(got, "run the checks first") || strings.Contains(got, "hunter2") {
					t.Fatalf("continuation %q: want the hook's reason, and the config dir still hidden", got)
				}
			case workitems.ExitFailed:
				if ex.Class != workitems.ClassNotFound || !strings.Contains(ex.Message, "cannot run") || !strings.Contains(ex.Message, tc.command) {
					t.Fatalf("exit %+v: want a not_found configuration error naming the hook", ex)
				}
				if len(h.ev.of("stop_hook")) != 0 {
					t.Fatalf("a hook that cannot run was recorded as a block: %v", h.ev.kinds())
				}
			}
		})
	}
}

// A hook that blocks again with the same continuation while stop_hook_active is set ends the
// attempt with no_progress after the second identical block, not at the model-call budget.
func TestRepeatedStopHookBlockEndsWithNoProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cmd, _ := hookScript(t, h.dir, `echo same reason >&2; exit 2`, `echo same reason >&2; exit 2`,
		`echo same reason >&2; exit 2`, `echo same reason >&2; exit 2`)
	h.tmpl.Loop.StopHooks = []string{cmd}
	var steps []model.ScriptStep
	for range 10 {
		steps = append(steps, model.Reply(model.TextResponse("done")))
	}
	p := model.NewScripted("scripted", steps...)
	ex := h.run(t.Context(), p)
	if ex.Reason != workitems.ExitNoProgress || len(p.Requests()) != 2 {
		t.Fatalf("exit %+v after %d requests, want no_progress after 2", ex, len(p.Requests()))
	}
	if !strings.Contains(ex.Message, "same reason") {
		t.Fatalf("exit message %q does not quote the repeated continuation", ex.Message)
	}
}

func TestCannotRunIsTheInterpretersComplaintOnly(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		code   int
		stderr string
		want   bool
	}{
		{"sh /etc/h.sh", 2, "sh: 0: cannot open /etc/h.sh: No such file\n", true},
		{"sh /etc/h.sh", 2, "sh: 0: Can't open /etc/h.sh\n", true},
		{"bash /etc/h.sh", 127, "bash: /etc/h.sh: No such file or directory", true},
		{"python3 /srv/h.py", 2, "python3: can't open file '/srv/h.py': [Errno 2] No such file or directory", true},
		{"/etc/h.sh", 126, "sh: 1: /etc/h.sh: Permission denied", true},
		{"sh /etc/h.sh", 2, "the report file: No such file (run the tests first)", false},
		{"sh /etc/h.sh", 2, "run the tests first", false},
		{"sh /etc/h.sh", 1, "sh: 0: cannot open /etc/h.sh", false},
	} {
		if got := cannotRun(tc.cmd, tc.code, tc.stderr); got != tc.want {
			t.Errorf("%q exit %d %q: %v, want %v", tc.cmd, tc.code, tc.stderr, got, tc.want)
		}
	}
}
