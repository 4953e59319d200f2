package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"outerloop/lib/shorten"
)

// gitConfig is what every git call of outerloop starts with, ahead of the caller's own
// settings: no hooks (a hook in a workspace is the item's code, and must not run on the host
// with the forge's credentials), no signing (of commits or tags) and no pager, so git's
// behaviour and output are ours, not the host user's.
func gitConfig() []string {
	return []string{"core.hooksPath=/dev/null", "commit.gpgsign=false", "tag.gpgsign=false", "core.pager=cat"}
}

// GitFlags is gitConfig as git's leading "-c key=value" arguments, for a git run through
// Runner rather than Git (forge's push, which may name its own git binary).
func GitFlags() []string {
	var out []string
	for _, kv := range gitConfig() {
		out = append(out, "-c", kv)
	}
	return out
}

// gitEnv is appended to every git call's environment: git never prompts for a credential (a
// prompt would hang an attempt).
func gitEnv() []string { return []string{"GIT_TERMINAL_PROMPT=0"} }

// Git is the one way outerloop runs git itself (not a command of an item's, which Runner
// runs): git -c gitConfig… -c Config… [-C Dir] args…, with Env plus gitEnv. A failure is a
// *GitError naming the subcommand, with what git printed redacted (Redact, then the caller's
// own Redact, which knows the credential it put in Env). A credential goes in Env (an
// http.extraHeader through GIT_CONFIG_COUNT/KEY/VALUE), never in args or a URL.
type Git struct {
	Dir string // the repository, or with GitDir its work tree (git -C Dir); "": the worker's directory
	// GitDir is the repository's git directory when it is kept apart from the work tree (a
	// workspace's: WorkspaceGitDir). Git then runs with --git-dir and --work-tree and never
	// looks for a .git in Dir, so nothing written in the work tree — its .git included, whose
	// config, attributes drivers, hooks and alternates an item controls — configures it.
	GitDir string
	Env    []string            // the environment to start from; nil: the worker's own (os.Environ())
	Config []string            // more key=value settings, after gitConfig
	Redact func(string) string // scrubs the caller's credential from git's output; nil: none
}

// Command returns the git command, not started, for callers that stream its output. Its
// failures are the caller's to redact (Git.Err).
func (g Git) Command(ctx context.Context, args ...string) *exec.Cmd {
	full := make([]string, 0, 2*(len(gitConfig())+len(g.Config))+4+len(args))
	for _, kv := range gitConfig() {
		full = append(full, "-c", kv)
	}
	for _, kv := range g.Config {
		full = append(full, "-c", kv)
	}
	if g.Dir != "" {
		full = append(full, "-C", g.Dir)
	}
	if g.GitDir != "" {
		// Absolute: -C moves git before it reads them.
		gd, _ := filepath.Abs(g.GitDir)
		full = append(full, "--git-dir="+gd)
		if g.Dir != "" {
			wt, _ := filepath.Abs(g.Dir)
			full = append(full, "--work-tree="+wt)
		}
	}
	full = append(full, args...)
	c := exec.CommandContext(ctx, "git", full...)
	env := g.Env
	if env == nil {
		env = os.Environ()
	}
	c.Env = append(append([]string(nil), env...), gitEnv()...)
	return c
}

// Run runs git and returns its stdout (also when it fails: a merge-tree's conflicts come with
// exit code 1); stderr goes into the error.
func (g Git) Run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	c := g.Command(ctx, args...)
	c.Stdin = stdin
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	return stdout.Bytes(), g.Err(args, err, stderr.String())
}

// Combined runs git and returns what it printed on stdout and stderr together (also when it
// fails, then redacted in the error as well).
func (g Git) Combined(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	c := g.Command(ctx, args...)
	c.Stdin = stdin
	out, err := c.CombinedOutput()
	return out, g.Err(args, err, string(out))
}

// Err makes err, the failure of git args that printed output, a *GitError (nil stays nil).
func (g Git) Err(args []string, err error, output string) error {
	if err == nil {
		return nil
	}
	output = Redact(strings.TrimSpace(output))
	if g.Redact != nil {
		output = g.Redact(output)
	}
	e := &GitError{Subcommand: gitSubcommand(args), Err: err, Output: output}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		e.ExitCode = ee.ExitCode()
	}
	return e
}

// GitError is a failed git command.
type GitError struct {
	Subcommand string // "fetch", "commit-tree", …
	Err        error  // the exit status, or why git did not run
	ExitCode   int    // git's exit code; 0 when it did not run; -1 when a signal ended it
	Output     string // what git printed (stderr, or stdout and stderr), trimmed and redacted
}

func (e *GitError) Error() string {
	if e.Output == "" {
		return fmt.Sprintf("git %s: %v", e.Subcommand, e.Err)
	}
	return fmt.Sprintf("git %s: %v: %s", e.Subcommand, e.Err, shorten.Clip(e.Output, 500))
}

func (e *GitError) Unwrap() error { return e.Err }

// gitSubcommand is the first argument that is not an option (nor an option's value).
func gitSubcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return "(no subcommand)"
}
