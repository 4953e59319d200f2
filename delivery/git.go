package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
)

// git runs git in one workspace through proc.Git (no hooks, no signing, no pager, no prompt),
// with none of the caller's GIT_* variables and no system config.
type git struct {
	dir    string
	gitDir string   // the worker's own git directory of dir ("": dir's .git)
	env    []string // extra environment (author identity)
}

func (g git) runner() proc.Git {
	env := []string{"GIT_CONFIG_NOSYSTEM=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return proc.Git{Dir: g.dir, GitDir: g.gitDir, Env: append(env, g.env...)}
}

// cmd is the git command, not started, for the callers that stream (their failures go
// through fail).
func (g git) cmd(ctx context.Context, args ...string) *exec.Cmd {
	return g.runner().Command(ctx, args...)
}

// run returns git's stdout, trimmed; a failure carries git's stderr and, when ctx ended, the
// transient class.
func (g git) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	out, err := g.runner().Run(ctx, stdin, args...)
	if err != nil {
		var ge *proc.GitError
		if errors.As(err, &ge) {
			return "", g.fail(ctx, args, ge.Err, ge.Output)
		}
		return "", g.fail(ctx, args, err, "")
	}
	return strings.TrimSpace(string(out)), nil
}

func (g git) fail(ctx context.Context, args []string, err error, stderr string) error {
	e := fmt.Errorf("delivery: git %s in %s: %w: %s", args[0], g.dir, err, shorten.Clip(proc.Redact(strings.TrimSpace(stderr)), 300))
	if ctx.Err() != nil {
		return workitems.Classify(workitems.ClassTransient, fmt.Errorf("%w (%w)", e, ctx.Err()))
	}
	return e
}

const (
	trailerItem    = "Outerloop-Item"
	trailerAttempt = "Outerloop-Attempt"
)

// commitResult is the attempt's change as one commit.
type commitResult struct {
	commit, tree, baseTree string
	reused                 bool // HEAD already was this commit (a resumed attempt)
}

// commitChange makes the workspace's change one commit on base and points HEAD at it. With
// nothing changed (the tree equals base's, leaving out the excluded report files) it returns
// an empty commit id and changes no ref.
func commitChange(ctx context.Context, g git, base, message string, item string, attempt int, excludes []string) (commitResult, error) {
	base, err := g.run(ctx, nil, "rev-parse", "--verify", "--end-of-options", base+"^{commit}")
	if err != nil {
		return commitResult{}, err
	}
	baseTree, err := g.run(ctx, nil, "rev-parse", "--verify", base+"^{tree}")
	if err != nil {
		return commitResult{}, err
	}
	add := []string{"add", "-A", "--", "."}
	for _, p := range excludes {
		add = append(add, ":(exclude,glob)"+p)
	}
	if _, err := g.run(ctx, nil, add...); err != nil {
		return commitResult{}, err
	}
	tree, err := g.run(ctx, nil, "write-tree")
	if err != nil {
		return commitResult{}, err
	}
	if tree == baseTree {
		return commitResult{tree: tree, baseTree: baseTree}, nil
	}
	head, err := g.run(ctx, nil, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return commitResult{}, err
	}
	if head != base && isOurs(ctx, g, head, base, tree, item, attempt) {
		return commitResult{commit: head, tree: tree, baseTree: baseTree, reused: true}, nil
	}
	// commit-tree, not commit: whatever the loop committed itself is folded into one commit on
	// base, and no hook or template of the repository runs.
	commit, err := g.run(ctx, strings.NewReader(message), "commit-tree", tree, "-p", base)
	if err != nil {
		return commitResult{}, err
	}
	if _, err := g.run(ctx, nil, "update-ref", "-m", "outerloop: deliver "+item, "HEAD", commit); err != nil {
		return commitResult{}, err
	}
	return commitResult{commit: commit, tree: tree, baseTree: baseTree}, nil
}

