package proc_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"outerloop/proc"
)

func TestGitRunsWithoutHooksAndRedactsItsErrors(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	g := proc.Git{Dir: dir, Config: []string{"init.defaultBranch=main"}}
	if _, err := g.Run(t.Context(), nil, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	out, err := g.Run(t.Context(), nil, "config", "--get", "core.hooksPath")
	if err != nil || strings.TrimSpace(string(out)) != "/dev/null" {
		t.Errorf("core.hooksPath: %q, %v", out, err)
	}
	out, err = g.Run(t.Context(), strings.NewReader("hello\n"), "hash-object", "--stdin")
	if err != nil || len(strings.TrimSpace(string(out))) != 40 {
		t.Errorf("stdin: %q, %v", out, err)
	}

	tok := "ghp_" + strings.Repeat("x", 36)
	_, err = proc.Git{Dir: dir, Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "***") }}.
		Run(t.Context(), nil, "rev-parse", "--verify", "--quiet", "--end-of-options", "refs/heads/"+tok+"s3cr3t")
	var ge *proc.GitError
	if !errors.As(err, &ge) {
		t.Fatalf("want a *GitError, got %v", err)
	}
	if ge.Subcommand != "rev-parse" || ge.ExitCode == 0 {
		t.Errorf("subcommand %q, exit %d", ge.Subcommand, ge.ExitCode)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Error("the exit status is not in the chain")
	}
	_, err = proc.Git{Dir: dir, Redact: func(s string) string { return strings.ReplaceAll(s, "s3cr3t", "***") }}.
		Run(t.Context(), nil, "checkout", tok+"s3cr3t")
	if err == nil || strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "s3cr3t") ||
		!strings.HasPrefix(err.Error(), "git checkout: ") {
		t.Errorf("error not redacted or not named: %v", err)
	}
}
