package forge

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"outerloop/proc"
	"outerloop/workitems"
)

// PushRequest is one `git push --force-with-lease` of a commit to a branch (Push), or of the
// branch's deletion (DeleteBranch).
type PushRequest struct {
	Forge  string // the forge's key, for errors
	Dir    string // a git repository holding SHA (DeleteBranch: any, or "")
	URL    string // the remote: http(s), without credentials (Repository.CloneURL)
	SHA    string // the commit to push, full hex (DeleteBranch: unused)
	Branch string // pushed to refs/heads/Branch
	// Expected is the remote branch's commit as last read (RemoteBranch); "" means the branch
	// must not exist yet (DeleteBranch requires one). Anything else on the remote fails the
	// push with ErrStaleLease, so a push never overwrites work it has not seen.
	Expected string
	Auth     GitAuth // from Forge.GitAuth(URL)
	// Env is git's whole environment before Auth's entries (default proc.BaseEnv()).
	Env []string
	// Git is the git binary (default "git" on PATH).
	Git     string
	Timeout time.Duration // default 5 minutes
	// HTTPClient probes the remote when git fails without saying why (default: 30 s timeout).
	HTTPClient *http.Client
}

var hexSHA = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

func (r *PushRequest) check(op string) error {
	bad := func(format string, args ...any) error {
		return &Error{Forge: r.Forge, Op: op, Class: workitems.ClassInvalidInput, Err: fmt.Errorf(format, args...)}
	}
	if _, err := gitScope(r.URL); err != nil {
		return bad("%v", err)
	}
	if err := workitems.CheckBranchName(r.Branch); err != nil {
		return bad("branch: %v", err)
	}
	if op == opDelete && !hexSHA.MatchString(r.Expected) {
		if r.Expected == "" {
			return bad("no expected SHA: refusing to delete a branch nobody read")
		}
		return bad("expected %q is not a full commit SHA", r.Expected)
	}
	if op == "push" {
		if !hexSHA.MatchString(r.SHA) {
			return bad("sha %q is not a full commit SHA", r.SHA)
		}
		if r.Expected != "" && !hexSHA.MatchString(r.Expected) {
			return bad("expected %q is not a full commit SHA", r.Expected)
		}
		if r.Dir == "" {
			return bad("no repository directory")
		}
	}
	return nil
}

// PushArgs is the git command line Push runs (after the git binary). It holds no credentials:
// those go in the environment (GitAuth.Env).
func PushArgs(r PushRequest) []string {
	ref := "refs/heads/" + r.Branch
	return []string{"-C", r.Dir, "push", "--porcelain", "--force-with-lease=" + ref + ":" + r.Expected,
		r.URL, r.SHA + ":" + ref}
}

// Push runs `git push --force-with-lease=<branch>:<expected> <url> <sha>:refs/heads/<branch>`
// with the forge's credentials in the environment and classifies what happened:
// ErrStaleLease (conflict) when the branch moved, ErrProtectedBranch (permission) when the
// remote refused the update, ErrAuth (permission) when it refused the credentials, ErrNotFound
// when the repository is not there, transient when it could not be reached. Pushing what the
// branch already holds succeeds.
func Push(ctx context.Context, r PushRequest) error {
	if err := r.check("push"); err != nil {
		return err
	}
	res, out := runGit(ctx, &r, PushArgs(r))
	if res.ExitCode == 0 {
		return nil
	}
	return pushFailure(ctx, "push", &r, res, out)
}

// opDelete is DeleteBranch's operation, in its errors.
const opDelete = "delete branch"

// DeleteArgs is the git command line DeleteBranch runs (after the git binary): a push of
// nothing to the branch, leased on Expected. It holds no credentials.
func DeleteArgs(r PushRequest) []string {
	ref := "refs/heads/" + r.Branch
	return []string{"-C", r.Dir, "push", "--porcelain", "--force-with-lease=" + ref + ":" + r.Expected, r.URL, ":" + ref}
}

// DeleteBranch deletes refs/heads/<branch> on the remote if it still points at r.Expected,
// with git rather than an API, so it is the same on every forge and holds a lease:
// `git push --force-with-lease=<branch>:<expected> <url> :refs/heads/<branch>`, with the
// forge's credentials in the environment as Push has them. r.Expected is required (a delete
// without a lease is invalid_input, and git is not run); r.SHA is not used; r.Dir may be "" (a
// temporary empty repository is used: git pushes only from inside one).
//
// A branch that moved is ErrStaleLease, and nothing is deleted; a branch that is gone already
// is success; the remote's refusals are classified as Push's are (ErrProtectedBranch for a
// protected branch, ErrAuth, ErrNotFound, transient).
func DeleteBranch(ctx context.Context, r PushRequest) error {
	if err := r.check(opDelete); err != nil {
		return err
	}
	if r.Dir == "" {
		dir, err := os.MkdirTemp("", "outerloop-delete-")
		if err != nil {
			return &Error{Forge: r.Forge, Op: opDelete, Class: workitems.ClassInvariantViolation, Err: err}
		}
		defer os.RemoveAll(dir)
		// No credentials for a local init: a zero GitAuth.
		mk := PushRequest{Forge: r.Forge, Dir: dir, Env: r.Env, Git: r.Git, Timeout: r.Timeout}
		if res, out := runGit(ctx, &mk, []string{"init", "-q", "--bare", dir}); res.ExitCode != 0 {
			return &Error{Forge: r.Forge, Op: opDelete, Class: workitems.ClassInvariantViolation,
				Err: fmt.Errorf("git init of a temporary repository exited %d", res.ExitCode), Message: clip(lastLines(out, 4), 300)}
		}
		r.Dir = dir
	}
	res, out := runGit(ctx, &r, DeleteArgs(r))
	if res.ExitCode == 0 {
		return nil
	}
	err := pushFailure(ctx, opDelete, &r, res, out)
	if errors.Is(err, ErrStaleLease) {
		// git tells a branch that is not there from one that moved only by the same "stale
		// info": ask the remote which.
		if sha, rerr := RemoteBranch(ctx, r); rerr == nil && sha == "" {
			return nil
		}
	}
	return err
}

