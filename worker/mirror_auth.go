package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/proc"
)

// GitCredential is what git needs to read a private repository (forge.GitAuth): entries for a
// git child's environment (an Authorization header in http.<origin>.extraHeader, given through
// GIT_CONFIG_COUNT/KEY/VALUE so it is never in an argv, a URL or the mirror's config), and a
// way to scrub it from what git prints.
type GitCredential interface {
	Env(env []string) []string
	Redact(s string) string
}

// RepoCredentials returns the credential a repository (a template's repo:) is read with, nil
// to read it anonymously, and a note for error messages saying which credential that was
// (a forge and its variable, never a value).
type RepoCredentials func(repo string) (cred GitCredential, note string)

// remote is a source as the mirror's fetches reach it.
type remote struct {
	src  string
	cred GitCredential // nil: anonymous
	note string
}

func (w *Workspaces) remote(src string) remote {
	r := remote{src: src}
	if w.Credentials != nil && (strings.Contains(src, "://") || strings.HasPrefix(src, "git@")) {
		r.cred, r.note = w.Credentials(src)
	}
	return r
}

// git runs a git command that talks to the remote, with its credential in the environment.
func (r remote) git(ctx context.Context, dir string, args ...string) (string, error) {
	if r.cred == nil {
		return git(ctx, dir, args...)
	}
	g := gitIn(dir, nil)
	g.Env, g.Redact = r.cred.Env(os.Environ()), r.cred.Redact
	out, err := g.Combined(ctx, nil, args...)
	if err != nil {
		var ge *proc.GitError
		msg := ""
		if errors.As(err, &ge) {
			err, msg = ge.Err, shorten.Clip(ge.Output, 500)
		}
		// git asks for a user name when the server answers 401 to the header: say what it
		// means first (an escalation's headline is clipped), and name only git's subcommand
		// (the error already names the repo).
		if strings.Contains(msg, "could not read Username") || strings.Contains(msg, "Authentication failed") {
			return "", fmt.Errorf("the forge refused the token (HTTP 401): worker: git %s: %w: %s", args[0], err, msg)
		}
		return "", fmt.Errorf("worker: git %s: %w: %s", args[0], err, msg)
	}
	return strings.TrimSpace(string(out)), nil
}

// wrap puts the note (which credential was used) before a failed fetch's error, where a
// clipped escalation headline still shows it.
func (r remote) wrap(err error) error {
	if err == nil || r.note == "" {
		return err
	}
	return fmt.Errorf("%s: %w", r.note, err)
}
