package worker

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"outerloop/workitems"
)

// Workspaces makes one fresh working copy per attempt under Root: a clone of the template's
// repo when it is a git repository (or URL), a copy of the directory otherwise, turned into a
// git repository with a base commit so that the verifier can read the diff. A resumed attempt
// finds its workspace where it left it.
type Workspaces struct {
	Root string
	// BaseDir resolves relative repo paths (the config file's directory).
	BaseDir string
}

// baseTag marks the commit an attempt started from.
const baseTag = "outerloop-base"

// Path returns the directory of attempt n of an item.
func (w Workspaces) Path(itemID string, n int) string {
	safe := strings.NewReplacer("/", "_", ":", "_", "@", "_at_").Replace(itemID)
	return filepath.Join(w.Root, safe, fmt.Sprintf("attempt-%d", n))
}

// Prepare returns the attempt's workspace and its base commit, creating it when missing.
func (w Workspaces) Prepare(ctx context.Context, it *workitems.Item, n int, repo string, clean bool) (dir, base string, err error) {
	dir = w.Path(it.ID, n)
	if clean {
		if err := os.RemoveAll(dir); err != nil {
			return "", "", fmt.Errorf("worker: workspace %s: %w", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		base, err := git(ctx, dir, "rev-parse", baseTag)
		return dir, base, err
	}
	// Build in a temporary sibling and rename: a crash mid-copy leaves no half workspace.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", fmt.Errorf("worker: workspace: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-")
	if err != nil {
		return "", "", fmt.Errorf("worker: workspace: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := w.resolve(repo)
	switch {
	case src == "":
		if _, err := git(ctx, tmp, "init", "-q"); err != nil {
			return "", "", err
		}
	case isGitRepo(src):
		if err := os.Remove(tmp); err != nil {
			return "", "", err
		}
		if _, err := git(ctx, "", "clone", "-q", "--no-hardlinks", src, tmp); err != nil {
			return "", "", fmt.Errorf("worker: clone repo %q: %w", repo, err)
		}
	default:
		if err := copyTree(src, tmp); err != nil {
			return "", "", fmt.Errorf("worker: copy repo %q: %w", repo, err)
		}
		if _, err := git(ctx, tmp, "init", "-q"); err != nil {
			return "", "", err
		}
	}
	if _, err := git(ctx, tmp, "add", "-A"); err != nil {
		return "", "", err
	}
	if _, err := git(ctx, tmp, "commit", "-q", "--allow-empty", "-m", "outerloop: attempt base"); err != nil {
		return "", "", err
	}
	if _, err := git(ctx, tmp, "tag", "-f", baseTag); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", "", fmt.Errorf("worker: workspace: %w", err)
	}
	base, err = git(ctx, dir, "rev-parse", baseTag)
	return dir, base, err
}

func (w Workspaces) resolve(repo string) string {
	if repo == "" || strings.Contains(repo, "://") || strings.HasPrefix(repo, "git@") || filepath.IsAbs(repo) {
		return repo
	}
	return filepath.Join(w.BaseDir, repo)
}

func isGitRepo(src string) bool {
	if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
		return true
	}
	_, err := os.Stat(filepath.Join(src, ".git"))
	return err == nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "user.name=outerloop", "-c", "user.email=outerloop@localhost",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("worker: git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
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
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fi, _ := d.Info()
			return os.WriteFile(target, b, fi.Mode().Perm())
		}
		return nil
	})
}
