package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"outerloop/lib/testwait"
	"outerloop/proc"
	"outerloop/proc/proctest"
	"outerloop/workitems"
	"outerloop/workitems/config"
)

func TestDoneCheckCommands(t *testing.T) {
	t.Parallel()
	t.Run("a command killed by a signal is re-run as infrastructure, not an item attempt", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		pass, _ := filepath.Abs("testdata/gojson/pass.json")
		// The first run kills itself (an OOM kill looks like this); the re-run succeeds.
		cmd := `if [ ! -f ran ]; then touch ran; kill -9 $$; fi; cat '` + pass + `'`
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: template(cmd),
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome != workitems.OutcomeClose || res.Facts.InfraReruns != 1 {
			t.Fatalf("got %s/%s after %d re-runs", res.Decision.Outcome, res.Decision.Rule, res.Facts.InfraReruns)
		}
	})
	t.Run("a command that keeps dying escalates after the infra re-runs", func(t *testing.T) {
		t.Parallel()
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: template(`echo $$ >> runs; kill -9 $$`),
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != "infra_error" || res.Facts.InfraReruns != 1 {
			t.Fatalf("got %s after %d re-runs", res.Decision.Rule, res.Facts.InfraReruns)
		}
	})
	t.Run("a done check past its timeout is killed with its children and retried", func(t *testing.T) {
		t.Parallel()
		// The check's sleeps carry a marker (their argv) so that the host's process table can
		// tell whether they outlived the check; a sleep run to its end would leave "slept".
		marker := fmt.Sprintf("30.%d", time.Now().UnixNano()%1e9)
		tmpl := template("sleep " + marker + " & sleep " + marker + " && touch slept; echo never")
		tmpl.DoneCheck.Timeout = workitems.Duration(300 * time.Millisecond)
		ws := t.TempDir()
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl,
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != "check_timed_out" || res.Decision.Outcome != workitems.OutcomeRetry {
			t.Fatalf("got %s/%s", res.Decision.Outcome, res.Decision.Rule)
		}
		if _, err := os.Stat(filepath.Join(ws, "slept")); err == nil {
			t.Fatal("the check's sleep ran to its end: the process group was not killed")
		}
		proctest.WaitNoProcess(t, marker) // the background sleep too, however loaded the machine
	})
	t.Run("a cancelled context is an error, not a decision", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newTestVerifier().Verify(ctx, Request{Template: template("true"), Item: item(workitems.Attempt{N: 1}),
			Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("plain command output is not mistaken for a report", func(t *testing.T) {
		t.Parallel()
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: template("echo building; echo ok"),
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != "checks_passed" || len(res.Facts.Reports) != 0 {
			t.Fatalf("got %s with %d reports", res.Decision.Rule, len(res.Facts.Reports))
		}
	})
	// A TAP stream cannot show a failure after its points: the done check's exit status, which
	// the worker always has, decides.
	for _, c := range []struct {
		cmd  string
		rule string
	}{
		{"cat '%s'", "all_green"},
		{"cat '%s'; exit 255", "command_failed"},
	} {
		t.Run("a green TAP stream from a command exiting "+c.rule, func(t *testing.T) {
			t.Parallel()
			tap, _ := filepath.Abs("testdata/tap/perl-dies-stdout.tap")
			res, err := newTestVerifier().Verify(context.Background(), Request{Template: template(fmt.Sprintf(c.cmd, tap)),
				Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Decision.Rule) != c.rule || len(res.Facts.Reports) != 1 {
				t.Fatalf("got %s (%q) with %d reports", res.Decision.Rule, res.Decision.Reasons, len(res.Facts.Reports))
			}
		})
	}
	t.Run("a cargo crate that does not compile gives no report and never closes", func(t *testing.T) {
		t.Parallel()
		// cargo writes the compiler's errors on stderr and nothing on stdout, the report.
		log, _ := filepath.Abs("testdata/console/cargo-compile.txt")
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: template("cat '" + log + "' >&2; exit 101"),
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Rule != "command_failed" || !strings.Contains(res.Decision.Reasons[0], "exited 101: error[E0425]") {
			t.Fatalf("got %s (%q)", res.Decision.Rule, res.Decision.Reasons)
		}
	})
	t.Run("a Catch2 report a listener left empty is missing, and says why", func(t *testing.T) {
		t.Parallel()
		ws := t.TempDir()
		empty, _ := os.ReadFile("testdata/junit/catch2-listener.xml")
		writeFiles(t, ws, map[string]string{"report.xml": string(empty)})
		tmpl := template("exit 255")
		tmpl.DoneCheck.Reports = []string{"report.xml"}
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl,
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome == workitems.OutcomeClose || !strings.Contains(strings.Join(res.Facts.Missing, ";"), "never wrote the report") {
			t.Fatalf("got %s (%q), missing %q", res.Decision.Rule, res.Decision.Reasons, res.Facts.Missing)
		}
	})
	t.Run("a template that names the format needs a report from its commands", func(t *testing.T) {
		t.Parallel()
		tmpl := template("echo building")
		tmpl.DoneCheck.Format = FormatGoJSON
		res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl,
			Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decision.Outcome == workitems.OutcomeClose {
			t.Fatalf("closed on %s", res.Decision.Rule)
		}
	})
}

func TestReportFiles(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	junit, _ := os.ReadFile("testdata/junit/nested.xml")
	writeFiles(t, ws, map[string]string{"reports/unit.xml": string(junit), "reports/it.xml": string(junit)})
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.xml": string(junit)})
	if err := os.Symlink(filepath.Join(outside, "secret.xml"), filepath.Join(ws, "reports", "link.xml")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		reports []string
		nReport int
		missing string
	}{
		{"a glob reads every matching report", []string{"reports/u*.xml", "reports/it.xml"}, 2, ""},
		{"a missing report is missing evidence", []string{"reports/none.xml"}, 0, "missing"},
		{"a path out of the workspace is refused", []string{"../x.xml"}, 0, "escapes the workspace"},
		{"an absolute path is refused", []string{"/etc/passwd"}, 0, "escapes the workspace"},
		{"a symlink out of the workspace is refused", []string{"reports/link.xml"}, 0, "escapes the workspace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmpl := template()
			tmpl.DoneCheck.Reports = c.reports
			res, err := newTestVerifier().Verify(context.Background(), Request{Template: tmpl,
				Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: ws})
			if err != nil {
				t.Fatal(err)
			}
			f := res.Facts
			if len(f.Reports) != c.nReport || (c.missing == "") != (len(f.Missing) == 0) ||
				(c.missing != "" && !strings.Contains(strings.Join(f.Missing, ";"), c.missing)) {
				t.Fatalf("reports %d missing %q", len(f.Reports), f.Missing)
			}
			if c.missing != "" && res.Decision.Outcome == workitems.OutcomeClose {
				t.Fatal("closed without the report")
			}
		})
	}
}

func TestSecretsInOutputAreRedacted(t *testing.T) {
	t.Parallel()
	token := "ghp_" + strings.Repeat("Zz09", 10)
	stream := `{"Action":"run","Package":"p","Test":"TestAuth"}\n` +
		`{"Action":"output","Package":"p","Test":"TestAuth","Output":"    auth_test.go:9: login with ` + token + ` failed\\n"}\n` +
		`{"Action":"fail","Package":"p","Test":"TestAuth"}\n{"Action":"fail","Package":"p"}\n`
	res, err := newTestVerifier().Verify(context.Background(), Request{Template: template("printf '" + stream + "'; exit 1"),
		Item: item(workitems.Attempt{N: 1}), Attempt: 1, Exit: completed(), Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	all := fmt.Sprint(res.Decision, res.Verdict)
	if strings.Contains(all, token) {
		t.Fatalf("the token leaked: %s", all)
	}
	if res.Decision.Next == nil || !strings.Contains(res.Decision.Next.Input, "[redacted GitHub token]") {
		t.Fatalf("next %+v", res.Decision.Next)
	}
}

func TestDoneCheckLeavesNoChildren(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	// The check starts a background child that writes its pid and would outlive the check.
	res, err := runCommand(context.Background(), nil, proc.Spec{Command: `sleep 30 >/dev/null 2>&1 & echo $! > child.pid; echo done`, Dir: ws, Env: proc.BaseEnv(), Timeout: time.Minute}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(res.Stdout)
	if !res.OK() || !strings.Contains(res.Tail, "done") {
		t.Fatalf("result %+v", res)
	}
	b, err := os.ReadFile(filepath.Join(ws, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	// The child was killed with the group; once reaped by init its /proc entry goes away.
	// Poll /proc (the kernel gives no other signal to wait on), until the test's deadline.
	deadline := testwait.Deadline(t)
	for {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return // gone or a zombie: not running
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %s still running: %s", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHostileDoneCheckFindsNothing(t *testing.T) {
	// Not parallel: the worker's HOME is set to a home holding ~/.ssh.
	hs := proctest.NewHostile(t, t.TempDir(), proctest.RedisAddr())
	t.Setenv("HOME", hs.Home)
	r := proctest.Runner(t, proc.ModeBwrap)
	hs.Prepare(r)
	ws := t.TempDir()
	f := &Facts{Template: &config.Template{Name: "t"}, Item: &workitems.Item{ID: "it"}, Attempt: 1}
	res, err := runCommand(context.Background(), r, commandSpec(f, ws, hs.Script(), time.Minute), 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(res.Stdout)
	t.Logf("output:\n%s", res.Tail)
	hs.Check(t, res.Tail)
}
