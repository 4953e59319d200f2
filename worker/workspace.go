package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"outerloop/lib/shorten"
	"outerloop/proc"
	"outerloop/workitems"
)

// Workspaces makes and finds attempts' working copies on this host, under Root (the work dir):
//
//	<root>/mirrors/<name>.git                             bare mirror of a source repository (mirror.go)
//	<root>/workspaces/<deployment>/<item>/attempt-N       the workspace: the work tree, with a .git of the item's
//	<root>/workspaces/<deployment>/<item>/attempt-N.git   the worker's own git directory of it (proc.WorkspaceGitDir)
//	<root>/workspaces/<deployment>/<item>/attempt-N.state what its commands keep outside the tree (proc.WorkspaceStateDir)
//	<root>/workspaces/<deployment>/<item>/attempt-N.json  what it is: item, attempt, base, mirror ref
//	<root>/workspaces/<deployment>/<item>/attempt-N.index the private index snapshots are taken with
//	<root>/workspaces/<deployment>/<item>/.tmp-*          a preparation under way (or crashed)
//
// A git source is cloned with --shared from the mirror (the mirror is fetched before each new
// attempt) and the base commit checked out: O(checkout), not O(history). A plain directory is
// copied and committed with a fixed author, committer and date, so that another host makes the
// same base commit from the same files. The base is what the attempt's diff is measured against.
//
// The workspace's own .git is the item's: its commands may rewrite its config, attributes,
// hooks and alternates, or replace it. Before any command runs, the worker copies it to
// attempt-N.git, which no sandbox sees, and every git command of the worker's on the
// workspace (snapshots, restores, the delivery commit and push, the verifier's diff) runs on
// that copy with the work tree beside it (proc.Git.GitDir): to the worker the item's .git is
// a directory git never reads.
//
// Use a Workspaces by pointer; its zero value (with Root set) is ready.
type Workspaces struct {
	Root string
	// BaseDir resolves relative repo paths (the config file's directory).
	BaseDir string
	// Deployment separates deployments sharing a work dir (the store's key prefix).
	Deployment string
	// SnapshotLimit bounds a stored workspace diff (default workitems.DefaultSnapshotLimit).
	SnapshotLimit int
	// Host is recorded on bases (default: the host name).
	Host string
	// Credentials gives the mirror's fetches of a remote repo its forge's credential (nil:
	// every repo is read anonymously).
	Credentials RepoCredentials
	// Clock stamps a workspace's creation (nil: the system clock).
	Clock workitems.Clock

	locks sync.Map // mirror name → semaphore
}

func (w *Workspaces) clock() workitems.Clock {
	if w.Clock == nil {
		return workitems.SystemClock{}
	}
	return w.Clock
}

// baseTag marks the commit an attempt started from, inside the workspace (for people and
// tools; the store's record is what counts).
const baseTag = "outerloop-base"

// Workspace is one attempt's working copy on this host.
type Workspace struct {
	Dir  string
	Base workitems.WorkspaceBase
	// MirrorCreated and MirrorFetched say what preparing it did to the mirror.
	MirrorCreated, MirrorFetched bool

	index string // the private index snapshots use (outside Dir, so the loop cannot touch it)
}

// GitDir is the worker's own git directory of the workspace (proc.WorkspaceGitDir).
func (ws *Workspace) GitDir() string { return proc.WorkspaceGitDir(ws.Dir) }

// Git returns the worker's git on ws: the work tree with the worker's own git directory,
// never the .git in the tree.
func (ws *Workspace) git(env []string) proc.Git { return workspaceGit(ws.Dir, env) }

// workspaceGit is the worker's git on the workspace dir (its git directory beside it).
func workspaceGit(dir string, env []string) proc.Git {
	g := gitIn(dir, env)
	g.GitDir = proc.WorkspaceGitDir(dir)
	return g
}

// workspaceMeta is attempt-N.json: enough for the sweeper to find the item and the mirror ref
// without looking inside the workspace, which the loop may have changed.
type workspaceMeta struct {
	Item       string                  `json:"item"`
	Attempt    int                     `json:"attempt"`
	Deployment string                  `json:"deployment"`
	Base       workitems.WorkspaceBase `json:"base"`
	Ref        string                  `json:"ref,omitempty"` // the base ref in the mirror
	Created    time.Time               `json:"created"`
}

func (w *Workspaces) deployment() string {
	d := strings.Trim(w.Deployment, ":")
	if d == "" {
		return "default"
	}
	return safeName(d)
}

func (w *Workspaces) deploymentDir() string {
	return filepath.Join(w.Root, "workspaces", w.deployment())
}

func (w *Workspaces) itemDir(itemID string) string {
	return filepath.Join(w.deploymentDir(), safeName(itemID))
}

