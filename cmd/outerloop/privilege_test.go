package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"outerloop/lib/redistest"
	"outerloop/lib/testwait"
	"outerloop/proc"
	"outerloop/workitems/config"
)

// runRootAs runs the CLI in this process as if its effective uid were euid.
func runRootAs(t *testing.T, euid int, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	root := newRootFor(&globals{out: &out, errw: &errw, euid: func() int { return euid }})
	root.SetArgs(args)
	err := root.Execute()
	return out.String() + errw.String(), err
}

// twoTemplates is a config with one sandboxed template and one that opts out.
const twoTemplates = `defaults:
  budget: {wall_time: 1m}
templates:
  - name: boxed
    goal: g
    repo: .
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["sh -c true"]}
  - name: trusted
    goal: g
    repo: .
    sandbox: {mode: off}
    loop: {kind: script, commands: ["true"]}
    done_check: {commands: ["sh -c true"]}
`

// logRecords decodes a JSON log, one record a line.
func logRecords(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if l == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("a log line that is not JSON: %q", l)
		}
		out = append(out, r)
	}
	return out
}

// rootRecords returns the log's records saying the worker runs as root.
func rootRecords(recs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["msg"] == "worker runs as root" {
			out = append(out, r)
		}
	}
	return out
}

// checkRootRecord checks the warning says what stays confined, what runs as root (naming the
// templates without a sandbox) and what to do.
func checkRootRecord(t *testing.T, r map[string]any, unsandboxed string) {
	t.Helper()
	if r["level"] != "WARN" {
		t.Errorf("level %v, want WARN", r["level"])
	}
	for key, want := range map[string]string{
		"sandboxed":   "commands an item runs stay in the sandbox, but as root's uid outside",
		"unsandboxed": "its git operations on the host and every command of a template with sandbox mode off run as root",
		"fix":         "unprivileged user",
	} {
		if s, _ := r[key].(string); !strings.Contains(s, want) {
			t.Errorf("%s = %q, want it to say %q", key, s, want)
		}
	}
	fix, _ := r["fix"].(string)
	if !strings.Contains(fix, "uid 10001") {
		t.Errorf("fix %q does not name the image's user", fix)
	}
	for _, file := range []string{"deploy/systemd/outerloop-worker.service", "docs/containers.md"} {
		if !strings.Contains(fix, file) {
			t.Errorf("fix %q does not point to %s", fix, file)
		}
		if _, err := os.Stat(filepath.Join("..", "..", file)); err != nil {
			t.Errorf("fix points to %s: %v", file, err)
		}
	}
	if got, _ := r["without_sandbox"].(string); got != unsandboxed {
		t.Errorf("without_sandbox = %q, want %q", got, unsandboxed)
	}
}

// The start log's warning, from the effective uid it is given: one warning as root naming the
// templates whose commands run unsandboxed, nothing at all otherwise.
func TestLogPrivilegeWarnsOnlyForRoot(t *testing.T) {
	t.Parallel()
	cfg, err := config.ParseConfig([]byte(twoTemplates))
	if err != nil {
		t.Fatal(err)
	}
	r := &proc.Runner{Mode: proc.ModeBwrap}
	t.Run("RootIsWarnedWithWhatToDo", func(t *testing.T) {
		t.Parallel()
		var b bytes.Buffer
		logPrivilege(slog.New(slog.NewJSONHandler(&b, nil)), 0, cfg, r)
		recs := logRecords(t, b.String())
		if len(recs) != 1 || len(rootRecords(recs)) != 1 {
			t.Fatalf("want one warning, got:\n%s", b.String())
		}
		checkRootRecord(t, recs[0], `template "trusted"`)
	})
	t.Run("AnUnprivilegedUserIsNotWarned", func(t *testing.T) {
		t.Parallel()
		for _, euid := range []int{1, 1000, 10001} {
			var b bytes.Buffer
			logPrivilege(slog.New(slog.NewJSONHandler(&b, nil)), euid, cfg, r)
			if b.Len() != 0 {
				t.Errorf("euid %d logged:\n%s", euid, b.String())
			}
		}
	})
}