// isOurs reports whether head is this attempt's delivery commit: its only parent is base, its
// tree is tree, and its message carries both trailers.
func isOurs(ctx context.Context, g git, head, base, tree, item string, attempt int) bool {
	info, err := g.run(ctx, nil, "log", "-1", "--format=%P%n%T%n%B", head)
	if err != nil {
		return false
	}
	parents, rest, _ := strings.Cut(info, "\n")
	headTree, body, _ := strings.Cut(rest, "\n")
	if parents != base || headTree != tree {
		return false
	}
	var gotItem, gotAttempt bool
	for line := range strings.SplitSeq(body, "\n") {
		switch strings.TrimSpace(line) {
		case trailerItem + ": " + item:
			gotItem = true
		case trailerAttempt + ": " + strconv.Itoa(attempt):
			gotAttempt = true
		}
	}
	return gotItem && gotAttempt
}

// changedFiles reads `git diff --numstat -z base commit`: per file, lines added and deleted
// (binary files have none), renames with their old path.
func changedFiles(ctx context.Context, g git, base, commit string) ([]workitems.ChangedFile, error) {
	out, err := g.run(ctx, nil, "diff", "--numstat", "-z", "--no-color", "--no-ext-diff", base, commit, "--")
	if err != nil {
		return nil, err
	}
	var files []workitems.ChangedFile
	recs := strings.Split(out, "\x00")
	for i := 0; i < len(recs); i++ {
		fields := strings.SplitN(recs[i], "\t", 3)
		if len(fields) != 3 {
			continue
		}
		f := workitems.ChangedFile{Path: fields[2]}
		if fields[2] == "" && i+2 < len(recs) { // a rename: "A\tD\t\0old\0new"
			f.From, f.Path = recs[i+1], recs[i+2]
			i += 2
		}
		if fields[0] == "-" {
			f.Binary = true
		} else {
			f.Added, _ = strconv.Atoi(fields[0])
			f.Deleted, _ = strconv.Atoi(fields[1])
		}
		files = append(files, f)
	}
	return files, nil
}

// boundedPatch returns `git diff --binary base commit`, at most limit bytes of it: a longer
// patch is cut at the last line end within the bound and a marker line is appended. total is
// the whole patch's size. Memory stays within the bound whatever the patch's size.
func boundedPatch(ctx context.Context, g git, base, commit string, limit int64) (patch []byte, total int64, truncated bool, err error) {
	args := []string{"diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", base, commit, "--"}
	c := g.cmd(ctx, args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, 0, false, fmt.Errorf("delivery: git diff: %w", err)
	}
	if err := c.Start(); err != nil {
		return nil, 0, false, fmt.Errorf("delivery: git diff: %w", err)
	}
	var buf bytes.Buffer
	n, rerr := io.Copy(&buf, io.LimitReader(stdout, limit))
	rest, rerr2 := io.Copy(io.Discard, stdout) // drain: git must finish, and we want the size
	werr := c.Wait()
	if werr != nil {
		return nil, 0, false, g.fail(ctx, args, werr, stderr.String())
	}
	if err := errors.Join(rerr, rerr2); err != nil {
		return nil, 0, false, fmt.Errorf("delivery: reading git diff: %w", err)
	}
	total = n + rest
	patch = buf.Bytes()
	if rest == 0 {
		return patch, total, false, nil
	}
	if i := bytes.LastIndexByte(patch, '\n'); i >= 0 {
		patch = patch[:i+1]
	}
	marker := fmt.Sprintf("# outerloop: patch truncated: %d of %d bytes kept (the bound is %d); the whole change is commit %s on %s\n",
		len(patch), total, limit, commit, base)
	return append(patch, marker...), total, true, nil
}

// reportExcludes turns done_check.reports globs into pathspecs relative to the workspace;
// patterns that leave it are dropped (the verifier refuses them anyway).
func reportExcludes(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		clean := filepath.ToSlash(filepath.Clean(p))
		if p == "" || filepath.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
			continue
		}
		out = append(out, clean)
	}
	return out
}