// Path returns the directory of attempt n of an item on this host.
func (w *Workspaces) Path(itemID string, n int) string {
	return filepath.Join(w.itemDir(itemID), fmt.Sprintf("attempt-%d", n))
}

func (w *Workspaces) baseRef(itemID string, n int) string {
	return fmt.Sprintf("refs/outerloop/base/%s/%s/%d", w.deployment(), safeName(itemID), n)
}

func (w *Workspaces) host() string {
	if w.Host != "" {
		return w.Host
	}
	h, _ := os.Hostname()
	return h
}

func (w *Workspaces) snapshotLimit() int {
	if w.SnapshotLimit > 0 {
		return w.SnapshotLimit
	}
	return workitems.DefaultSnapshotLimit
}

// Prepare makes a fresh workspace for a new attempt: the mirror of a git source is fetched
// first and the base is the tip of its default branch. A workspace already at that path is
// replaced.
func (w *Workspaces) Prepare(ctx context.Context, itemID string, n int, repo string) (*Workspace, error) {
	return w.make(ctx, itemID, n, repo, "", nil)
}

// PrepareAt is Prepare from ref of a git source: a branch or tag (its tip after the fetch) or
// a commit (fetched by id when no branch reaches it). Empty ref is Prepare.
func (w *Workspaces) PrepareAt(ctx context.Context, itemID string, n int, repo, ref string) (*Workspace, error) {
	return w.make(ctx, itemID, n, repo, ref, nil)
}

// Recreate makes attempt n's workspace again at its recorded base, on this or another host,
// without moving the mirror (it is fetched only when it lacks the base commit). It fails with
// ErrBaseUnavailable when that commit cannot be made here any more.
func (w *Workspaces) Recreate(ctx context.Context, itemID string, n int, repo string, base workitems.WorkspaceBase) (*Workspace, error) {
	return w.make(ctx, itemID, n, repo, "", &base)
}

// Open returns the workspace of attempt n on this host; fs.ErrNotExist when there is none.
func (w *Workspaces) Open(itemID string, n int) (*Workspace, error) {
	dir := w.Path(itemID, n)
	meta, err := readMeta(dir + ".json")
	if err != nil {
		return nil, err
	}
	// The worker's git directory, not the tree's .git: a workspace made before the two were
	// apart has none, and is made again like one on another host.
	if fi, err := os.Lstat(proc.WorkspaceGitDir(dir)); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("worker: workspace %s: its git directory is not a directory: %w", dir, fs.ErrNotExist)
	}
	if meta.Item != itemID || meta.Attempt != n {
		return nil, fmt.Errorf("worker: workspace %s belongs to %s attempt %d: %w", dir, meta.Item, meta.Attempt, fs.ErrNotExist)
	}
	return &Workspace{Dir: dir, Base: meta.Base, index: dir + ".index"}, nil
}

func readMeta(path string) (*workspaceMeta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m workspaceMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("worker: %s: %w", path, err)
	}
	return &m, nil
}

