package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// What the worker keeps of a workspace lives beside it, never inside it. A sandboxed command
// can write anything in its workspace — the work tree, its .git, symlinks — so everything the
// worker itself reads, runs git on, binds or creates is named here from the workspace's path
// (the worker's own record) and never from a file in the workspace:
//
//	<ws>             the work tree; bound read-write; its .git is the item's, plain data to the worker
//	<ws>.git         the worker's git directory of the work tree (WorkspaceGitDir): never visible inside
//	<ws>.state/      what commands keep across commands outside the tree (WorkspaceStateDir):
//	    downloads/   network registries' package downloads (Go modules, npm's cache)
//	    gocache/     the Go build cache under build_cache: workspace
//	    home/        an exec agent's home (its sessions, for resume)
//
// The state directories are bound read-write at their own paths (home at SandboxHome); a
// command can put links inside them, but the directory itself is a mount point it cannot
// replace, and the worker creates what is in them through an os.Root (no link is followed out).

// WorkspaceGitDir is the worker's own git directory of workspace ws: the commits, index and
// configuration its host-side git (snapshots, restores, the delivery commit, the push, the
// verifier's diff) uses, out of every sandbox's sight. Git runs on it with Git.GitDir.
func WorkspaceGitDir(ws string) string {
	if ws == "" {
		return ""
	}
	return filepath.Clean(ws) + ".git"
}

// WorkspaceStateDir is where workspace ws keeps what its commands write outside its tree.
func WorkspaceStateDir(ws string) string {
	if ws == "" {
		return ""
	}
	return filepath.Clean(ws) + ".state"
}

// stateDir returns the directory name of ws's state directory, created (with its parents up
// to the state directory, which the worker owns) and, through an os.Root of the state
// directory, the subdirectory name itself: a command that made name a link out of the state
// directory gets an error, never a directory created or bound where the link points.
func stateDir(ws, name string) (string, error) {
	state := WorkspaceStateDir(ws)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return "", fmt.Errorf("proc: workspace state %s: %w", state, err)
	}
	return underRoot(state, name)
}

// ErrPathRefused means a directory the worker makes for a workspace's commands was replaced by
// something else — a link, a file — by those commands: the worker neither follows it nor
// makes or binds anything where it points, and the command is not started.
var ErrPathRefused = errors.New("refused: the workspace's commands replaced a directory the worker keeps for them")

// underRoot makes dir/name, one path element, a directory through an os.Root of dir and
// returns its path. Anything else already there (a link, wherever it points; a file) is
// refused with ErrPathRefused.
func underRoot(dir, name string) (string, error) {
	if name == "" || strings.ContainsRune(name, filepath.Separator) || name == "." || name == ".." {
		return "", fmt.Errorf("proc: %q is not one path element", name)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("proc: %s: %w", dir, err)
	}
	defer root.Close()
	p := filepath.Join(dir, name)
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("proc: %s: %w", p, err)
		}
		fi, err = root.Lstat(name) // made, or made by someone else meanwhile: look again
	}
	if err != nil {
		return "", fmt.Errorf("proc: %s: %w", p, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("proc: %s is a %s: %w", p, typeName(fi.Mode()), ErrPathRefused)
	}
	return p, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "link"
	case m.IsRegular():
		return "file"
	}
	return "special file (" + m.Type().String() + ")"
}

// repositoryKey names a repository's build cache: readable, and unique by a hash of the
// whole source as the config names it.
func repositoryKey(repo string) string {
	sum := sha256.Sum256([]byte(RedactURL(repo)))
	base := strings.TrimSuffix(filepath.Base(strings.TrimRight(RedactURL(repo), "/")), ".git")
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		}
	}
	name := strings.Trim(b.String(), ".")
	if len(name) > 40 {
		name = name[:40]
	}
	if name == "" {
		name = "repo"
	}
	return name + "-" + hex.EncodeToString(sum[:6])
}