// validate run as root warns, naming what runs as root, the templates without a sandbox and
// what to do, and still exits 0 on an otherwise clean config; as another user it does not
// warn. The warning comes even when the config does not load.
func TestValidateWarnsWhenRunAsRootWithoutFailing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(path, []byte(twoTemplates), 0o644); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: running as root (euid 0): a worker started like this runs as root: "
	t.Run("AsRootItWarnsAndExitsZero", func(t *testing.T) {
		t.Parallel()
		out, err := runRootAs(t, 0, "--config", path, "validate")
		if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "\nok") {
			t.Fatalf("validate as root: %v, want exit 0 and ok\n%s", err, out)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "warning: ") {
				if line != "" {
					t.Fatalf("more than one warning:\n%s", out)
				}
				line = l
			}
		}
		for _, want := range []string{warning, rootConfined, rootUnconfined, `(here: template "trusted")`, rootHint} {
			if !strings.Contains(line, want) {
				t.Errorf("the warning lacks %q:\n%s", want, line)
			}
		}
		if strings.Contains(line, `"boxed"`) {
			t.Errorf("the warning names the sandboxed template:\n%s", line)
		}
	})
	t.Run("AsAnotherUserItDoesNotWarn", func(t *testing.T) {
		t.Parallel()
		out, err := runRootAs(t, 10001, "--config", path, "validate")
		if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "\nok") {
			t.Fatalf("validate as uid 10001: %v\n%s", err, out)
		}
		if strings.Contains(out, "warning:") || strings.Contains(out, "running as root") {
			t.Errorf("validate as uid 10001 warns:\n%s", out)
		}
	})
	t.Run("AsRootWithABrokenConfigItWarnsAndExitsOne", func(t *testing.T) {
		t.Parallel()
		out, err := runRootAs(t, 0, "--config", filepath.Join(dir, "none.yaml"), "validate")
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 1 {
			t.Fatalf("validate of a missing config: %v, want exit 1\n%s", err, out)
		}
		if !strings.Contains(out, warning) || strings.Contains(out, "(here: ") {
			t.Errorf("want the warning without templates:\n%s", out)
		}
	})
}

// nobody is the uid and gid an unprivileged worker runs as in TestAWorkerSaysAtStartWhetherItRunsAsRoot.
const nobody = 65534

// The real worker command reads its own effective uid: started as root its start log warns,
// started as an unprivileged user it does not. As root this test runs both (the second as
// nobody); as another user only the second, as itself.
func TestAWorkerSaysAtStartWhetherItRunsAsRoot(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	// Readable by nobody: the binary's directory, the config, and a work dir of its own.
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "outerloop-euid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "outerloop.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(twoTemplates, "templates:", "sandbox: {mode: off}\ntemplates:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	start := func(t *testing.T, asNobody bool) []map[string]any {
		env := redistest.New(t)
		work := filepath.Join(dir, "work-"+strings.ReplaceAll(t.Name(), "/", "-"))
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config", cfg, "--redis", redistest.URL(), "--prefix", env.Prefix, "--queue", env.Queue,
			"--log-format", "json", "--workdir", work, "worker", "--concurrency", "1")
		cmd.Env = append(os.Environ(), "HOME="+work, "TMPDIR="+work)
		if asNobody {
			if err := os.Chown(work, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		running := make(chan struct{})
		done := make(chan []string)
		go func() {
			signal := running // closed once, at the first "worker running"
			var lines []string
			sc := bufio.NewScanner(stderr)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if strings.Contains(sc.Text(), `"msg":"worker running"`) && signal != nil {
					close(signal)
					signal = nil
				}
			}
			done <- lines
		}()
		var lines []string
		select {
		case <-running:
		case lines = <-done:
			_ = cmd.Wait()
			t.Fatalf("the worker exited before it ran:\n%s", strings.Join(lines, "\n"))
		case <-testwait.After(t):
			_ = cmd.Process.Kill()
			lines = <-done
			_ = cmd.Wait()
			t.Fatalf("the worker did not log that it runs:\n%s", strings.Join(lines, "\n"))
		}
		// Its start is logged whole before it waits for the signal: stop it and read the rest.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		lines = <-done
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the worker: %v\n%s", err, strings.Join(lines, "\n"))
		}
		recs := logRecords(t, strings.Join(lines, "\n"))
		if !slices.ContainsFunc(recs, func(r map[string]any) bool { return r["msg"] == "sandbox" }) {
			t.Fatalf("no sandbox line at start:\n%s", strings.Join(lines, "\n"))
		}
		if t.Failed() {
			t.Logf("worker log:\n%s", strings.Join(lines, "\n"))
		}
		return recs
	}
	t.Run("AsRootItWarns", func(t *testing.T) {
		t.Parallel()
		if !root {
			t.Skipf("this test runs as uid %d: a worker it starts cannot be root", os.Geteuid())
		}
		got := rootRecords(start(t, false))
		if len(got) != 1 {
			t.Fatalf("%d warnings that the worker runs as root, want 1", len(got))
		}
		checkRootRecord(t, got[0], `templates "boxed", "trusted"`) // the deployment's mode is off
	})
	t.Run("AsAnUnprivilegedUserItDoesNot", func(t *testing.T) {
		t.Parallel()
		if got := rootRecords(start(t, root)); len(got) != 0 {
			t.Fatalf("a worker that is not root warns it is: %v", got)
		}
	})
}