// make builds attempt n's workspace in a locked temporary sibling and renames it into place;
// with want it must come out at that base.
func (w *Workspaces) make(ctx context.Context, itemID string, n int, repo, ref string, want *workitems.WorkspaceBase) (*Workspace, error) {
	dir := w.Path(itemID, n)
	src := w.resolve(repo)
	ws := &Workspace{Dir: dir, index: dir + ".index"}
	meta := workspaceMeta{Item: itemID, Attempt: n, Deployment: w.deployment(), Created: w.clock().Now().UTC()}
	base := workitems.WorkspaceBase{Source: proc.RedactURL(repo), Host: w.host(), At: meta.Created}
	fill := func(tmp string) error { return w.fillDir(ctx, tmp, src, repo, &base) }
	if ref != "" && (src == "" || !isGitRepo(src)) {
		return nil, fmt.Errorf("worker: ref %q: %s is not a git repository, so it has no refs", ref, proc.RedactURL(repo))
	}
	if src != "" && isGitRepo(src) && (want == nil || want.Kind != workitems.BaseEmpty) {
		wantCommit := ""
		if want != nil {
			if want.Kind != workitems.BaseGit || want.Mirror != MirrorName(src) {
				return nil, fmt.Errorf("worker: the attempt began from %s %s, the template's repo is now %s: %w",
					want.Kind, want.Source, proc.RedactURL(repo), ErrBaseUnavailable)
			}
			wantCommit = want.Commit
		}
		m, err := w.pinBase(ctx, src, w.baseRef(itemID, n), wantCommit, ref)
		if err != nil {
			return nil, err
		}
		ws.MirrorCreated, ws.MirrorFetched = m.created, m.fetched
		if !m.none {
			base.Kind, base.Commit, base.Tree, base.Branch, base.Mirror = workitems.BaseGit, m.commit, m.tree, m.branch, m.name
			meta.Ref = m.ref
			fill = func(tmp string) error { return cloneShared(ctx, m.dir, tmp, m.commit, m.branch) }
		}
	}
	if err := w.build(ctx, dir, fill, func(tmp string) error {
		if base.Commit == "" { // copy or empty: fillDir committed
			var err error
			if base.Commit, err = git(ctx, tmp, "rev-parse", "HEAD"); err != nil {
				return err
			}
			if base.Tree, err = git(ctx, tmp, "rev-parse", "HEAD^{tree}"); err != nil {
				return err
			}
		}
		if want != nil && (base.Commit != want.Commit || base.Kind != want.Kind) {
			return fmt.Errorf("worker: %s now makes base %s %.12s, the attempt began from %s %.12s: %w",
				proc.RedactURL(repo), base.Kind, base.Commit, want.Kind, want.Commit, ErrBaseUnavailable)
		}
		// A loose ref file is a tag to git; writing it spares a process per attempt.
		if err := os.WriteFile(filepath.Join(tmp, ".git", "refs", "tags", baseTag), []byte(base.Commit+"\n"), 0o644); err != nil {
			return err
		}
		// The private index starts as the checkout's own: same entries as the base tree (tracked
		// files that .gitignore matches stay tracked) and fresh stat data (no rehash on first use).
		if err := copyFile(filepath.Join(tmp, ".git", "index"), ws.index); err != nil {
			return err
		}
		// The worker's own git directory: the checkout's .git as it is now, before any command
		// of the item's can have touched it.
		if err := copyGitDir(filepath.Join(tmp, ".git"), proc.WorkspaceGitDir(dir)); err != nil {
			return fmt.Errorf("worker: workspace git directory: %w", err)
		}
		meta.Base = base
		b, _ := json.Marshal(meta)
		return writeFileAtomic(dir+".json", b)
	}); err != nil {
		if meta.Ref != "" {
			_ = w.unpinBase(context.WithoutCancel(ctx), base.Mirror, meta.Ref)
		}
		return nil, err
	}
	ws.Base = base
	return ws, nil
}

// fillDir copies a plain directory (or nothing) into tmp and commits it deterministically.
func (w *Workspaces) fillDir(ctx context.Context, tmp, src, repo string, base *workitems.WorkspaceBase) error {
	base.Kind = workitems.BaseEmpty
	if src != "" && !isGitRepo(src) {
		if err := copyTree(src, tmp); err != nil {
			return fmt.Errorf("worker: copy repo %q: %w", repo, err)
		}
		base.Kind = workitems.BaseCopy
	}
	if _, err := git(ctx, tmp, "init", "--quiet", "--template="); err != nil {
		return err
	}
	if _, err := git(ctx, tmp, "add", "-A"); err != nil {
		return err
	}
	_, err := gitRun(ctx, tmp, deterministicCommitEnv, nil, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "outerloop: attempt base")
	return err
}

// deterministicCommitEnv makes a base commit depend only on its tree: the same files make the
// same commit on every host.
var deterministicCommitEnv = []string{
	"GIT_AUTHOR_NAME=outerloop", "GIT_AUTHOR_EMAIL=outerloop@localhost", "GIT_AUTHOR_DATE=2000-01-01T00:00:00+0000",
	"GIT_COMMITTER_NAME=outerloop", "GIT_COMMITTER_EMAIL=outerloop@localhost", "GIT_COMMITTER_DATE=2000-01-01T00:00:00+0000",
}

// cloneShared makes tmp a clone of the mirror that borrows its objects (alternates) and checks
// out commit on the default branch's name. No template: no sample hooks copied per attempt.
func cloneShared(ctx context.Context, mirror, tmp, commit, branch string) error {
	if _, err := git(ctx, "", "clone", "--quiet", "--template=", "--shared", "--no-checkout", "--single-branch", "--no-tags", mirror, tmp); err != nil {
		return err
	}
	_, err := git(ctx, tmp, "checkout", "--quiet", "-B", branch, commit)
	return err
}