// RemoteBranch returns the commit refs/heads/<branch> points at on the remote, or "" when the
// branch does not exist (git ls-remote with the forge's credentials).
func RemoteBranch(ctx context.Context, r PushRequest) (string, error) {
	if err := r.check("ls-remote"); err != nil {
		return "", err
	}
	ref := "refs/heads/" + r.Branch
	res, out := runGit(ctx, &r, []string{"ls-remote", "--", r.URL, ref})
	if res.ExitCode != 0 {
		return "", pushFailure(ctx, "ls-remote", &r, res, out)
	}
	for l := range strings.SplitSeq(out, "\n") {
		if sha, name, ok := strings.Cut(strings.TrimSpace(l), "\t"); ok && name == ref {
			return sha, nil
		}
	}
	return "", nil
}

func runGit(ctx context.Context, r *PushRequest, args []string) (proc.Result, string) {
	env := r.Env
	if env == nil {
		env = proc.BaseEnv()
	}
	quoted := make([]string, 0, len(args)+9)
	quoted = append(quoted, shellQuote(cmp.Or(r.Git, "git")))
	// No hook of the pushed repository runs (it is the item's code, and the forge's
	// credentials are in the environment), no signing, no pager: proc.Git's settings.
	for _, a := range append(proc.GitFlags(), args...) {
		quoted = append(quoted, shellQuote(a))
	}
	res := proc.Run(ctx, proc.Spec{Command: strings.Join(quoted, " "), Dir: r.Dir, Env: r.Auth.Env(env),
		Timeout: cmp.Or(r.Timeout, 5*time.Minute), TailMax: 16 << 10})
	return res, r.Auth.redact(res.Tail)
}

// shellQuote quotes s for sh -c (proc runs commands through the shell).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// pushFailure classifies a failed git push or ls-remote from its porcelain ref lines (git's
// machine-readable output, see git-push(1) OUTPUT) or, when git stopped before any ref was
// reported, from what the remote answers to an authenticated probe.
func pushFailure(ctx context.Context, op string, r *PushRequest, res proc.Result, out string) error {
	e := &Error{Forge: r.Forge, Op: op, Message: clip(lastLines(out, 4), 300)}
	switch {
	case res.Canceled:
		e.Class, e.Err = workitems.ClassUnknown, cmp.Or(ctx.Err(), context.Canceled)
		return e
	case res.TimedOut:
		e.Class, e.Err = workitems.ClassTransient, errors.New("git timed out")
		return e
	case res.Err != nil:
		e.Class, e.Err = workitems.ClassInvariantViolation, fmt.Errorf("running git: %w", res.Err)
		return e
	}
	if flag, summary, ok := porcelainRef(out, "refs/heads/"+r.Branch); ok && flag == '!' {
		switch {
		case strings.HasPrefix(summary, "[remote rejected]") && strings.Contains(summary, "failed to update ref"):
			// Another push updated the ref at the same moment (the server's ref lock), not a
			// rule against us: like a lost lease, read the branch again and push again.
			e.Class, e.Err = workitems.ClassConflict, ErrStaleLease
		case strings.HasPrefix(summary, "[remote rejected]"):
			e.Class, e.Err = workitems.ClassPermission, ErrProtectedBranch
		case strings.Contains(summary, "(stale info)"):
			e.Class, e.Err = workitems.ClassConflict, ErrStaleLease
		default: // non-fast-forward, fetch first: the branch moved under us
			e.Class, e.Err = workitems.ClassConflict, ErrStaleLease
		}
		e.Message = summary
		return e
	}
	code, err := probe(ctx, r)
	switch {
	case err != nil:
		e.Class, e.Err = workitems.ClassTransient, fmt.Errorf("remote unreachable: %w", err)
	case code == http.StatusOK:
		// The remote takes our credentials; git failed for another reason (its message says).
		e.Class, e.Err = workitems.ClassUnknown, fmt.Errorf("git exited %d", res.ExitCode)
	default:
		e.StatusCode, e.Class = code, classForStatus(code)
		e.Err = cmp.Or(sentinelForStatus(code), error(fmt.Errorf("remote answered HTTP %d", code)))
	}
	return e
}

// porcelainRef finds the porcelain line of one ref: "<flag>\t<from>:<to>\t<summary>".
func porcelainRef(out, ref string) (flag byte, summary string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) != 3 || len(parts[0]) != 1 {
			continue
		}
		if _, to, _ := strings.Cut(parts[1], ":"); to == ref {
			return parts[0][0], parts[2], true
		}
	}
	return 0, "", false
}

// probe asks the remote's smart-HTTP endpoint whether it accepts our credentials for a push.
func probe(ctx context.Context, r *PushRequest) (int, error) {
	c := r.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(r.URL, "/")+"/info/refs?service=git-receive-pack", nil)
	if err != nil {
		return 0, err
	}
	if name, value, ok := strings.Cut(r.Auth.header, ": "); ok {
		req.Header.Set(name, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
