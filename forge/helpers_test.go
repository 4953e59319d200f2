package forge

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"outerloop/lib/giteatest"
	"outerloop/lib/testlog"
	"outerloop/workitems"
)

func TestMain(m *testing.M) { giteatest.Main(m, func() error { return goleak.Find() }) }

// gitRun runs git in dir (no credentials) and returns its trimmed output.
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// localRepo makes a git repository with one commit on main and returns its dir and HEAD.
func localRepo(t testing.TB) (string, string) {
	t.Helper()
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q")
	commitFile(t, dir, "README.md", "# sample\n", "first")
	return dir, gitRun(t, dir, "rev-parse", "HEAD")
}

// commitFile writes a file and commits it, returning the new HEAD.
func commitFile(t testing.TB, dir, name, content, msg string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, dir, "add", name)
	gitRun(t, dir, "commit", "-qm", msg)
	return gitRun(t, dir, "rev-parse", "HEAD")
}

// argvRecorder is a git wrapper that appends its argv and the names (not values) of the
// GIT_CONFIG_* entries it got to a file, then runs the real git: what Push exec'd.
func argvRecorder(t testing.TB) (bin, log string) {
	t.Helper()
	dir := t.TempDir()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "argv.log")
	bin = filepath.Join(dir, "git")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + log + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

// wantErr checks err is an *Error of class with sentinel (nil: any).
func wantErr(t testing.TB, err error, class workitems.ErrorClass, sentinel error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *forge.Error, got %T %v", err, err)
	}
	if got := workitems.ClassOf(err); got != class {
		t.Fatalf("class %s, want %s: %v", got, class, err)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("want errors.Is(%v), got %v", sentinel, err)
	}
	return e
}

func noSecret(t testing.TB, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Fatalf("a secret appears in %s:\n%s", where, text)
		}
	}
}

var bg = context.Background()

func newLogger(buf *testlog.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