// build runs fill and finish in a fresh temporary sibling of dir, which it holds an flock on
// (the sweeper removes only unlocked ones: those of crashed preparations), then swaps it in.
func (w *Workspaces) build(ctx context.Context, dir string, fill, finish func(tmp string) error) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("worker: workspace: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return fmt.Errorf("worker: workspace: %w", err)
	}
	lock, err := os.Open(tmp)
	if err == nil {
		err = flock(lock, syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("worker: workspace lock: %w", err)
	}
	defer func() {
		_ = flock(lock, syscall.LOCK_UN)
		lock.Close()
		os.RemoveAll(tmp) // gone already when it was renamed into place
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	if err := finish(tmp); err != nil {
		return err
	}
	if _, err := os.Stat(dir); err == nil {
		old := filepath.Join(parent, fmt.Sprintf(".tmp-old-%s-%s", filepath.Base(dir), randomHex(8)))
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("worker: workspace: %w", err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("worker: workspace: %w", err)
	}
	return nil
}

// Remove deletes attempt n's workspace on this host with its files beside it and its base ref
// in the mirror, and returns the bytes it took. No workspace is not an error.
func (w *Workspaces) Remove(ctx context.Context, itemID string, n int) (int64, error) {
	dir := w.Path(itemID, n)
	meta, merr := readMeta(dir + ".json")
	own := []string{dir, proc.WorkspaceGitDir(dir), proc.WorkspaceStateDir(dir)}
	used := diskUsage(dir + ".index")
	for _, d := range own {
		used += diskUsage(d)
	}
	var errs []error
	// RemoveAll unlinks a link and never follows it: what a command linked to stays.
	for _, d := range own {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []string{dir + ".index", dir + ".json"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if merr == nil {
		if err := w.unpinBase(ctx, meta.Base.Mirror, meta.Ref); err != nil {
			errs = append(errs, err)
		}
	}
	_ = os.Remove(filepath.Dir(dir)) // the item's directory, once empty
	if err := errors.Join(errs...); err != nil {
		return used, fmt.Errorf("worker: remove workspace %s: %w", dir, err)
	}
	return used, nil
}

// Attempts lists the attempt numbers of an item that have a workspace (or its record) here.
func (w *Workspaces) Attempts(itemID string) []int {
	ents, _ := os.ReadDir(w.itemDir(itemID))
	var out []int
	seen := map[int]bool{}
	for _, e := range ents {
		name := e.Name()
		for _, suffix := range []string{".json", ".index", ".git", ".state"} {
			name = strings.TrimSuffix(name, suffix)
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(name, "attempt-")); err == nil && strings.HasPrefix(name, "attempt-") && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

func (w *Workspaces) resolve(repo string) string {
	if repo == "" || strings.Contains(repo, "://") || strings.HasPrefix(repo, "git@") || filepath.IsAbs(repo) {
		return repo
	}
	return filepath.Join(w.BaseDir, repo)
}

func isGitRepo(src string) bool {
	if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
		return true
	}
	if _, err := os.Stat(filepath.Join(src, ".git")); err == nil {
		return true
	}
	_, err := os.Stat(filepath.Join(src, "HEAD")) // a bare repository
	_, err2 := os.Stat(filepath.Join(src, "objects"))
	return err == nil && err2 == nil
}

// gitConfig is what the worker's git calls set on top of proc.Git's own settings (no hooks, no signing):
// a fixed identity and the default branch.
var gitConfig = []string{"user.name=outerloop", "user.email=outerloop@localhost", "init.defaultBranch=main"}

// gitIn is the worker's git in dir with extra environment (the worker's own plus env).
func gitIn(dir string, env []string) proc.Git {
	return proc.Git{Dir: dir, Env: append(os.Environ(), env...), Config: gitConfig}
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := gitRun(ctx, dir, nil, nil, args...)
	return strings.TrimSpace(string(out)), err
}

// gitRun runs git with extra environment and stdin and returns its output (stdout and stderr).
func gitRun(ctx context.Context, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	return runGit(ctx, gitIn(dir, env), stdin, args...)
}

// runGit runs g with stdin and returns its output (stdout and stderr).
func runGit(ctx context.Context, g proc.Git, stdin []byte, args ...string) ([]byte, error) {
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	out, err := g.Combined(ctx, in, args...)
	if err != nil {
		var ge *proc.GitError
		if errors.As(err, &ge) {
			return nil, fmt.Errorf("worker: git %s: %w: %s", strings.Join(args, " "), ge.Err, shorten.Clip(ge.Output, 500))
		}
		return nil, err
	}
	return out, nil
}

// copyTree copies regular files and directories (not .git, not symlinks pointing outside).
func copyTree(src, dst string) error {
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			return nil // a symlink could point out of the workspace
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return copyFileMode(path, target, fi.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string) error { return copyFileMode(src, dst, 0o644) }

// copyGitDir copies a fresh checkout's git directory (directories and regular files: a fresh
// clone has no links) to dst, replacing whatever was there.
func copyGitDir(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return copyFileMode(path, target, fi.Mode().Perm())
		}
		return fmt.Errorf("%s: not a regular file or directory", path)
	})
}

func copyFileMode(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
