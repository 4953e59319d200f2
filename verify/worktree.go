package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"outerloop/lib/shorten"
	"outerloop/proc"
)

// worktree is the workspace as the verifier reads it. Everything in it may have been written
// by the item's commands, so it is data: files are opened through an os.Root of the
// directory (no link followed out of it) and only when they are regular files (a FIFO would
// hang the verifier); git runs on the worker's own git directory of it when there is one
// (Request.GitDir), never on the .git in the tree.
type worktree struct {
	dir    string
	gitDir string // "": the tree's own .git (outerloop verify in a person's checkout)
}

func (w worktree) gitCmd() proc.Git { return proc.Git{Dir: w.dir, GitDir: w.gitDir} }

func (w worktree) git(ctx context.Context, args ...string) ([]byte, error) {
	out, err := w.gitCmd().Run(ctx, nil, args...)
	if err != nil {
		var ge *proc.GitError
		if errors.As(err, &ge) {
			return nil, fmt.Errorf("verify: git %s: %w: %s", args[0], ge.Err, shorten.Clip(ge.Output, 200))
		}
		return nil, err
	}
	return out, nil
}

func (w worktree) command(ctx context.Context, args ...string) *exec.Cmd {
	return w.gitCmd().Command(ctx, args...)
}

// ErrNotRegular means a path in the workspace is not a regular file (a FIFO, a device, a
// directory): the verifier does not read it.
var ErrNotRegular = errors.New("not a regular file")

// open opens rel, a path relative to the tree, for reading: through an os.Root of the tree, so
// a link that leads out of it is refused (ErrPathEscapes), and only a regular file.
func (w worktree) open(rel string) (*os.File, error) {
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return openRegular(root, rel)
}

func openRegular(root *os.Root, rel string) (*os.File, error) {
	// Non-blocking: opening a FIFO for reading would otherwise wait for a writer forever.
	fh, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if escapes(root.Name(), rel) {
			return nil, fmt.Errorf("%s: %w (a link out of the workspace)", rel, ErrPathEscapes)
		}
		return nil, err
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("%s: %w (%s)", rel, ErrNotRegular, fi.Mode().Type())
	}
	return fh, nil
}

// escapes says why the root refused rel, for the message: whether its links lead out of dir
// (the root itself does not say so in a way to test).
func escapes(dir, rel string) bool {
	real, err := filepath.EvalSymlinks(filepath.Join(dir, rel))
	if err != nil {
		return false
	}
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	r, err := filepath.Rel(base, real)
	return err != nil || !filepath.IsLocal(r)
}

// readFile reads at most limit bytes of rel (open's rules).
func (w worktree) readFile(rel string, limit int64) ([]byte, error) {
	fh, err := w.open(rel)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, limit))
}

var (
	hexCommit = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	refName   = regexp.MustCompile(`^refs/[A-Za-z0-9._/-]+$`)
)

// head is the commit the tree's own .git names as HEAD, read as data (HEAD, the loose ref,
// packed-refs) through the tree's os.Root: no git runs on the item's .git, and a .git that is
// a link or a gitdir file names nothing.
func (w worktree) head() (string, error) {
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	if fi, err := root.Lstat(".git"); err != nil || !fi.IsDir() {
		return "", errors.New("the workspace has no .git directory")
	}
	read := func(rel string) (string, error) {
		fh, err := openRegular(root, rel)
		if err != nil {
			return "", err
		}
		defer fh.Close()
		b, err := io.ReadAll(io.LimitReader(fh, 16<<20))
		return string(b), err
	}
	h, err := read(".git/HEAD")
	if err != nil {
		return "", fmt.Errorf("HEAD: %w", err)
	}
	h = strings.TrimSpace(h)
	if hexCommit.MatchString(h) {
		return h, nil
	}
	ref, ok := strings.CutPrefix(h, "ref: ")
	if !ok || !refName.MatchString(ref) || strings.Contains(ref, "..") {
		return "", fmt.Errorf("HEAD %q names no commit", shorten.Clip(h, 80))
	}
	if s, err := read(filepath.Join(".git", filepath.FromSlash(ref))); err == nil {
		if s = strings.TrimSpace(s); hexCommit.MatchString(s) {
			return s, nil
		}
	}
	packed, err := read(".git/packed-refs")
	if err != nil {
		return "", fmt.Errorf("HEAD: %s: not found", ref)
	}
	for l := range strings.SplitSeq(packed, "\n") {
		if sha, name, ok := strings.Cut(strings.TrimSpace(l), " "); ok && name == ref && hexCommit.MatchString(sha) {
			return sha, nil
		}
	}
	return "", fmt.Errorf("HEAD: %s: not found", ref)
}
